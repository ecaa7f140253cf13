//! The user-provided configuration the driver pod mounts, per NVIDIA's paths:
//! - `repoConfig` (package repositories) and `certConfig` (CA certificates) at the OS's own
//!   directories, only when the driver is compiled on the node (not precompiled);
//! - `licensingConfig` (vGPU guests): `gridd.conf` at `/drivers/gridd.conf` and, with NLS, the
//!   client token under `/drivers/ClientConfigToken/`, from a Secret (or a deprecated ConfigMap);
//! - `virtualTopology.config`: `nvidia-topologyd.conf` at `/etc/nvidia/`;
//! - `kernelModuleConfig`: the module parameter files (`nvidia.conf`, `nvidia-uvm.conf`,
//!   `nvidia-modeset.conf`, `nvidia-peermem.conf`) under `/drivers`, next to the installer;
//! - `secretEnv`: a Secret's keys as env (`envFrom`);
//! - RHEL (outside CRI-O) and SLES entitlements from the host, unless a RHEL repoConfig replaces
//!   them.
//!
//! NVIDIA lists the repository and certificate ConfigMaps' keys to mount each file alone; a pure
//! render does not read ConfigMaps, so those two are mounted as whole directories (the
//! ConfigMap's files replace the directory's defaults in the container).

use gpu_operator_core::build::runtime_class::ContainerRuntime;
use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, EnvFromSource, KeyToPath, SecretEnvSource, SecretVolumeSource, Volume,
    VolumeMount,
};

use super::parts::read_only;
use crate::{
    Pool,
    settings::{Licensing, UserConfig},
};
use gpu_operator_core::build::pod::{host_path, mount};

/// The module parameter files the driver container reads from `/drivers`.
const MODULE_FILES: [&str; 4] = [
    "nvidia.conf",
    "nvidia-uvm.conf",
    "nvidia-modeset.conf",
    "nvidia-peermem.conf",
];

/// Where an OS keeps package repository files.
pub fn repo_config_dir(os_id: &str) -> Option<&'static str> {
    Some(match os_id {
        "ubuntu" | "debian" => "/etc/apt/sources.list.d",
        "rhel" | "rhcos" | "centos" | "rocky" | "ol" => "/etc/yum.repos.d",
        "sles" | "sl-micro" => "/etc/zypp/repos.d",
        _ => return None,
    })
}

/// Where an OS keeps extra CA certificates.
pub fn cert_config_dir(os_id: &str) -> Option<&'static str> {
    Some(match os_id {
        "ubuntu" | "debian" => "/usr/local/share/ca-certificates",
        "rhel" | "rhcos" | "centos" | "rocky" | "ol" => "/etc/pki/ca-trust/extracted/pem",
        "sles" | "sl-micro" => "/etc/pki/trust/anchors",
        _ => return None,
    })
}

/// Volumes of a pod and the mounts of each of its driver containers.
#[derive(Default)]
pub struct Mounts {
    /// Pod volumes.
    pub volumes: Vec<Volume>,
    /// Mounts of `nvidia-driver-ctr`.
    pub driver: Vec<VolumeMount>,
    /// Mounts of `nvidia-peermem-ctr` (kernel module parameters).
    pub peermem: Vec<VolumeMount>,
    /// Mounts of the GDS and GDRCopy sidecars (repositories and certificates).
    pub sidecars: Vec<VolumeMount>,
    /// `envFrom` of the driver and GDS/GDRCopy containers (`secretEnv`).
    pub env_from: Vec<EnvFromSource>,
}

fn config_map_volume(name: &str, items: Option<Vec<KeyToPath>>, optional: bool) -> Volume {
    Volume {
        name: name.to_owned(),
        config_map: Some(ConfigMapVolumeSource {
            name: name.to_owned(),
            items,
            optional: optional.then_some(true),
            ..ConfigMapVolumeSource::default()
        }),
        ..Volume::default()
    }
}

fn key(name: &str) -> KeyToPath {
    KeyToPath {
        key: name.to_owned(),
        path: name.to_owned(),
        mode: None,
    }
}

fn file_mount(volume: &str, dir: &str, file: &str) -> VolumeMount {
    VolumeMount {
        sub_path: Some(file.to_owned()),
        ..read_only(mount(volume, &format!("{dir}/{file}")))
    }
}

/// Everything the spec asks the driver pod of `pool` to mount.
pub fn build(config: &UserConfig, pool: &Pool) -> Mounts {
    let mut m = Mounts::default();
    let precompiled = config.precompiled;
    let os_id = pool.os.id.as_str();
    let repo = config.repo_config.as_deref();
    let cert = config.cert_config.as_deref();
    if !precompiled {
        for (name, dir) in [
            (repo, repo_config_dir(os_id)),
            (cert, cert_config_dir(os_id)),
        ] {
            if let (Some(name), Some(dir)) = (name, dir) {
                m.volumes.push(config_map_volume(name, None, false));
                m.driver.push(read_only(mount(name, dir)));
                m.sidecars.push(read_only(mount(name, dir)));
            }
        }
    }
    if let Some(licensing) = &config.licensing {
        licensing_mounts(licensing, &mut m);
    }
    if let Some(topology) = &config.virtual_topology {
        let file = "nvidia-topologyd.conf";
        m.volumes.push(Volume {
            name: "topology-config".to_owned(),
            ..config_map_volume(topology, Some(vec![key(file)]), false)
        });
        m.driver
            .push(file_mount("topology-config", "/etc/nvidia", file));
    }
    if let Some(name) = &config.kernel_module_config {
        m.volumes.push(config_map_volume(
            name,
            Some(MODULE_FILES.iter().map(|f| key(f)).collect()),
            true,
        ));
        for file in MODULE_FILES {
            m.driver.push(file_mount(name, "/drivers", file));
            m.peermem.push(file_mount(name, "/drivers", file));
        }
    }
    if let Some(secret) = &config.secret_env {
        m.env_from.push(EnvFromSource {
            secret_ref: Some(SecretEnvSource {
                name: secret.clone(),
                optional: None,
            }),
            ..EnvFromSource::default()
        });
    }
    if !precompiled {
        entitlements(os_id, pool.runtime, repo.is_some(), &mut m);
    }
    m
}

fn licensing_mounts(licensing: &Licensing, m: &mut Mounts) {
    let mut items = vec![key("gridd.conf")];
    m.driver
        .push(file_mount("licensing-config", "/drivers", "gridd.conf"));
    if licensing.nls {
        let token = "client_configuration_token.tok";
        items.push(key(token));
        m.driver.push(file_mount(
            "licensing-config",
            "/drivers/ClientConfigToken",
            token,
        ));
    }
    m.volumes.push(match &licensing.secret {
        Some(secret) => Volume {
            name: "licensing-config".to_owned(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret.clone()),
                items: Some(items),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        },
        None => Volume {
            name: "licensing-config".to_owned(),
            ..config_map_volume(
                licensing.config_map.as_deref().unwrap_or_default(),
                Some(items),
                false,
            )
        },
    });
}

/// The host's subscription files, which let the driver container install the distribution's
/// packages: RHEL outside CRI-O (unless a repoConfig provides the repositories) and SLES.
fn entitlements(os_id: &str, runtime: ContainerRuntime, repo_config: bool, m: &mut Mounts) {
    let paths: &[(&str, &str, &str)] = match os_id {
        "rhel" if runtime != ContainerRuntime::CriO && !repo_config => &[
            (
                "/run/secrets/etc-pki-entitlement",
                "/etc/pki/entitlement",
                "Directory",
            ),
            (
                "/run/secrets/redhat.repo",
                "/etc/yum.repos.d/redhat.repo",
                "File",
            ),
            ("/run/secrets/rhsm", "/etc/rhsm", "Directory"),
        ],
        "sles" | "sl-micro" => &[
            ("/etc/SUSEConnect", "/etc/SUSEConnect", "FileOrCreate"),
            (
                "/etc/zypp/credentials.d",
                "/etc/zypp/credentials.d",
                "Directory",
            ),
        ],
        _ => &[],
    };
    for (index, (target, host, type_)) in paths.iter().enumerate() {
        let name = format!("subscription-config-{index}");
        m.volumes.push(host_path(&name, host, Some(type_)));
        m.driver.push(read_only(mount(&name, target)));
    }
}
