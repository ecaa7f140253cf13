//! How the toolkit container reaches the node's container runtime, by NVIDIA's rules. The host
//! files come from NVIDIA's defaults unless the user's `toolkit.env` names others
//! (`CONTAINERD_CONFIG`, `CRIO_CONFIG`, `DOCKER_CONFIG` or `RUNTIME_CONFIG`;
//! `RUNTIME_DROP_IN_CONFIG`; `CONTAINERD_SOCKET` or `DOCKER_SOCKET`; `NRI_SOCKET`). Each file's
//! directory is mounted under `/runtime/…` and the env then names the file inside the container:
//! - top-level config → `/runtime/config-dir/` (`RUNTIME_CONFIG` and the runtime's own variable);
//! - drop-in config (containerd, CRI-O) → `/runtime/config-dir.d/` (`RUNTIME_DROP_IN_CONFIG`,
//!   plus `RUNTIME_DROP_IN_CONFIG_HOST_PATH` with the host path);
//! - socket (containerd, Docker) → `/runtime/sock-dir/` (`RUNTIME_SOCKET` and the runtime's own);
//! - `file=<path>` sources of `RUNTIME_CONFIG_SOURCE` are read through the host root (`/host`);
//! - containerd also gets `CONTAINERD_RUNTIME_CLASS` (the `nvidia` handler name) unless the user
//!   set it.
//!
//! With the NRI plugin only the NRI socket is mounted: the runtime's configuration is not touched.

use std::path::Path;

use gpu_operator_api::spec::EnvVar as SpecEnvVar;
use gpu_operator_core::build::{pod, runtime_class::ContainerRuntime};
use k8s_openapi::api::core::v1::{Volume, VolumeMount};

/// Env, volumes and mounts of the toolkit container for one runtime.
#[derive(Debug, Default, PartialEq)]
pub struct Wiring {
    /// Variables set after the user's env (they translate the user's host paths).
    pub env: Vec<(&'static str, String)>,
    /// Pod volumes.
    pub volumes: Vec<Volume>,
    /// Mounts of the toolkit container.
    pub mounts: Vec<VolumeMount>,
}

const CONFIG_DIR: &str = "/runtime/config-dir/";
const DROP_IN_DIR: &str = "/runtime/config-dir.d/";
const SOCKET_DIR: &str = "/runtime/sock-dir/";
const NRI_SOCKET_DIR: &str = "/runtime/nri-sock-dir/";

/// NVIDIA's host defaults: (top-level config, drop-in config, socket) of a runtime.
fn defaults(
    runtime: ContainerRuntime,
) -> (&'static str, Option<&'static str>, Option<&'static str>) {
    match runtime {
        ContainerRuntime::Containerd => (
            "/etc/containerd/config.toml",
            Some("/etc/containerd/conf.d/99-nvidia.toml"),
            Some("/run/containerd/containerd.sock"),
        ),
        ContainerRuntime::CriO => (
            "/etc/crio/config.toml",
            Some("/etc/crio/crio.conf.d/99-nvidia.conf"),
            None,
        ),
        ContainerRuntime::Docker => (
            "/etc/docker/daemon.json",
            None,
            Some("/var/run/docker.sock"),
        ),
    }
}

fn user<'a>(env: &'a [SpecEnvVar], name: &str) -> Option<&'a str> {
    env.iter()
        .find(|e| e.name == name)
        .and_then(|e| e.value.as_deref())
        .filter(|v| !v.is_empty())
}

fn split(file: &str) -> (String, String) {
    let path = Path::new(file);
    let dir = path
        .parent()
        .map_or_else(|| "/".to_owned(), |p| p.to_string_lossy().into_owned());
    let base = path
        .file_name()
        .map(|b| b.to_string_lossy().into_owned())
        .unwrap_or_default();
    (dir, base)
}

impl Wiring {
    fn directory(&mut self, name: &str, host_dir: &str, target: &str, create: bool) {
        self.volumes.push(pod::host_path(
            name,
            host_dir,
            create.then_some("DirectoryOrCreate"),
        ));
        self.mounts.push(pod::mount(name, target));
    }
}

/// The wiring of `runtime` given the user's env; `runtime_class` is the `nvidia` handler name.
pub fn wiring(
    runtime: ContainerRuntime,
    env: &[SpecEnvVar],
    runtime_class: &str,
    nri: bool,
) -> Wiring {
    let mut w = Wiring::default();
    w.env.push(("RUNTIME", runtime.as_str().to_owned()));
    if nri {
        let host = user(env, "NRI_SOCKET").unwrap_or("/var/run/nri/nri.sock");
        let (dir, base) = split(host);
        w.env
            .push(("NRI_SOCKET", format!("{NRI_SOCKET_DIR}{base}")));
        w.directory("nri-socket", &dir, NRI_SOCKET_DIR, true);
        return w;
    }
    let name = runtime.as_str();
    if runtime == ContainerRuntime::Containerd && user(env, "CONTAINERD_RUNTIME_CLASS").is_none() {
        w.env
            .push(("CONTAINERD_RUNTIME_CLASS", runtime_class.to_owned()));
    }
    let (config, drop_in, socket) = defaults(runtime);
    let config_var = match runtime {
        ContainerRuntime::Containerd => "CONTAINERD_CONFIG",
        ContainerRuntime::CriO => "CRIO_CONFIG",
        ContainerRuntime::Docker => "DOCKER_CONFIG",
    };
    let config = user(env, config_var)
        .or_else(|| user(env, "RUNTIME_CONFIG"))
        .unwrap_or(config);
    let (dir, base) = split(config);
    w.env
        .push(("RUNTIME_CONFIG", format!("{CONFIG_DIR}{base}")));
    w.env.push((config_var, format!("{CONFIG_DIR}{base}")));
    w.directory(&format!("{name}-config"), &dir, CONFIG_DIR, true);
    if let Some(default) = drop_in {
        let host = user(env, "RUNTIME_DROP_IN_CONFIG").unwrap_or(default);
        let (dir, base) = split(host);
        w.env
            .push(("RUNTIME_DROP_IN_CONFIG", format!("{DROP_IN_DIR}{base}")));
        w.env
            .push(("RUNTIME_DROP_IN_CONFIG_HOST_PATH", host.to_owned()));
        w.directory(&format!("{name}-drop-in-config"), &dir, DROP_IN_DIR, true);
    }
    if let Some(sources) = user(env, "RUNTIME_CONFIG_SOURCE") {
        let rewritten: Vec<String> = sources
            .split(',')
            .map(|source| match source.split_once('=') {
                Some(("file", path)) => format!("file=/host/{}", path.trim_start_matches('/')),
                _ => source.to_owned(),
            })
            .collect();
        w.env.push(("RUNTIME_CONFIG_SOURCE", rewritten.join(",")));
    }
    if let Some(default) = socket {
        let socket_var = match runtime {
            ContainerRuntime::Docker => "DOCKER_SOCKET",
            _ => "CONTAINERD_SOCKET",
        };
        let host = user(env, socket_var).unwrap_or(default);
        let (dir, base) = split(host);
        w.env
            .push(("RUNTIME_SOCKET", format!("{SOCKET_DIR}{base}")));
        w.env.push((socket_var, format!("{SOCKET_DIR}{base}")));
        w.directory(&format!("{name}-socket"), &dir, SOCKET_DIR, false);
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(w: &Wiring, name: &str) -> Option<String> {
        w.env
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.clone())
    }

    fn host(w: &Wiring, volume: &str) -> String {
        w.volumes
            .iter()
            .find(|v| v.name == volume)
            .and_then(|v| v.host_path.clone())
            .unwrap()
            .path
    }

    #[test]
    fn containerd_gets_config_drop_in_socket_and_the_runtime_class() {
        let w = wiring(ContainerRuntime::Containerd, &[], "nvidia", false);
        assert_eq!(value(&w, "RUNTIME").as_deref(), Some("containerd"));
        assert_eq!(
            value(&w, "CONTAINERD_CONFIG").as_deref(),
            Some("/runtime/config-dir/config.toml")
        );
        assert_eq!(
            value(&w, "RUNTIME_DROP_IN_CONFIG_HOST_PATH").as_deref(),
            Some("/etc/containerd/conf.d/99-nvidia.toml")
        );
        assert_eq!(
            value(&w, "CONTAINERD_SOCKET").as_deref(),
            Some("/runtime/sock-dir/containerd.sock")
        );
        assert_eq!(
            value(&w, "CONTAINERD_RUNTIME_CLASS").as_deref(),
            Some("nvidia")
        );
        assert_eq!(host(&w, "containerd-config"), "/etc/containerd");
        assert_eq!(host(&w, "containerd-socket"), "/run/containerd");
    }

    #[test]
    fn crio_has_no_socket_and_docker_no_drop_in() {
        let crio = wiring(ContainerRuntime::CriO, &[], "nvidia", false);
        assert_eq!(value(&crio, "RUNTIME").as_deref(), Some("crio"));
        assert_eq!(host(&crio, "crio-drop-in-config"), "/etc/crio/crio.conf.d");
        assert!(value(&crio, "RUNTIME_SOCKET").is_none());
        assert!(value(&crio, "CONTAINERD_RUNTIME_CLASS").is_none());
        let docker = wiring(ContainerRuntime::Docker, &[], "nvidia", false);
        assert_eq!(
            value(&docker, "DOCKER_SOCKET").as_deref(),
            Some("/runtime/sock-dir/docker.sock")
        );
        assert!(value(&docker, "RUNTIME_DROP_IN_CONFIG").is_none());
    }

    #[test]
    fn user_host_paths_are_mounted_and_translated() {
        let env = [
            SpecEnvVar::new(
                "CONTAINERD_CONFIG",
                "/var/lib/rancher/k3s/agent/etc/containerd/config.toml",
            ),
            SpecEnvVar::new("CONTAINERD_SOCKET", "/run/k3s/containerd/containerd.sock"),
            SpecEnvVar::new(
                "RUNTIME_CONFIG_SOURCE",
                "command,file=/etc/containerd/base.toml",
            ),
        ];
        let w = wiring(ContainerRuntime::Containerd, &env, "nvidia", false);
        assert_eq!(
            host(&w, "containerd-config"),
            "/var/lib/rancher/k3s/agent/etc/containerd"
        );
        assert_eq!(host(&w, "containerd-socket"), "/run/k3s/containerd");
        assert_eq!(
            value(&w, "RUNTIME_CONFIG_SOURCE").as_deref(),
            Some("command,file=/host/etc/containerd/base.toml")
        );
    }

    #[test]
    fn nri_mounts_only_the_nri_socket() {
        let w = wiring(ContainerRuntime::Containerd, &[], "nvidia", true);
        assert_eq!(w.volumes.len(), 1);
        assert_eq!(host(&w, "nri-socket"), "/var/run/nri");
        assert_eq!(
            value(&w, "NRI_SOCKET").as_deref(),
            Some("/runtime/nri-sock-dir/nri.sock")
        );
        assert!(value(&w, "CONTAINERD_CONFIG").is_none());
    }
}
