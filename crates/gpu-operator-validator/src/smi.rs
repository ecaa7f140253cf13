//! The `nvidia-smi` fallback: running it with a timeout (optionally preloading a driver root's
//! NVML) and parsing `nvidia-smi -q` and `nvidia-smi --version` into a [`GpuInfo`].

use std::{
    io::Read as _,
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use crate::nvml::GpuInfo;

/// Why `nvidia-smi` gave no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SmiError {
    /// It could not be started.
    #[error("cannot run {program}: {message}")]
    Spawn {
        /// The program.
        program: String,
        /// The OS error.
        message: String,
    },
    /// It exited with an error.
    #[error("{program} exited with {code}: {output}")]
    Failed {
        /// The program.
        program: String,
        /// Exit code, or `signal` when killed.
        code: String,
        /// The end of its output.
        output: String,
    },
    /// It reported that it found no GPU.
    #[error("{program} found no GPU: {output}")]
    NoDevices {
        /// The program.
        program: String,
        /// Its output.
        output: String,
    },
    /// The NVML library and the kernel module have different versions.
    #[error("{program}: driver/library version mismatch: {output}")]
    VersionMismatch {
        /// The program.
        program: String,
        /// Its output.
        output: String,
    },
    /// It did not finish in time and was killed.
    #[error("{program} did not finish within {seconds}s and was killed")]
    Timeout {
        /// The program.
        program: String,
        /// The limit.
        seconds: u64,
    },
    /// Its output has no driver version.
    #[error("cannot find the driver version in the output of {program}: {output}")]
    Unparsable {
        /// The program.
        program: String,
        /// The end of its output.
        output: String,
    },
}

/// Keeps the end of `text`, which is where tools print their error.
fn tail(text: &str) -> String {
    const MAX: usize = 400;
    let text = text.trim();
    if text.len() <= MAX {
        return text.to_owned();
    }
    let start = (text.len() - MAX..text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(text.len());
    format!("…{}", &text[start..])
}

/// Runs `program args…` with stdin closed and returns its stdout; with `preload`, NVML from a
/// driver root is preloaded (as the driver container's `nvidia-smi` needs).
pub fn run(
    program: &Path,
    args: &[&str],
    preload: Option<&Path>,
    timeout: Duration,
) -> Result<String, SmiError> {
    let name = program.display().to_string();
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(lib) = preload {
        command.env("LD_PRELOAD", lib);
    }
    let mut attempt = 0;
    let mut child = loop {
        match command.spawn() {
            Ok(child) => break child,
            // ETXTBSY: a just-written script is still open in a forked process; try again.
            Err(e) if e.raw_os_error() == Some(26) && attempt < 10 => {
                attempt += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => {
                return Err(SmiError::Spawn {
                    program: name,
                    message: e.to_string(),
                });
            }
        }
    };
    // Read both pipes on threads so a chatty child cannot block on a full pipe.
    let reader = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut buf);
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let stdout = reader(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = reader(child.stderr.take().map(|p| Box::new(p) as _));
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(SmiError::Timeout {
                    program: name,
                    seconds: timeout.as_secs(),
                });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => {
                return Err(SmiError::Spawn {
                    program: name,
                    message: e.to_string(),
                });
            }
        }
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    if status.success() {
        return Ok(stdout);
    }
    let output = tail(&format!("{stdout}\n{stderr}"));
    let lower = output.to_ascii_lowercase();
    Err(if lower.contains("no devices were found") {
        SmiError::NoDevices {
            program: name,
            output,
        }
    } else if lower.contains("version mismatch") {
        SmiError::VersionMismatch {
            program: name,
            output,
        }
    } else {
        SmiError::Failed {
            program: name,
            code: status
                .code()
                .map_or_else(|| "signal".to_owned(), |c| c.to_string()),
            output,
        }
    })
}

/// `key : value` pairs of `nvidia-smi -q` / `--version` output, keys trimmed.
fn fields(text: &str) -> impl Iterator<Item = (&str, &str)> {
    text.lines().filter_map(|line| {
        let (key, value) = line.split_once(':')?;
        Some((key.trim(), value.trim()))
    })
}

/// Parses `nvidia-smi -q`: `Driver Version`, `CUDA Version` and every GPU's `Product Name`.
pub fn parse_query(program: &Path, text: &str) -> Result<GpuInfo, SmiError> {
    let mut info = GpuInfo::default();
    let mut gpus = Vec::new();
    let mut attached = None;
    for (key, value) in fields(text) {
        match key.to_ascii_lowercase().as_str() {
            "driver version" if info.driver_version.is_empty() => {
                value.clone_into(&mut info.driver_version);
            }
            "cuda version" if info.cuda_version.is_none() => {
                info.cuda_version = Some(value.to_owned());
            }
            "attached gpus" => attached = value.parse::<usize>().ok(),
            "product name" => gpus.push(value.to_owned()),
            _ => {}
        }
    }
    if info.driver_version.is_empty() {
        return Err(SmiError::Unparsable {
            program: program.display().to_string(),
            output: tail(text),
        });
    }
    // Older drivers print no product names for some GPUs; the count still holds.
    if let Some(n) = attached.filter(|n| *n > gpus.len()) {
        gpus.resize(n, "NVIDIA GPU".to_owned());
    }
    info.gpus = Some(gpus);
    Ok(info)
}

/// Parses `nvidia-smi --version` (`DRIVER version`, `CUDA Version`), which initializes no GPU.
pub fn parse_version(program: &Path, text: &str) -> Result<GpuInfo, SmiError> {
    let mut info = GpuInfo::default();
    for (key, value) in fields(text) {
        match key.to_ascii_lowercase().as_str() {
            "driver version" => value.clone_into(&mut info.driver_version),
            "cuda version" => info.cuda_version = Some(value.to_owned()),
            _ => {}
        }
    }
    if info.driver_version.is_empty() {
        return Err(SmiError::Unparsable {
            program: program.display().to_string(),
            output: tail(text),
        });
    }
    Ok(info)
}

#[cfg(test)]
pub(crate) mod tests {
    use std::{fmt::Write as _, fs, os::unix::fs::PermissionsExt as _, path::PathBuf};

    use super::*;

    /// `nvidia-smi -q` of a node with `count` GPUs, as the fake scripts print it.
    pub(crate) fn query_output(driver: &str, cuda: &str, product: &str, count: usize) -> String {
        let mut out = format!(
            "\n==============NVSMI LOG==============\n\nTimestamp                                 : Mon Jan  5 10:00:00 2026\nDriver Version                            : {driver}\nCUDA Version                              : {cuda}\n\nAttached GPUs                             : {count}\n"
        );
        for i in 0..count {
            let _ = write!(
                out,
                "GPU 00000000:{:02X}:00.0\n    Product Name                          : {product}\n    Product Brand                         : NVIDIA\n",
                0x18 + i
            );
        }
        out
    }

    /// Writes an executable shell script.
    pub(crate) fn script(path: &Path, body: &str) -> PathBuf {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
        fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
        path.to_path_buf()
    }

    #[test]
    fn parses_the_query_output() {
        let text = query_output("570.172.08", "12.8", "NVIDIA H100 80GB HBM3", 8);
        let info = parse_query(Path::new("nvidia-smi"), &text).unwrap();
        assert_eq!(info.driver_version, "570.172.08");
        assert_eq!(info.cuda_version.as_deref(), Some("12.8"));
        assert_eq!(info.gpus.unwrap(), vec!["NVIDIA H100 80GB HBM3"; 8]);
        let err = parse_query(Path::new("nvidia-smi"), "hello").unwrap_err();
        assert!(matches!(err, SmiError::Unparsable { .. }));
    }

    #[test]
    fn parses_the_version_output() {
        let text = "NVIDIA-SMI version  : 570.172.08\nNVML version        : 570.172\nDRIVER version      : 570.172.08\nCUDA Version        : 12.8\n";
        let info = parse_version(Path::new("nvidia-smi"), text).unwrap();
        assert_eq!(info.driver_version, "570.172.08");
        assert_eq!(info.cuda_version.as_deref(), Some("12.8"));
        assert_eq!(info.gpus, None);
    }

    #[test]
    fn runs_a_program_and_classifies_its_failures() {
        let dir = tempfile::tempdir().unwrap();
        let t = Duration::from_secs(10);
        let ok = script(&dir.path().join("ok"), "echo \"preload=$LD_PRELOAD\"");
        let out = run(&ok, &[], Some(Path::new("/x/lib.so")), t).unwrap();
        assert_eq!(out.trim(), "preload=/x/lib.so");

        let none = script(
            &dir.path().join("none"),
            "echo 'No devices were found'; exit 6",
        );
        assert!(matches!(
            run(&none, &[], None, t),
            Err(SmiError::NoDevices { .. })
        ));
        let mismatch = script(
            &dir.path().join("mismatch"),
            "echo 'Failed to initialize NVML: Driver/library version mismatch' >&2; exit 18",
        );
        assert!(matches!(
            run(&mismatch, &[], None, t),
            Err(SmiError::VersionMismatch { .. })
        ));
        let fail = script(
            &dir.path().join("fail"),
            "echo 'NVIDIA-SMI has failed' >&2; exit 9",
        );
        let err = run(&fail, &[], None, t).unwrap_err();
        assert!(
            matches!(&err, SmiError::Failed { code, output, .. } if code == "9" && output.contains("has failed")),
            "{err:?}"
        );
        let missing = run(&dir.path().join("absent"), &[], None, t).unwrap_err();
        assert!(matches!(missing, SmiError::Spawn { .. }));
    }

    #[test]
    fn a_hanging_program_is_killed_at_the_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let hang = script(&dir.path().join("hang"), "exec sleep 30");
        let started = Instant::now();
        let err = run(&hang, &[], None, Duration::from_millis(300)).unwrap_err();
        assert!(matches!(err, SmiError::Timeout { .. }), "{err:?}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn long_output_keeps_its_end() {
        let long = format!("{}END", "x".repeat(1000));
        let t = tail(&long);
        assert!(t.ends_with("END") && t.len() < 420);
    }
}
