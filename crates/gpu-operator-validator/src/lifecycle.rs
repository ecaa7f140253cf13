//! The validator pod's main container: `idle` waits for SIGTERM once the init containers (the
//! checks) have passed, and `cleanup` (its preStop hook) removes the `*-ready` status files, so a
//! restarted validator gates every operand again — as NVIDIA's main container and hook do.
//! `wait <component>` is the barrier other operands' init containers run: it returns once the
//! validator has left `<component>-ready`.

use std::{io, path::Path, time::Duration};

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

/// Waits until `dir/<component>-ready` exists, checking every `interval` and saying what it
/// waits for once; a node-side barrier, so a file check is all there is to do.
pub async fn wait_for(dir: &Path, component: &str, interval: Duration) {
    let file = dir.join(format!("{component}-ready"));
    let mut said = false;
    while !file.is_file() {
        if !said {
            println!(
                "waiting for the {component} validation ({})",
                file.display()
            );
            said = true;
        }
        tokio::time::sleep(interval).await;
    }
    println!("{component} validation found");
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

    #[tokio::test]
    async fn wait_for_returns_once_the_status_file_appears() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_owned();
        let waiter = tokio::spawn(async move {
            wait_for(&path, "toolkit", Duration::from_millis(10)).await;
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished());
        std::fs::write(dir.path().join("toolkit-ready"), "").unwrap();
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap();
    }
}
