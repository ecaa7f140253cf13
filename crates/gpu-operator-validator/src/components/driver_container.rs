//! The operator's driver container on this node. Its startup probe writes `.driver-ctr-ready`
//! once the driver is installed, with `KEY=VALUE` flags for the extra kernel modules it loads
//! (GPUDirect Storage, GDRCopy, GPUDirect RDMA). Without a host driver, the driver check waits for
//! that file, as NVIDIA's does, and then requires every flagged module to be loaded.

use std::{io, path::Path};

use gpu_operator_api::validator::{reason, status_file};

use super::Failed;

/// The flags of `.driver-ctr-ready` and the kernel module each one requires.
const EXTRA_MODULES: [(&str, &str); 3] = [
    ("GDS_ENABLED", "nvidia_fs"),
    ("GDRCOPY_ENABLED", "gdrdrv"),
    ("GPU_DIRECT_RDMA_ENABLED", "nvidia_peermem"),
];

/// The kernel modules the finished driver container says it loaded; an error while it has not
/// finished.
pub fn finished(output_dir: &Path) -> Result<Vec<&'static str>, Failed> {
    let file = output_dir.join(status_file::DRIVER_CONTAINER_READY);
    let text = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(Failed::new(
                reason::DRIVER_CONTAINER_NOT_READY,
                format!(
                    "no host driver, and the operator's driver container has not finished on this node: {} does not exist yet (its startup probe writes it)",
                    file.display()
                ),
            ));
        }
        Err(e) => {
            return Err(Failed::new(
                reason::STATUS_FILE_ERROR,
                format!("reading {}: {e}", file.display()),
            ));
        }
    };
    let enabled = |key: &str| {
        text.lines().any(|line| {
            line.split_once('=')
                .is_some_and(|(k, v)| k.trim() == key && v.trim().eq_ignore_ascii_case("true"))
        })
    };
    Ok(EXTRA_MODULES
        .iter()
        .filter(|(key, _)| enabled(key))
        .map(|(_, module)| *module)
        .collect())
}

/// Fails naming the first of `modules` that `/proc/modules` under `host` does not list.
pub fn require_modules(host: &Path, modules: &[&str]) -> Result<(), Failed> {
    if modules.is_empty() {
        return Ok(());
    }
    let file = host.join("proc/modules");
    let loaded = std::fs::read_to_string(&file).map_err(|e| {
        Failed::new(
            reason::DRIVER_QUERY_FAILED,
            format!("reading {}: {e}", file.display()),
        )
    })?;
    let is_loaded = |module: &str| {
        loaded
            .lines()
            .any(|line| line.split_whitespace().next() == Some(module))
    };
    match modules.iter().find(|m| !is_loaded(m)) {
        None => Ok(()),
        Some(missing) => Err(Failed::new(
            reason::DRIVER_NOT_LOADED,
            format!(
                "the driver container enables {missing}, but kernel module {missing} is not loaded ({} does not list it)",
                file.display()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unfinished_container_is_reported_and_flags_name_their_modules() {
        let dir = tempfile::tempdir().unwrap();
        let error = finished(dir.path()).unwrap_err();
        assert_eq!(error.reason, reason::DRIVER_CONTAINER_NOT_READY);
        std::fs::write(
            dir.path().join(".driver-ctr-ready"),
            "GDS_ENABLED=true\nGDRCOPY_ENABLED=false\nGPU_DIRECT_RDMA_ENABLED=True\n",
        )
        .unwrap();
        assert_eq!(
            finished(dir.path()).unwrap(),
            ["nvidia_fs", "nvidia_peermem"]
        );
    }

    #[test]
    fn a_flagged_module_must_be_loaded() {
        let host = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(host.path().join("proc")).unwrap();
        std::fs::write(
            host.path().join("proc/modules"),
            "nvidia_fs 245760 0 - Live 0x0 (OE)\nnvidia 1 2 - Live 0x0\n",
        )
        .unwrap();
        assert!(require_modules(host.path(), &["nvidia_fs"]).is_ok());
        let error = require_modules(host.path(), &["nvidia_fs", "nvidia_peermem"]).unwrap_err();
        assert_eq!(error.reason, reason::DRIVER_NOT_LOADED);
        assert!(
            error.message.contains("nvidia_peermem"),
            "{}",
            error.message
        );
        assert!(require_modules(host.path(), &[]).is_ok());
    }
}
