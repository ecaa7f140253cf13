//! Where the driver lives: finding `nvidia-smi` and `libnvidia-ml` under a mounted root (the host's
//! or a driver container's), resolving symlinks inside that root, and reading the kernel module's
//! version from `/proc/driver/nvidia/version`.

use std::{
    fs,
    os::unix::fs::PermissionsExt as _,
    path::{Component, Path, PathBuf},
};

/// Where `nvidia-smi` may be installed, relative to a root, in the order they are tried.
pub const NVIDIA_SMI_PATHS: [&str; 6] = [
    "usr/bin/nvidia-smi",
    "usr/sbin/nvidia-smi",
    "bin/nvidia-smi",
    "sbin/nvidia-smi",
    WSL_NVIDIA_SMI,
    "opt/bin/nvidia-smi",
];
/// `nvidia-smi` of a WSL2 host, which has no NVIDIA kernel module of its own.
pub const WSL_NVIDIA_SMI: &str = "usr/lib/wsl/lib/nvidia-smi";
/// The NVML library's soname.
pub const NVML_LIBRARY: &str = "libnvidia-ml.so.1";
/// Directories, relative to a root, where distributions install the NVML library.
pub const LIBRARY_DIRS: [&str; 8] = [
    "usr/lib/x86_64-linux-gnu",
    "usr/lib/aarch64-linux-gnu",
    "usr/lib64",
    "usr/lib",
    "lib64",
    "lib/x86_64-linux-gnu",
    "lib/aarch64-linux-gnu",
    "usr/lib/wsl/lib",
];
/// The kernel module's version file, relative to the host root.
pub const MODULE_VERSION_FILE: &str = "proc/driver/nvidia/version";
/// A device node that a driver root with its own `/dev` has.
pub const CONTROL_DEVICE: &str = "dev/nvidiactl";

/// Symlinks followed before giving up (as the kernel's `MAXSYMLINKS`).
const MAX_SYMLINKS: usize = 40;

/// Resolves `relative` inside `root` as if `root` were `/`: absolute symlink targets and `..`
/// stay inside `root`. Returns the resolved path if it exists.
pub fn resolve_in_root(root: &Path, relative: &str) -> Option<PathBuf> {
    let mut pending: Vec<String> = relative
        .split('/')
        .rev()
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
        .collect();
    let mut resolved = Vec::<String>::new();
    let mut links = 0;
    while let Some(part) = pending.pop() {
        match part.as_str() {
            "." => continue,
            ".." => {
                resolved.pop();
                continue;
            }
            _ => {}
        }
        let candidate = resolved
            .iter()
            .chain(std::iter::once(&part))
            .fold(root.to_path_buf(), |p, c| p.join(c));
        let meta = fs::symlink_metadata(&candidate).ok()?;
        if !meta.file_type().is_symlink() {
            resolved.push(part);
            continue;
        }
        links += 1;
        if links > MAX_SYMLINKS {
            return None;
        }
        let target = fs::read_link(&candidate).ok()?;
        if target.is_absolute() {
            resolved.clear();
        }
        for component in target.components().rev() {
            if let Component::Normal(c) = component {
                pending.push(c.to_string_lossy().into_owned());
            } else if component == Component::ParentDir {
                pending.push("..".to_owned());
            }
        }
    }
    Some(resolved.iter().fold(root.to_path_buf(), |p, c| p.join(c)))
}

/// Whether `path` is a regular, non-empty file with an execute bit.
fn is_executable(path: &Path) -> bool {
    fs::metadata(path)
        .is_ok_and(|m| m.is_file() && m.len() > 0 && m.permissions().mode() & 0o111 != 0)
}

/// An `nvidia-smi` found under a root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvidiaSmi {
    /// Its path in this container (under the root).
    pub path: PathBuf,
    /// Whether it is WSL2's, which has no kernel module to check.
    pub wsl: bool,
}

/// The first executable `nvidia-smi` under `root`, in [`NVIDIA_SMI_PATHS`] order.
pub fn find_nvidia_smi(root: &Path) -> Option<NvidiaSmi> {
    NVIDIA_SMI_PATHS.iter().find_map(|relative| {
        let path = resolve_in_root(root, relative).filter(|p| is_executable(p))?;
        Some(NvidiaSmi {
            path,
            wsl: *relative == WSL_NVIDIA_SMI,
        })
    })
}

/// `nvidia-smi` on a `PATH`-style list of directories (the toolkit check: what the runtime injected).
pub fn find_on_path(search_path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    std::env::split_paths(search_path?)
        .map(|dir| dir.join("nvidia-smi"))
        .find(|p| is_executable(p))
}

/// The NVML library under `root`, if a distribution directory has it.
pub fn find_nvml(root: &Path) -> Option<PathBuf> {
    LIBRARY_DIRS.iter().find_map(|dir| {
        resolve_in_root(root, &format!("{dir}/{NVML_LIBRARY}")).filter(|p| p.is_file())
    })
}

/// Whether the driver root has its own `/dev/nvidiactl` (else the devices are the host's).
pub fn has_own_devices(root: &Path) -> bool {
    root.join(CONTROL_DEVICE).exists()
}

/// The loaded kernel module's version from `<host>/proc/driver/nvidia/version`: `Ok(None)` when
/// the file does not exist (the module is not loaded).
pub fn kernel_module_version(host: &Path) -> std::io::Result<Option<String>> {
    match fs::read_to_string(host.join(MODULE_VERSION_FILE)) {
        Ok(text) => Ok(Some(parse_module_version(&text).unwrap_or_default())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The version in the `NVRM version:` line, e.g. `570.172.08` from
/// `NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.172.08  Tue Jul  8 ...`.
pub fn parse_module_version(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("NVRM version:"))?;
    line.split_whitespace()
        .find(|word| {
            word.contains('.')
                && word
                    .split('.')
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    fn executable(path: &Path, body: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, body).unwrap();
        fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn finds_nvidia_smi_in_search_order_and_skips_empty_or_non_executable_files() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(find_nvidia_smi(root.path()), None);
        executable(&root.path().join("usr/bin/nvidia-smi"), "");
        fs::create_dir_all(root.path().join("bin")).unwrap();
        fs::write(root.path().join("bin/nvidia-smi"), "#!/bin/sh\n").unwrap();
        assert_eq!(
            find_nvidia_smi(root.path()),
            None,
            "empty, and not executable"
        );
        executable(&root.path().join("opt/bin/nvidia-smi"), "#!/bin/sh\n");
        let found = find_nvidia_smi(root.path()).unwrap();
        assert_eq!(found.path, root.path().join("opt/bin/nvidia-smi"));
        assert!(!found.wsl);
        executable(&root.path().join("usr/sbin/nvidia-smi"), "#!/bin/sh\n");
        assert_eq!(
            find_nvidia_smi(root.path()).unwrap().path,
            root.path().join("usr/sbin/nvidia-smi")
        );
    }

    #[test]
    fn wsl_hosts_are_recognised() {
        let root = tempfile::tempdir().unwrap();
        executable(&root.path().join(WSL_NVIDIA_SMI), "#!/bin/sh\n");
        assert!(find_nvidia_smi(root.path()).unwrap().wsl);
    }

    #[test]
    fn absolute_symlinks_resolve_inside_the_root() {
        let root = tempfile::tempdir().unwrap();
        executable(
            &root.path().join("usr/lib/nvidia/nvidia-smi"),
            "#!/bin/sh\n",
        );
        fs::create_dir_all(root.path().join("usr/bin")).unwrap();
        // Absolute: must not be looked up in this container's /usr/lib.
        symlink(
            "/usr/lib/nvidia/nvidia-smi",
            root.path().join("usr/bin/nvidia-smi"),
        )
        .unwrap();
        // Relative with `..`, as usr-merged distributions link /bin.
        symlink("usr/bin", root.path().join("bin")).unwrap();
        let found = find_nvidia_smi(root.path()).unwrap();
        assert_eq!(found.path, root.path().join("usr/lib/nvidia/nvidia-smi"));
        assert_eq!(
            resolve_in_root(root.path(), "usr/bin/../../bin/nvidia-smi"),
            Some(root.path().join("usr/lib/nvidia/nvidia-smi"))
        );
        // A loop ends instead of hanging.
        symlink("/loop", root.path().join("loop")).unwrap();
        assert_eq!(resolve_in_root(root.path(), "loop"), None);
    }

    #[test]
    fn finds_nvml_and_devices() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(find_nvml(root.path()), None);
        assert!(!has_own_devices(root.path()));
        let lib = root.path().join("usr/lib64").join(NVML_LIBRARY);
        fs::create_dir_all(lib.parent().unwrap()).unwrap();
        fs::write(&lib, "not really a library").unwrap();
        assert_eq!(find_nvml(root.path()), Some(lib));
        fs::create_dir_all(root.path().join("dev")).unwrap();
        fs::write(root.path().join(CONTROL_DEVICE), "").unwrap();
        assert!(has_own_devices(root.path()));
    }

    #[test]
    fn reads_the_kernel_module_version() {
        let proprietary = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.172.08  Tue Jul  8 17:34:33 UTC 2025\nGCC version:  gcc version 12.3.0\n";
        assert_eq!(
            parse_module_version(proprietary).as_deref(),
            Some("570.172.08")
        );
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  535.261.03  Release Build  (dvs-builder@U16)\n";
        assert_eq!(parse_module_version(open).as_deref(), Some("535.261.03"));
        assert_eq!(parse_module_version("garbage"), None);

        let host = tempfile::tempdir().unwrap();
        assert_eq!(kernel_module_version(host.path()).unwrap(), None);
        let file = host.path().join(MODULE_VERSION_FILE);
        fs::create_dir_all(file.parent().unwrap()).unwrap();
        fs::write(&file, proprietary).unwrap();
        assert_eq!(
            kernel_module_version(host.path()).unwrap().as_deref(),
            Some("570.172.08")
        );
    }

    #[test]
    fn finds_nvidia_smi_on_a_path_list() {
        let dir = tempfile::tempdir().unwrap();
        let path =
            std::env::join_paths([dir.path().join("none"), dir.path().to_path_buf()]).unwrap();
        assert_eq!(find_on_path(Some(&path)), None);
        executable(&dir.path().join("nvidia-smi"), "#!/bin/sh\n");
        assert_eq!(
            find_on_path(Some(&path)),
            Some(dir.path().join("nvidia-smi"))
        );
        assert_eq!(find_on_path(None), None);
    }
}
