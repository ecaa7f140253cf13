//! Finishing an operand's pod into its DaemonSet, the one way every operand does it, and the small
//! pod parts operands share (hostPath volumes, mounts, the privileged security context).
//!
//! An operand builds its own containers and volumes, then hands the pod to [`finish`] with every
//! shared step spelled out as a field of [`Finish`]. The steps run in one fixed order: the
//! component's settings (they reach every container, the barrier's too), then the validation
//! barrier (whose `spec.validator` settings must win on the `*-validation` init containers), then
//! the `hostPaths` rewrites, then `<component>.args`. Only a [`Finished`] pod can become a
//! DaemonSet ([`Finished::into_daemonset`]: the `daemonsets` settings, then GPU access), so no
//! operand can wrap a pod it has not finished or finish one twice in another order.

use gpu_operator_api::spec::{DaemonsetsSpec, HostPathsSpec, ValidatorSpec};
use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{HostPathVolumeSource, PodSpec, SecurityContext, Volume, VolumeMount},
};

use crate::build::{
    barrier,
    component::Component,
    daemonset::{self, Identity},
    host_paths,
    runtime_class::GpuAccess,
};

/// Volume `name` of the host directory (or file) `path`, with hostPath type `type_` (such as
/// `DirectoryOrCreate`) when given.
pub fn host_path(name: &str, path: &str, type_: Option<&str>) -> Volume {
    Volume {
        name: name.to_owned(),
        host_path: Some(HostPathVolumeSource {
            path: path.to_owned(),
            type_: type_.map(str::to_owned),
        }),
        ..Volume::default()
    }
}

/// Volume `name` mounted read-write at `path`; adjust it with struct update syntax
/// (`VolumeMount { read_only: Some(true), ..mount(name, path) }`).
pub fn mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        ..VolumeMount::default()
    }
}

/// Volume `name` mounted read-only at `path`.
pub fn read_only_mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount {
        read_only: Some(true),
        ..mount(name, path)
    }
}

/// `mount` with the given propagation (`Bidirectional`, `HostToContainer`).
pub fn propagated(mount: VolumeMount, propagation: &str) -> VolumeMount {
    VolumeMount {
        mount_propagation: Some(propagation.to_owned()),
        ..mount
    }
}

/// A privileged container's security context.
pub fn privileged() -> SecurityContext {
    SecurityContext {
        privileged: Some(true),
        ..SecurityContext::default()
    }
}

/// How the pod waits for the validator on its node.
#[derive(Clone, Copy, Debug)]
pub enum Barrier<'a> {
    /// No barrier from this module: the operand runs before the validator (the driver), is the
    /// validator, or does without one (the node status exporter, the toolkit, which waits on the
    /// driver with an init container of its own).
    None,
    /// Add the `toolkit-validation` init container (the pod's only one) from `validator_image`
    /// and its status-file volume, with `validator`'s settings.
    AfterToolkit {
        /// The resolved validator image.
        validator_image: &'a str,
        /// `spec.validator`.
        validator: Option<&'a ValidatorSpec>,
    },
    /// The operand placed its `*-validation` init containers and the status-file volume itself
    /// (to keep NVIDIA's order of containers and volumes): apply `validator`'s settings to them.
    InPod {
        /// `spec.validator`.
        validator: Option<&'a ValidatorSpec>,
    },
}

/// Whether `spec.hostPaths` is applied by rewriting the pod's host volumes.
#[derive(Clone, Copy, Debug)]
pub enum HostPaths<'a> {
    /// Rewrite the volumes named as NVIDIA's (`host-root`, `driver-install-dir`, …) for
    /// `spec.hostPaths` (see [`host_paths`]).
    Rewrite(Option<&'a HostPathsSpec>),
    /// The operand built its volumes from `spec.hostPaths` itself (driver, toolkit).
    ResolvedByOperand,
}

/// The shared steps of an operand pod, in the order [`finish`] runs them.
#[derive(Clone, Copy, Debug)]
pub struct Finish<'a> {
    /// The component's settings, on every container.
    pub component: &'a Component,
    /// The validation barrier.
    pub barrier: Barrier<'a>,
    /// The `hostPaths` rewrites.
    pub host_paths: HostPaths<'a>,
    /// The main container that takes `<component>.args` (they replace its arguments when set);
    /// `None` when the component has no args setting for this pod.
    pub args: Option<&'a str>,
}

/// A pod that went through [`finish`]: the only kind of pod that becomes a DaemonSet.
#[derive(Clone, Debug)]
pub struct Finished(PodSpec);

/// How a finished pod becomes its DaemonSet.
#[derive(Clone, Copy, Debug)]
pub struct Wrap<'a> {
    /// The DaemonSet's name, owner and deploy label.
    pub identity: Identity<'a>,
    /// `spec.daemonsets`: placement, tolerations, priority class, labels, update strategy.
    pub daemonsets: &'a DaemonsetsSpec,
    /// How the pods reach the GPUs, and for which container; `None` for operands that need no
    /// GPU access from the runtime (driver, toolkit, node status exporter).
    pub gpus: Option<Gpus<'a>>,
}

/// GPU access for one container of the pod.
#[derive(Clone, Copy, Debug)]
pub struct Gpus<'a> {
    /// RuntimeClass or NRI annotation.
    pub access: &'a GpuAccess,
    /// The container the NRI annotation names.
    pub container: &'a str,
}

/// Runs the shared steps on `pod`, in the fixed order the fields of [`Finish`] list.
pub fn finish(mut pod: PodSpec, steps: Finish<'_>) -> Finished {
    let Finish {
        component,
        barrier,
        host_paths,
        args,
    } = steps;
    daemonset::apply_component(&mut pod, component);
    match barrier {
        Barrier::None => {}
        Barrier::AfterToolkit {
            validator_image,
            validator,
        } => barrier::after_toolkit(&mut pod, validator_image, validator),
        Barrier::InPod { validator } => barrier::apply_validator(&mut pod, validator),
    }
    match host_paths {
        HostPaths::Rewrite(paths) => host_paths::apply(&mut pod, paths),
        HostPaths::ResolvedByOperand => {}
    }
    if let Some(main) = args {
        daemonset::apply_args(&mut pod, main, &component.args);
    }
    Finished(pod)
}

impl Finished {
    /// The finished pod, for an operand's own last touches before it is wrapped (the driver
    /// digests it; the toolkit applies the validator image's settings to its driver barrier).
    pub fn pod_mut(&mut self) -> &mut PodSpec {
        &mut self.0
    }

    /// The DaemonSet of this pod: the `daemonsets` settings, then GPU access.
    pub fn into_daemonset(self, wrap: Wrap<'_>) -> DaemonSet {
        let Wrap {
            identity,
            daemonsets,
            gpus,
        } = wrap;
        let mut ds = daemonset::build(identity, self.0, daemonsets);
        if let Some(Gpus { access, container }) = gpus {
            access.grant(&mut ds, container);
        }
        ds
    }
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::spec::ValidatorSpec;
    use k8s_openapi::api::core::v1::Container;

    use super::*;

    fn container(name: &str) -> Container {
        Container {
            name: name.to_owned(),
            ..Container::default()
        }
    }

    #[test]
    fn the_barrier_takes_the_validators_settings_over_the_components() {
        let component_image: gpu_operator_api::spec::ImageSpec =
            serde_json::from_value(serde_json::json!({"imagePullPolicy": "Always"})).unwrap();
        let component_container: gpu_operator_api::spec::ContainerSpec =
            serde_json::from_value(serde_json::json!({
                "resources": {"limits": {"cpu": "2"}}, "args": ["--user"]
            }))
            .unwrap();
        let validator: ValidatorSpec = serde_json::from_value(serde_json::json!({
            "imagePullPolicy": "Never", "imagePullSecrets": ["validator-secret"]
        }))
        .unwrap();
        let pod = PodSpec {
            containers: vec![container("main"), container("side")],
            ..PodSpec::default()
        };
        let steps = Finish {
            component: &Component::of(&component_image, &component_container, Some(true)),
            barrier: Barrier::AfterToolkit {
                validator_image: "validator:1",
                validator: Some(&validator),
            },
            host_paths: HostPaths::Rewrite(None),
            args: Some("main"),
        };
        let pod = finish(pod, steps).0;
        let init = &pod.init_containers.as_ref().unwrap()[0];
        assert_eq!(init.name, "toolkit-validation");
        assert_eq!(init.image_pull_policy.as_deref(), Some("Never"));
        assert_eq!(init.resources, None);
        assert_eq!(
            pod.containers[0].image_pull_policy.as_deref(),
            Some("Always")
        );
        assert!(pod.containers[1].resources.is_some());
        assert_eq!(
            pod.containers[0].args.as_deref(),
            Some(&["--user".to_owned()][..])
        );
        assert_eq!(pod.containers[1].args, None);
        assert_eq!(pod.host_network, Some(true));
        let secrets: Vec<&str> = pod
            .image_pull_secrets
            .iter()
            .flatten()
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(secrets, ["validator-secret"]);
    }
}
