//! NVIDIA's status files under `OUTPUT_DIR`: which files each component owns, the `driver-ready`
//! `KEY=VALUE` format that other operands `source`, and atomic writes and removal.

use std::{
    fmt::Write as _,
    fs, io,
    path::{Path, PathBuf},
};

use gpu_operator_api::validator::status_file::{self, driver_key};

use crate::config::Component;

/// A status file could not be written or removed.
#[derive(Debug, thiserror::Error)]
#[error("{action} {path}: {source}")]
pub struct StatusFileError {
    action: &'static str,
    path: PathBuf,
    source: io::Error,
}

/// The status file a component writes when it passes.
pub fn file_name(component: Component) -> &'static str {
    match component {
        Component::Driver => status_file::DRIVER,
        Component::Toolkit => status_file::TOOLKIT,
        Component::Cuda => status_file::CUDA,
        Component::Plugin => status_file::PLUGIN,
        Component::VfioPci => status_file::VFIO_PCI,
        Component::VgpuManager => status_file::VGPU_MANAGER,
        Component::VgpuDevices => status_file::VGPU_DEVICES,
        Component::CcManager => status_file::CC_MANAGER,
    }
}

/// Every status file a component may write, removed before it checks: its own, and for
/// `vgpu-manager` also `host-vgpu-manager-ready` (NVIDIA's name when the host has the driver).
pub fn files_of(component: Component) -> Vec<&'static str> {
    let mut files = vec![file_name(component)];
    if component == Component::VgpuManager {
        files.push(status_file::HOST_VGPU_MANAGER);
    }
    files
}

/// Where the driver is, as the `driver-ready` file tells the other operands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverInfo {
    /// The driver is installed on the host (not by a driver container).
    pub is_host_driver: bool,
    /// Host path of the driver's root.
    pub driver_root: PathBuf,
    /// Where operand containers mount it.
    pub driver_root_ctr_path: PathBuf,
    /// Host path under which the device nodes are.
    pub dev_root: PathBuf,
    /// Where operand containers mount it.
    pub dev_root_ctr_path: PathBuf,
}

/// Container path where operands mount the host's root.
const HOST_CTR_PATH: &str = "/host";
/// Container path where operands mount a driver container's root.
const DRIVER_ROOT_CTR_PATH: &str = "/driver-root";

impl DriverInfo {
    /// A driver installed on the host whose root is `host_root`.
    pub fn host(host_root: &Path) -> Self {
        Self {
            is_host_driver: true,
            driver_root: host_root.to_path_buf(),
            driver_root_ctr_path: HOST_CTR_PATH.into(),
            dev_root: host_root.to_path_buf(),
            dev_root_ctr_path: HOST_CTR_PATH.into(),
        }
    }

    /// A containerized driver at `install_dir` on the host; its device nodes are under the
    /// install dir when it has its own `/dev`, else the host's.
    pub fn container(host_root: &Path, install_dir: &Path, own_devices: bool) -> Self {
        let (dev_root, dev_root_ctr_path) = if own_devices {
            (install_dir.to_path_buf(), DRIVER_ROOT_CTR_PATH.into())
        } else {
            (host_root.to_path_buf(), HOST_CTR_PATH.into())
        };
        Self {
            is_host_driver: false,
            driver_root: install_dir.to_path_buf(),
            driver_root_ctr_path: DRIVER_ROOT_CTR_PATH.into(),
            dev_root,
            dev_root_ctr_path,
        }
    }

    /// The `driver-ready` content: one `KEY=VALUE` line per key, in NVIDIA's order, values quoted
    /// for `sh` only when they need it.
    pub fn render(&self) -> String {
        let lines = [
            (driver_key::IS_HOST_DRIVER, self.is_host_driver.to_string()),
            (driver_key::NVIDIA_DRIVER_ROOT, path_text(&self.driver_root)),
            (
                driver_key::DRIVER_ROOT_CTR_PATH,
                path_text(&self.driver_root_ctr_path),
            ),
            (driver_key::NVIDIA_DEV_ROOT, path_text(&self.dev_root)),
            (
                driver_key::DEV_ROOT_CTR_PATH,
                path_text(&self.dev_root_ctr_path),
            ),
        ];
        lines.iter().fold(String::new(), |mut out, (k, v)| {
            let _ = writeln!(out, "{k}={}", shell_quote(v));
            out
        })
    }
}

fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// `value` as a `sh` word: unchanged when it is plain, else single-quoted.
fn shell_quote(value: &str) -> String {
    let plain = !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+:,@%".contains(&b));
    if plain {
        value.to_owned()
    } else {
        format!("'{}'", value.replace('\'', r"'\''"))
    }
}

/// Parses `KEY=VALUE` lines as `sh` would for the values [`DriverInfo::render`] writes.
pub fn parse_key_values(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| {
            let v = v
                .strip_prefix('\'')
                .and_then(|v| v.strip_suffix('\''))
                .map_or_else(|| v.to_owned(), |v| v.replace(r"'\''", "'"));
            (k.trim().to_owned(), v)
        })
        .collect()
}

/// Creates the output directory; with `cleanup_all` it first removes it with all its files.
pub fn prepare_dir(dir: &Path, cleanup_all: bool) -> Result<(), StatusFileError> {
    let err = |action, source| StatusFileError {
        action,
        path: dir.to_path_buf(),
        source,
    };
    if cleanup_all {
        match fs::remove_dir_all(dir) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(err("removing", e)),
            _ => {}
        }
    }
    fs::create_dir_all(dir).map_err(|e| err("creating", e))
}

/// Removes a status file; a file that is not there is fine.
pub fn remove(dir: &Path, name: &str) -> Result<(), StatusFileError> {
    let path = dir.join(name);
    match fs::remove_file(&path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(StatusFileError {
            action: "removing",
            path,
            source: e,
        }),
        _ => Ok(()),
    }
}

/// Writes a status file atomically (temporary file, then rename), so a reader never sources half
/// a file.
pub fn write(dir: &Path, name: &str, content: &str) -> Result<(), StatusFileError> {
    let path = dir.join(name);
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let err = |source| StatusFileError {
        action: "writing",
        path: path.clone(),
        source,
    };
    fs::write(&tmp, content).map_err(err)?;
    fs::rename(&tmp, &path).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        err(e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_driver_file_matches_nvidias_format() {
        let info = DriverInfo::host(Path::new("/"));
        assert_eq!(
            info.render(),
            "IS_HOST_DRIVER=true\nNVIDIA_DRIVER_ROOT=/\nDRIVER_ROOT_CTR_PATH=/host\nNVIDIA_DEV_ROOT=/\nDEV_ROOT_CTR_PATH=/host\n"
        );
    }

    #[test]
    fn container_driver_file_points_at_the_install_dir() {
        let own = DriverInfo::container(Path::new("/"), Path::new("/run/nvidia/driver"), true);
        assert_eq!(
            own.render(),
            "IS_HOST_DRIVER=false\nNVIDIA_DRIVER_ROOT=/run/nvidia/driver\nDRIVER_ROOT_CTR_PATH=/driver-root\nNVIDIA_DEV_ROOT=/run/nvidia/driver\nDEV_ROOT_CTR_PATH=/driver-root\n"
        );
        let host_dev =
            DriverInfo::container(Path::new("/"), Path::new("/run/nvidia/driver"), false);
        let pairs = parse_key_values(&host_dev.render());
        assert!(pairs.contains(&("NVIDIA_DEV_ROOT".into(), "/".into())));
        assert!(pairs.contains(&("DEV_ROOT_CTR_PATH".into(), "/host".into())));
    }

    #[test]
    fn odd_paths_are_quoted_for_sh_and_parse_back() {
        let info = DriverInfo::host(Path::new("/mnt/my host's root"));
        let text = info.render();
        assert!(
            text.contains(r"NVIDIA_DRIVER_ROOT='/mnt/my host'\''s root'"),
            "{text}"
        );
        let pairs = parse_key_values(&text);
        assert_eq!(
            pairs[1],
            ("NVIDIA_DRIVER_ROOT".into(), "/mnt/my host's root".into())
        );
    }

    #[test]
    fn the_file_can_be_sourced_by_sh() {
        let dir = tempfile::tempdir().unwrap();
        let info = DriverInfo::container(Path::new("/a b"), Path::new("/run/nvidia/driver"), false);
        write(dir.path(), status_file::DRIVER, &info.render()).unwrap();
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(". ./driver-ready && echo \"$IS_HOST_DRIVER|$NVIDIA_DEV_ROOT|$DRIVER_ROOT_CTR_PATH\"")
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "false|/a b|/driver-root"
        );
    }

    #[test]
    fn write_remove_and_cleanup() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("validations");
        prepare_dir(&dir, false).unwrap();
        write(&dir, "toolkit-ready", "").unwrap();
        write(&dir, "plugin-ready", "").unwrap();
        assert!(dir.join("toolkit-ready").is_file());
        remove(&dir, "toolkit-ready").unwrap();
        remove(&dir, "toolkit-ready").unwrap();
        assert!(!dir.join("toolkit-ready").exists());
        prepare_dir(&dir, true).unwrap();
        assert_eq!(
            fs::read_dir(&dir).unwrap().count(),
            0,
            "cleanup removes every file"
        );
        let leftovers: Vec<_> = fs::read_dir(&dir).unwrap().collect();
        assert!(leftovers.is_empty());
        assert_eq!(file_name(Component::Driver), "driver-ready");
        assert_eq!(file_name(Component::Cuda), "cuda-ready");
    }

    #[test]
    fn sandbox_components_own_nvidias_files() {
        assert_eq!(files_of(Component::VfioPci), ["vfio-pci-ready"]);
        assert_eq!(
            files_of(Component::VgpuManager),
            ["vgpu-manager-ready", "host-vgpu-manager-ready"]
        );
        assert_eq!(files_of(Component::VgpuDevices), ["vgpu-devices-ready"]);
        assert_eq!(files_of(Component::CcManager), ["cc-manager-ready"]);
        assert_eq!(files_of(Component::Plugin), ["plugin-ready"]);
    }

    #[test]
    fn writing_into_a_missing_dir_is_an_error_not_a_panic() {
        let base = tempfile::tempdir().unwrap();
        let err = write(&base.path().join("absent"), "cuda-ready", "").unwrap_err();
        assert!(err.to_string().contains("cuda-ready"), "{err}");
    }
}
