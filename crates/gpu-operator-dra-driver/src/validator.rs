//! The DRA validator operand's input: the validator image (the active ClusterPolicy's
//! `validator` section, else `VALIDATOR_IMAGE`) and its pull settings, the GPUCluster's
//! `daemonsets` settings, and the same API server prerequisites as the DRA driver (its claim
//! template is a `resource.k8s.io/v1` object). Pure.

use gpu_operator_api::{
    GpuCluster,
    spec::{ContainerSpec, ImageSpec},
};
use gpu_operator_core::{
    Error,
    build::{component::Component, shared::Shared},
    contract::Cluster,
};

use crate::{prerequisites, validate};

/// What rendering the DRA validator needs.
#[derive(Clone, Debug)]
pub struct ValidatorInput {
    /// The validator image.
    pub image: String,
    /// The validator's pull policy and secrets.
    pub component: Component,
    /// The GPUCluster's `daemonsets` settings.
    pub shared: Shared,
}

/// The DRA validator's input: always deployed with the GPUCluster.
pub fn validate(
    cluster_cr: &GpuCluster,
    cluster: &Cluster<'_>,
) -> Result<Option<ValidatorInput>, Error> {
    prerequisites::server(cluster.server)?;
    let image = validate::validator_image(cluster)?;
    let pull: ImageSpec = cluster
        .policy
        .and_then(|policy| policy.validator.as_ref())
        .map(|validator| validator.image.clone())
        .unwrap_or_default();
    Ok(Some(ValidatorInput {
        image,
        component: Component::of(&pull, &ContainerSpec::default(), None),
        shared: validate::shared(&cluster_cr.spec.daemonsets),
    }))
}
