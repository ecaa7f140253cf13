//! `DRIVER_CONFIG_DIGEST`: a hash of what the driver installation depends on (images, commands,
//! env, mounts and volumes of the manager, driver and sidecar containers), set on the
//! k8s-driver-manager and driver containers. When a restarted driver pod finds the digest of the
//! installed driver equal to its own, it keeps the loaded driver instead of reinstalling it; a
//! change that does not touch the installation (labels, tolerations) keeps the digest.

use k8s_openapi::api::core::v1::PodSpec;
use serde_json::json;

/// The env variable NVIDIA's driver manager and driver container read.
pub const ENV: &str = "DRIVER_CONFIG_DIGEST";

/// The digest of `pod` (whose containers carry no digest yet), as 16 hex digits.
pub fn of(pod: &PodSpec) -> String {
    let containers: Vec<_> = pod
        .init_containers
        .iter()
        .flatten()
        .chain(&pod.containers)
        .map(|c| {
            json!([
                c.name,
                c.image,
                c.command,
                c.args,
                c.env,
                c.env_from,
                c.volume_mounts
            ])
        })
        .collect();
    let text = json!([containers, pod.volumes]).to_string();
    gpu_operator_core::build::digest::of(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Container;

    use super::*;

    #[test]
    fn the_digest_follows_the_installation_and_nothing_else() {
        let pod = |image: &str| PodSpec {
            containers: vec![Container {
                name: "nvidia-driver-ctr".into(),
                image: Some(image.into()),
                ..Container::default()
            }],
            ..PodSpec::default()
        };
        let a = of(&pod("driver:1"));
        assert_eq!(a.len(), 16);
        assert_ne!(a, of(&pod("driver:2")));
        let mut tolerant = pod("driver:1");
        tolerant.priority_class_name = Some("other".into());
        assert_eq!(a, of(&tolerant));
    }
}
