//! Checks the ClusterPolicy for a sandbox device plugin and resolves its images: its own (the
//! section's, else its `*_IMAGE` variable) and the validator's (its barrier's init containers, as
//! NVIDIA's). Pure.

use gpu_operator_api::{
    ClusterPolicySpec,
    spec::{ContainerSpec, ImageSpec, SandboxMode},
};
use gpu_operator_core::{
    Error,
    build::{component::Component, image, shared::Shared},
    contract::Cluster,
};

use crate::Flavor;

/// What rendering a sandbox device plugin needs.
#[derive(Clone, Debug)]
pub struct Input {
    /// Which plugin.
    pub flavor: &'static Flavor,
    /// The plugin image.
    pub image: String,
    /// The validator image of the barrier's init containers.
    pub validator_image: String,
    /// The operator namespace (the bindings' subject).
    pub namespace: String,
    /// The section's container settings.
    pub component: Component,
    /// The settings every operand pod shares.
    pub shared: Shared,
}

/// The section's image, container settings and `hostNetwork`, whichever plugin it is.
type Section<'a> = (&'a ImageSpec, &'a ContainerSpec, Option<bool>);

/// The section of `flavor`, when the ClusterPolicy deploys it.
fn section<'a>(flavor: &Flavor, spec: &'a ClusterPolicySpec) -> Option<Section<'a>> {
    match flavor.mode {
        SandboxMode::Kubevirt => {
            let s = spec
                .sandbox_device_plugin
                .as_ref()
                .filter(|_| spec.sandbox_device_plugin_enabled())?;
            Some((&s.image, &s.container, s.host_network))
        }
        SandboxMode::Kata => {
            let s = spec
                .kata_sandbox_device_plugin
                .as_ref()
                .filter(|_| spec.kata_sandbox_device_plugin_enabled())?;
            Some((&s.image, &s.container, s.host_network))
        }
    }
}

/// `Ok(None)` unless sandbox workloads are on in `flavor`'s mode and its section's `enabled` is
/// true (NVIDIA's default is false); an image that cannot be resolved is an error naming its
/// section.
pub fn validate(
    flavor: &'static Flavor,
    spec: &ClusterPolicySpec,
    cluster: &Cluster<'_>,
) -> Result<Option<Input>, Error> {
    let Some((image_spec, container, host_network)) = section(flavor, spec) else {
        return Ok(None);
    };
    let image = image::resolve(
        flavor.section,
        image_spec,
        flavor.image_env,
        (cluster.image_env)(flavor.image_env).as_deref(),
    )?;
    let validator_image = cluster.validator_image(spec)?;
    Ok(Some(Input {
        flavor,
        image,
        validator_image,
        namespace: cluster.namespace.to_owned(),
        component: Component::of(image_spec, container, host_network),
        shared: Shared::of(spec),
    }))
}

#[cfg(test)]
mod tests;
