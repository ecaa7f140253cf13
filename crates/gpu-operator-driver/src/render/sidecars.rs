//! The driver pod's optional sidecars: `nvidia-peermem-ctr` (GPUDirect RDMA, from the driver
//! image, reloading `nvidia-peermem` after a MOFED reinstall), `nvidia-fs-ctr` (GPUDirect
//! Storage) and `nvidia-gdrcopy-ctr` (GDRCopy), each waiting for the driver before installing its
//! module.

use gpu_operator_api::spec::EnvVar as SpecEnvVar;
use gpu_operator_core::build::daemonset::merge_env;
use k8s_openapi::api::core::v1::{Container, VolumeMount};

use super::parts::{exec_probe, privileged, propagated, read_only};
use gpu_operator_core::build::pod::mount;

fn logs() -> Vec<VolumeMount> {
    vec![
        mount("var-log", "/var/log"),
        read_only(mount("dev-log", "/dev/log")),
    ]
}

/// `nvidia-peermem-ctr`, when `driver.rdma.enabled`.
pub fn peermem(host_mofed: bool, image: &str, extra: Vec<VolumeMount>) -> Container {
    let defaults = if host_mofed {
        vec![("USE_HOST_MOFED", "true".to_owned())]
    } else {
        Vec::new()
    };
    let mut mounts = vec![propagated(
        mount("run-nvidia", "/run/nvidia"),
        "Bidirectional",
    )];
    mounts.extend(logs());
    mounts.push(propagated(
        mount("run-mellanox-drivers", "/run/mellanox/drivers"),
        "HostToContainer",
    ));
    mounts.extend(extra);
    let check: &[&str] = &["sh", "-c", "nvidia-driver probe_nvidia_peermem"];
    Container {
        name: "nvidia-peermem-ctr".to_owned(),
        image: Some(image.to_owned()),
        command: Some(vec!["nvidia-driver".to_owned()]),
        args: Some(vec!["reload_nvidia_peermem".to_owned()]),
        env: Some(merge_env(&defaults, &[])).filter(|e| !e.is_empty()),
        security_context: Some(privileged()),
        volume_mounts: Some(mounts),
        startup_probe: Some(exec_probe(check, (10, 10, 10, 1, 120))),
        liveness_probe: Some(exec_probe(check, (30, 30, 10, 1, 1))),
        ..Container::default()
    }
}

/// A module sidecar (`nvidia-fs-ctr`, `nvidia-gdrcopy-ctr`): wait until the driver is installed
/// and loaded, then run `installer`; started once `module` is loaded.
pub fn module(
    name: &str,
    installer: &str,
    module: &str,
    image: &str,
    env: &[SpecEnvVar],
    extra: Vec<VolumeMount>,
) -> Container {
    let mut mounts = vec![propagated(
        mount("run-nvidia", "/run/nvidia"),
        "HostToContainer",
    )];
    mounts.extend(logs());
    mounts.extend(extra);
    let script = format!(
        "while ! {{ [ -d /run/nvidia/driver/usr/src ] && lsmod | grep -q '^nvidia '; }}; do \
         echo 'waiting for the NVIDIA driver to be installed and loaded'; sleep 10; done; \
         exec {installer} install"
    );
    let loaded = format!("lsmod | grep {module}");
    Container {
        name: name.to_owned(),
        image: Some(image.to_owned()),
        command: Some(vec!["bash".to_owned(), "-xc".to_owned()]),
        args: Some(vec![script]),
        env: Some(merge_env(&[], env)).filter(|e| !e.is_empty()),
        security_context: Some(privileged()),
        volume_mounts: Some(mounts),
        startup_probe: Some(exec_probe(&["sh", "-c", &loaded], (10, 10, 10, 1, 120))),
        ..Container::default()
    }
}
