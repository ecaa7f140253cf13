//! [`Component`]: a ClusterPolicy component's per-container settings (`<component>.{imagePullPolicy,
//! imagePullSecrets, resources, args, env, hostNetwork}`), resolved once by an operand's
//! validation from the `ImageSpec` and `ContainerSpec` its section flattens, so that an operand's
//! `Input` carries them instead of its raw section. [`crate::build::pod::finish`] applies them.
//! [`Pull`] is the same for an image of another section that runs in the pod (a sidecar's).

use gpu_operator_api::spec::{ContainerSpec, EnvVar, ImageSpec};
use k8s_openapi::api::core::v1::{LocalObjectReference, PodSpec, ResourceRequirements};

use crate::build::image;

/// A component's resolved per-container settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Component {
    /// The Kubernetes `imagePullPolicy` of the containers running the component's image:
    /// `Always` or `Never` when the section says so, else `IfNotPresent`.
    pub pull_policy: &'static str,
    /// `<component>.imagePullSecrets`, empty when unset.
    pub pull_secrets: Vec<String>,
    /// `<component>.resources`, for every container of the pod; `None` leaves them unset.
    pub resources: Option<ResourceRequirements>,
    /// `<component>.args`, which replace the main container's arguments; empty when unset.
    pub args: Vec<String>,
    /// `<component>.env`, which override the operator's variables of the same name; empty when
    /// unset.
    pub env: Vec<EnvVar>,
    /// Whether the pods run in the node's network namespace (`<component>.hostNetwork: true`).
    pub host_network: bool,
}

impl Component {
    /// The settings of a section's `image` and `container` parts and its `hostNetwork`.
    pub fn of(image: &ImageSpec, container: &ContainerSpec, host_network: Option<bool>) -> Self {
        Self {
            pull_policy: image::pull_policy(image),
            pull_secrets: image.pull_secrets().to_vec(),
            resources: container.resources.as_ref().map(|r| ResourceRequirements {
                limits: r.limits.clone(),
                requests: r.requests.clone(),
                ..ResourceRequirements::default()
            }),
            args: container.args().to_vec(),
            env: container.env().to_vec(),
            host_network: host_network == Some(true),
        }
    }

    /// The value of the user's env variable `name` (the last one of that name), an unset value
    /// read as empty.
    pub fn user_env(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .rev()
            .find(|e| e.name == name)
            .map(|e| e.value.as_deref().unwrap_or_default())
    }
}

/// The pull settings of an image that is not the component's own (a sidecar's or an init
/// container's, from a section of its own): they apply only where that section sets them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pull {
    /// The Kubernetes `imagePullPolicy`, when the section sets `imagePullPolicy`.
    pub policy: Option<&'static str>,
    /// The section's `imagePullSecrets`, empty when unset.
    pub secrets: Vec<String>,
}

impl Pull {
    /// The pull settings of `image`.
    pub fn of(image: &ImageSpec) -> Self {
        Self {
            policy: image.pull_policy().map(|_| image::pull_policy(image)),
            secrets: image.pull_secrets().to_vec(),
        }
    }

    /// Applies these settings to the init container `container` of `pod`, as NVIDIA applies a
    /// driver manager's: its pull policy only where the section sets one (else `IfNotPresent`,
    /// not the pod's main image's), its pull secrets added to the pod's.
    pub fn apply_to_init(&self, pod: &mut PodSpec, container: &str) {
        if let Some(init) = pod
            .init_containers
            .iter_mut()
            .flatten()
            .find(|c| c.name == container)
        {
            init.image_pull_policy = Some(self.policy.unwrap_or("IfNotPresent").to_owned());
        }
        if self.secrets.is_empty() {
            return;
        }
        let secrets = pod.image_pull_secrets.get_or_insert_with(Vec::new);
        for secret in &self.secrets {
            if !secrets.iter().any(|s| &s.name == secret) {
                secrets.push(LocalObjectReference {
                    name: secret.clone(),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_the_pull_policy_and_leaves_unset_lists_empty() {
        let image: ImageSpec = serde_json::from_value(serde_json::json!({
            "imagePullPolicy": "Never", "imagePullSecrets": ["s"]
        }))
        .unwrap();
        let container: ContainerSpec = serde_json::from_value(serde_json::json!({
            "resources": {"limits": {"cpu": "1"}},
            "env": [{"name": "A", "value": "1"}, {"name": "A"}]
        }))
        .unwrap();
        let component = Component::of(&image, &container, Some(true));
        assert_eq!(component.pull_policy, "Never");
        assert_eq!(component.pull_secrets, ["s"]);
        assert!(component.resources.unwrap().limits.is_some());
        assert!(component.args.is_empty());
        assert!(component.host_network);
        let plain = Component::of(
            &ImageSpec::default(),
            &ContainerSpec::default(),
            Some(false),
        );
        assert_eq!(plain.pull_policy, "IfNotPresent");
        assert!(!plain.host_network);
        assert_eq!(plain.user_env("A"), None);
        let env = Component::of(&ImageSpec::default(), &container, None);
        assert_eq!(env.user_env("A"), Some(""));
        assert_eq!(Pull::of(&image).policy, Some("Never"));
        assert_eq!(Pull::of(&ImageSpec::default()), Pull::default());
    }
}
