//! GPU faults below the NVML boundary: the fake NVML library (the C source of the validator's
//! `tests/fake_nvml`, built here with `cc`) under a fake host root, and the real health agent
//! (`gpu-operator-validator health`) run on it as a host process for one Node. The test flips a
//! fault by rewriting the library's state file while the agent runs.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::missing_panics_doc,
    reason = "test support: a step that cannot be taken fails the test that takes it"
)]

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use crate::validator_host::validator_binary;

/// The fake library's source (what each state-file line means is at its top).
pub const SOURCE: &str =
    include_str!("../../crates/gpu-operator-validator/tests/fake_nvml/libnvidia-ml.c");

/// Builds `usr/lib64/libnvidia-ml.so.1` under `root`, where the agent looks for the host's driver.
pub fn install(root: &Path) -> PathBuf {
    let lib = root.join("usr/lib64");
    std::fs::create_dir_all(&lib).unwrap();
    let c = root.join("libnvidia-ml.c");
    std::fs::write(&c, SOURCE).unwrap();
    let library = lib.join("libnvidia-ml.so.1");
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-Wl,-soname,libnvidia-ml.so.1", "-o"])
        .arg(&library)
        .arg(&c)
        .status()
        .expect("cc (the C compiler Rust links with) builds the fake NVML library");
    assert!(status.success(), "cc failed to build {}", library.display());
    library
}

/// The health agent of one Node, running on the fake library (killed on drop).
pub struct Agent {
    /// The Node it reports on.
    pub node: String,
    state: PathBuf,
    gpus: u32,
    _child: tokio::process::Child,
}

impl Agent {
    /// Starts `gpu-operator-validator health` for `node` (which advertises `gpus` GPUs), polling
    /// every `poll_seconds`, with `kubeconfig`'s credentials and a fake host root under `dir`;
    /// its GPUs start healthy.
    pub fn start(node: &str, gpus: u32, poll_seconds: u32, kubeconfig: &Path, dir: &Path) -> Self {
        let root = dir.join(node);
        install(&root);
        Self::spawn(node, gpus, poll_seconds, kubeconfig, &root)
    }

    /// Starts the agent for `node` on a host whose `libnvidia-ml.so.1` cannot be loaded (an
    /// empty file, as a driver half installed leaves it): it reports `GPUHealthy=Unknown`,
    /// reason `HealthUnknown`.
    pub fn start_without_nvml(
        node: &str,
        poll_seconds: u32,
        kubeconfig: &Path,
        dir: &Path,
    ) -> Self {
        let root = dir.join(node);
        std::fs::create_dir_all(root.join("usr/lib64")).unwrap();
        std::fs::write(root.join("usr/lib64/libnvidia-ml.so.1"), "").unwrap();
        Self::spawn(node, 0, poll_seconds, kubeconfig, &root)
    }

    fn spawn(node: &str, gpus: u32, poll_seconds: u32, kubeconfig: &Path, root: &Path) -> Self {
        let state = root.join("nvml-state");
        let log = std::fs::File::create(root.join("agent.log")).unwrap();
        let mut agent = Self {
            node: node.to_owned(),
            state,
            gpus,
            _child: tokio::process::Command::new(validator_binary())
                .arg("health")
                .env_clear()
                .env("NODE_NAME", node)
                .env("KUBECONFIG", kubeconfig)
                .env("HOST_ROOT_CTR_PATH", root)
                .env(
                    "DRIVER_INSTALL_DIR_CTR_PATH",
                    root.join("no-driver-container"),
                )
                .env("FAKE_NVML_STATE", root.join("nvml-state"))
                .env("HEALTH_POLL_SECONDS", poll_seconds.to_string())
                .env("RUST_LOG", "info")
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .kill_on_drop(true)
                .spawn()
                .unwrap(),
        };
        agent.healthy();
        agent
    }

    /// Every GPU healthy.
    pub fn healthy(&mut self) {
        self.set(&format!("gpus {}\n", self.gpus));
    }

    /// A volatile double-bit ECC error on GPU 0.
    pub fn double_bit_ecc(&mut self) {
        self.set(&format!("gpus {}\ndbe 0 2\n", self.gpus));
    }

    /// Writes the library's state file whole (renamed into place: the library never reads half).
    fn set(&mut self, state: &str) {
        let tmp = self.state.with_extension("tmp");
        std::fs::write(&tmp, state).unwrap();
        std::fs::rename(&tmp, &self.state).unwrap();
    }

    /// The agent's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.state.with_file_name("agent.log")).unwrap_or_default()
    }
}
