//! Checks the ClusterPolicy for the toolkit, resolves its image (`CONTAINER_TOOLKIT_IMAGE` as
//! fallback) and the validator image of its `driver-validation` init container
//! (`VALIDATOR_IMAGE`), and picks the container runtime to configure. Pure.

use gpu_operator_api::ClusterPolicySpec;
use gpu_operator_core::{
    Error,
    build::{
        component::Component,
        runtime_class::{self, ContainerRuntime},
        shared::Shared,
    },
    contract::Cluster,
};

use crate::render::RuntimeSettings;

/// What rendering the toolkit needs.
#[derive(Clone, Debug)]
pub struct Input {
    /// `spec.toolkit`'s container settings.
    pub component: Component,
    /// `toolkit.installDir`, `/usr/local/nvidia` when unset or empty.
    pub install_dir: String,
    /// The RuntimeClass name and the CDI and NRI switches.
    pub runtime_settings: RuntimeSettings,
    /// The settings every operand pod shares.
    pub shared: Shared,
    /// The operator namespace (subject of the role binding).
    pub namespace: String,
    /// The toolkit image.
    pub image: String,
    /// The validator image, run by the init container that waits for the driver.
    pub validator_image: String,
    /// The runtime to configure: the user's `RUNTIME` in `toolkit.env`, else the detected one.
    pub runtime: ContainerRuntime,
}

impl Input {
    /// What rendering needs from `spec`, with the namespace, images and runtime resolved.
    pub fn new(
        spec: &ClusterPolicySpec,
        namespace: String,
        image: String,
        validator_image: String,
        runtime: ContainerRuntime,
    ) -> Self {
        Self {
            component: Component::of(
                &spec.toolkit.image,
                &spec.toolkit.container,
                spec.toolkit.host_network,
            ),
            install_dir: spec.toolkit.install_dir().to_owned(),
            runtime_settings: RuntimeSettings::of(spec),
            shared: Shared::of(spec),
            namespace,
            image,
            validator_image,
            runtime,
        }
    }
}

/// `Ok(None)` when `toolkit.enabled` is false (it defaults to true).
pub fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
    if !spec.toolkit_enabled() {
        return Ok(None);
    }
    if runtime_class::nri_plugin_enabled(spec) && !runtime_class::cdi_enabled(spec) {
        return Err(Error::InvalidSpec(
            "cdi.nriPluginEnabled needs cdi.enabled: the NRI plugin injects GPUs through CDI; \
             enable CDI or turn the NRI plugin off"
                .to_owned(),
        ));
    }
    let image = cluster.image("toolkit", &spec.toolkit.image, "CONTAINER_TOOLKIT_IMAGE")?;
    let validator_image = cluster.validator_image(spec)?;
    let user_runtime = spec
        .toolkit
        .container
        .env()
        .iter()
        .find(|e| e.name == "RUNTIME")
        .and_then(|e| e.value.as_deref());
    let runtime = match user_runtime {
        None => runtime_class::detect(spec, cluster.facts),
        Some(name) => ContainerRuntime::from_name(name).ok_or_else(|| {
            Error::InvalidSpec(format!(
                "toolkit.env RUNTIME={name:?}: use containerd, crio or docker, or remove it to \
                 detect the runtime from the nodes"
            ))
        })?,
    };
    Ok(Some(Input::new(
        spec,
        cluster.namespace.to_owned(),
        image,
        validator_image,
        runtime,
    )))
}
