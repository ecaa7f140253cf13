//! The validator pod's main container: `idle` waits for SIGTERM once the init containers (the
//! checks) have passed, and `cleanup` (its preStop hook) removes the `*-ready` status files, so a
//! restarted validator gates every operand again — as NVIDIA's main container and hook do.

use std::{io, path::Path};

/// Removes every `*-ready` status file (and NVIDIA's hidden `.driver-ctr-ready`) in `dir`;
/// returns how many were removed. A missing directory removes nothing.
pub fn cleanup(dir: &Path) -> io::Result<usize> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(error) => return Err(error),
    };
    let mut removed = 0;
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        if name.to_string_lossy().ends_with("-ready") && entry.file_type()?.is_file() {
            std::fs::remove_file(entry.path())?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// Waits until the process gets SIGTERM or SIGINT.
pub async fn idle() -> io::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => Ok(()),
        result = tokio::signal::ctrl_c() => result,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cleanup_removes_only_status_files() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "driver-ready",
            "toolkit-ready",
            ".driver-ctr-ready",
            "workload-type",
        ] {
            std::fs::write(dir.path().join(name), "x").unwrap();
        }
        assert_eq!(cleanup(dir.path()).unwrap(), 3);
        let left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, ["workload-type"]);
        assert_eq!(cleanup(&dir.path().join("absent")).unwrap(), 0);
    }
}
