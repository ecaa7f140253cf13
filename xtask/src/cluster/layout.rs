//! Where the harness keeps things: pinned component versions, the build cache, the run directory and ports.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// Kubernetes release the control-plane binaries and kubectl are built from.
pub const KUBERNETES: &str = "v1.36.3";
/// etcd server release.
pub const ETCD: &str = "v3.6.16";
/// kwok release (simulated kubelets).
pub const KWOK: &str = "v0.8.0";
/// Helm release.
pub const HELM: &str = "v3.21.4";
/// Go module version of Prometheus that promtool is built from (`v0.316.0` is Prometheus 3.16.0).
pub const PROMETHEUS: &str = "v0.316.0";
/// medik8s Node Health Check release (the remediation engine of the `node_health_check` e2e test).
pub const NHC: &str = "v0.12.0";

/// mdBook release the documentation book is built with (`cargo install`ed, not a Go module).
pub const MDBOOK: &str = "0.4.52";

/// Environment variable that moves the whole cache (default `~/.cache/gpu-operator-e2e`).
pub const CACHE_ENV: &str = "GPU_OPERATOR_E2E_CACHE";

/// Environment variable that shifts every port by a number, so two clusters can run side by side
/// (each with its own `GPU_OPERATOR_E2E_CACHE`).
pub const PORT_OFFSET_ENV: &str = "GPU_OPERATOR_E2E_PORT_OFFSET";

/// Loopback ports the components listen on (before the offset).
pub mod ports {
    /// kube-apiserver (HTTPS).
    pub const APISERVER: u16 = 6443;
    /// etcd client URL.
    pub const ETCD_CLIENT: u16 = 2379;
    /// etcd peer URL.
    pub const ETCD_PEER: u16 = 2380;
    /// kube-controller-manager health/metrics (HTTPS).
    pub const CONTROLLER_MANAGER: u16 = 10257;
    /// kube-scheduler health/metrics (HTTPS).
    pub const SCHEDULER: u16 = 10259;
    /// kwok health/metrics (HTTP).
    pub const KWOK: u16 = 10247;
    /// The real node's kubelet API (HTTPS).
    pub const KUBELET: u16 = 10250;
    /// The real node's kubelet health check (HTTP).
    pub const KUBELET_HEALTHZ: u16 = 10248;
}

/// All paths of one harness installation.
#[derive(Debug, Clone)]
pub struct Layout {
    root: PathBuf,
    port_offset: u16,
}

impl Layout {
    /// The layout under `$GPU_OPERATOR_E2E_CACHE`, else `~/.cache/gpu-operator-e2e`.
    pub fn from_env() -> anyhow::Result<Self> {
        let root = match std::env::var_os(CACHE_ENV) {
            Some(dir) => PathBuf::from(dir),
            None => std::env::var_os("HOME")
                .map(|home| PathBuf::from(home).join(".cache/gpu-operator-e2e"))
                .context("HOME is not set; set GPU_OPERATOR_E2E_CACHE to a directory for the cluster build cache")?,
        };
        let port_offset = match std::env::var(PORT_OFFSET_ENV) {
            Ok(value) => value.parse().with_context(|| {
                format!("{PORT_OFFSET_ENV}={value} is not a port offset (0–50000)")
            })?,
            Err(_) => 0,
        };
        Ok(Self { root, port_offset })
    }

    /// A layout at `root` with `port_offset`, without reading the environment.
    #[cfg(test)]
    pub fn for_tests(root: &str, port_offset: u16) -> Self {
        Self {
            root: PathBuf::from(root),
            port_offset,
        }
    }

    /// The port a component listens on: `base` from [`ports`] plus the offset.
    pub fn port(&self, base: u16) -> u16 {
        base.saturating_add(self.port_offset)
    }

    /// Where the Kubernetes binaries (apiserver, controller-manager, scheduler, kubectl) live.
    pub fn kubernetes_bin(&self) -> PathBuf {
        self.root
            .join("bin")
            .join(format!("kubernetes-{KUBERNETES}"))
    }
    /// Where the etcd binary lives.
    pub fn etcd_bin(&self) -> PathBuf {
        self.root.join("bin").join(format!("etcd-{ETCD}"))
    }
    /// Where the kwok binary and its stage configuration live.
    pub fn kwok_bin(&self) -> PathBuf {
        self.root.join("bin").join(format!("kwok-{KWOK}"))
    }
    /// Where the helm binary lives.
    pub fn helm_bin(&self) -> PathBuf {
        self.root.join("bin").join(format!("helm-{HELM}"))
    }
    /// Where promtool lives (built apart from the control plane; see `build::ensure_promtool`).
    pub fn promtool_bin(&self) -> PathBuf {
        self.root.join("bin").join(format!("promtool-{PROMETHEUS}"))
    }
    /// Where Node Health Check's `manager` and its CRD are kept (see `nhc::ensure_nhc`).
    pub fn nhc_bin(&self) -> PathBuf {
        self.root.join("bin").join(format!("nhc-{NHC}"))
    }
    /// Where mdBook is installed (`cargo install --root`; see `docs::ensure_mdbook`).
    pub fn mdbook_root(&self) -> PathBuf {
        self.root.join("bin").join(format!("mdbook-{MDBOOK}"))
    }
    /// Where `cargo install` builds mdBook (removed once it is installed).
    pub fn mdbook_build(&self) -> PathBuf {
        self.root.join("src").join("mdbook-build")
    }
    /// Go module directories used to build the binaries (kept so a rebuild is incremental).
    pub fn go_src(&self, name: &str) -> PathBuf {
        self.root.join("src").join(name)
    }
    /// Build logs.
    pub fn build_logs(&self) -> PathBuf {
        self.root.join("build-logs")
    }
    /// The directory of the running cluster: PKI, kubeconfig, logs, pids, etcd data.
    pub fn run_dir(&self) -> PathBuf {
        self.root.join("run")
    }
    /// The admin kubeconfig of the running cluster.
    pub fn kubeconfig(&self) -> PathBuf {
        self.run_dir().join("kubeconfig")
    }
    /// Certificates and keys.
    pub fn pki(&self) -> PathBuf {
        self.run_dir().join("pki")
    }
    /// One log file per component.
    pub fn log(&self, component: &str) -> PathBuf {
        self.run_dir().join("logs").join(format!("{component}.log"))
    }
    /// One pid file per component.
    pub fn pid_file(&self, component: &str) -> PathBuf {
        self.run_dir().join("pids").join(format!("{component}.pid"))
    }
    /// etcd's data directory.
    pub fn etcd_data(&self) -> PathBuf {
        self.run_dir().join("etcd-data")
    }
    /// What `cluster up` recorded about the fleet it created.
    pub fn fleet_record(&self) -> PathBuf {
        self.run_dir().join("fleet.txt")
    }
    /// The real node's state: containerd's root and state, the kubelet's root, CNI, configs.
    pub fn real_node_dir(&self) -> PathBuf {
        self.run_dir().join("node")
    }
    /// Where the pause binary built from the kubernetes module's `pause.c` lives.
    pub fn pause_bin(&self) -> PathBuf {
        self.root.join("bin").join(format!("pause-{KUBERNETES}"))
    }
    /// Where images built for the real node are written (ours, the pause image, NVIDIA's stand-in).
    pub fn images(&self) -> PathBuf {
        self.root.join("images")
    }
    /// The port offset (distinguishes this cluster's bridge, iptables chain and pod subnet).
    pub fn port_offset(&self) -> u16 {
        self.port_offset
    }
    /// The directories to prepend to `PATH` so `kubectl` and `helm` are the harness's builds.
    pub fn path_dirs(&self) -> [PathBuf; 2] {
        [self.kubernetes_bin(), self.helm_bin()]
    }
}

/// Shows a path relative to `$HOME` as `~/…` for shorter messages.
pub fn display(path: &Path) -> String {
    match std::env::var_os("HOME") {
        Some(home) => match path.strip_prefix(&home) {
            Ok(rest) => format!("~/{}", rest.display()),
            Err(_) => path.display().to_string(),
        },
        None => path.display().to_string(),
    }
}
