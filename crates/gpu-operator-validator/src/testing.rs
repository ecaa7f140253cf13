//! Test support: a simulated node under a tempdir (host root, driver install dir, output dir, a
//! fake `nvidia-smi`, a fake `/proc/driver/nvidia/version`), a fake NVML, fake sysfs PCI devices
//! and Nodes with GPU capacity.
#![allow(
    clippy::unused_self,
    reason = "fixture methods read best on the fixture"
)]

use std::{
    collections::{BTreeMap, HashMap},
    ffi::OsString,
    fs,
    path::{Path, PathBuf},
    sync::Mutex,
};

use k8s_openapi::{
    api::core::v1::{Node, NodeStatus},
    apimachinery::pkg::api::resource::Quantity,
};

use crate::{
    config::{self, Config, Invocation},
    host,
    nvml::{GpuInfo, Nvml, NvmlError},
    smi::tests::{query_output, script},
};

/// A simulated node's filesystem.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub vars: HashMap<String, OsString>,
}

impl Fixture {
    pub fn new(component: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut vars = HashMap::new();
        for (name, sub) in [
            ("HOST_ROOT_CTR_PATH", "host"),
            ("DRIVER_INSTALL_DIR_CTR_PATH", "driver"),
            ("OUTPUT_DIR", "validations"),
        ] {
            fs::create_dir_all(dir.path().join(sub)).unwrap();
            vars.insert(name.to_owned(), dir.path().join(sub).into_os_string());
        }
        vars.insert("COMPONENT".to_owned(), component.into());
        vars.insert("NVIDIA_SMI_TIMEOUT_SECONDS".to_owned(), "5".into());
        vars.insert(
            "PATH".to_owned(),
            dir.path().join("ctr-bin").into_os_string(),
        );
        Self { dir, vars }
    }

    pub fn host(&self) -> PathBuf {
        self.dir.path().join("host")
    }

    pub fn driver_root(&self) -> PathBuf {
        self.dir.path().join("driver")
    }

    pub fn set(&mut self, name: &str, value: &str) {
        self.vars.insert(name.to_owned(), value.into());
    }

    pub fn config(&self) -> Config {
        match config::parse(&[], |n| self.vars.get(n).cloned()).unwrap() {
            Invocation::Run(c) => *c,
            other => unreachable!("{other:?}"),
        }
    }

    /// Loads the kernel module of `version` (the `/proc` file under the host root).
    pub fn load_module(&self, version: &str) {
        let file = self.host().join(host::MODULE_VERSION_FILE);
        fs::create_dir_all(file.parent().unwrap()).unwrap();
        fs::write(
            file,
            format!("NVRM version: NVIDIA UNIX x86_64 Kernel Module  {version}  Tue Jul  8 17:34:33 UTC 2025\n"),
        )
        .unwrap();
    }

    pub fn unload_module(&self) {
        let _ = fs::remove_file(self.host().join(host::MODULE_VERSION_FILE));
    }

    /// Installs a fake `nvidia-smi` at `root/relative` printing `-q` output for `count` GPUs.
    pub fn install_smi(&self, root: &Path, driver: &str, count: usize) -> PathBuf {
        let body = fake_smi_body(driver, count);
        script(&root.join("usr/bin/nvidia-smi"), &body)
    }

    /// Installs an `nvidia-smi` that runs `body`.
    pub fn install_smi_script(&self, root: &Path, body: &str) -> PathBuf {
        script(&root.join("usr/bin/nvidia-smi"), body)
    }

    /// Puts a file named like NVML into the root (not loadable: the fake NVML decides).
    pub fn install_nvml(&self, root: &Path) -> PathBuf {
        let lib = root
            .join("usr/lib/x86_64-linux-gnu")
            .join(host::NVML_LIBRARY);
        fs::create_dir_all(lib.parent().unwrap()).unwrap();
        fs::write(&lib, "fake").unwrap();
        lib
    }

    /// Puts a working `nvidia-smi` into the container's PATH (what the toolkit injects).
    pub fn inject_smi(&self, driver: &str, count: usize) -> PathBuf {
        script(
            &self.dir.path().join("ctr-bin/nvidia-smi"),
            &fake_smi_body(driver, count),
        )
    }
}

/// A shell body answering `-q` and `--version` like `nvidia-smi` of `driver` with `count` H100s.
pub fn fake_smi_body(driver: &str, count: usize) -> String {
    let query = query_output(driver, "12.8", "NVIDIA H100 80GB HBM3", count);
    if count == 0 {
        return "echo 'No devices were found'; exit 6".to_owned();
    }
    format!(
        "case \"$1\" in\n--version) printf 'NVIDIA-SMI version  : {driver}\\nDRIVER version      : {driver}\\nCUDA Version        : 12.8\\n' ;;\n*) cat <<'EOF'\n{query}EOF\n;;\nesac"
    )
}

/// A fake NVML: answers with a fixed result and records the libraries it was asked to load.
pub struct FakeNvml {
    pub answer: Result<GpuInfo, NvmlError>,
    pub loaded: Mutex<Vec<PathBuf>>,
}

impl FakeNvml {
    pub fn ok(driver: &str, count: usize) -> Self {
        Self::answering(Ok(GpuInfo {
            driver_version: driver.to_owned(),
            cuda_version: Some("12.8".to_owned()),
            gpus: Some(vec!["NVIDIA H100 80GB HBM3".to_owned(); count]),
        }))
    }

    pub fn failing(error: NvmlError) -> Self {
        Self::answering(Err(error))
    }

    fn answering(answer: Result<GpuInfo, NvmlError>) -> Self {
        Self {
            answer,
            loaded: Mutex::new(Vec::new()),
        }
    }

    pub fn loaded(&self) -> Vec<PathBuf> {
        self.loaded.lock().unwrap().clone()
    }
}

impl Nvml for FakeNvml {
    fn query(&self, library: &Path) -> Result<GpuInfo, NvmlError> {
        self.loaded.lock().unwrap().push(library.to_path_buf());
        self.answer.clone()
    }
}

/// NVML that cannot be loaded.
pub fn unloadable() -> FakeNvml {
    FakeNvml::failing(NvmlError::Load {
        library: "libnvidia-ml.so.1".into(),
        message: "cannot open shared object file".into(),
    })
}

/// A fake `/sys/bus/pci/devices/<address>/vendor` under `root`.
pub fn pci_device(root: &Path, address: &str, vendor: &str) {
    let dir = root
        .join(crate::metrics::gauges::PCI_DEVICES_DIR)
        .join(address);
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("vendor"), format!("{vendor}\n")).unwrap();
}

/// A Node whose capacity is `resources`.
pub fn node_with_capacity(resources: &[(&str, &str)]) -> Node {
    let capacity: BTreeMap<String, Quantity> = resources
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
        .collect();
    Node {
        status: Some(NodeStatus {
            capacity: Some(capacity),
            ..NodeStatus::default()
        }),
        ..Node::default()
    }
}
