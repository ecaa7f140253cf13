//! The GPUCluster's DRA operands. [`DraDriver`] (NVIDIA's `state-dra-driver`): the NVIDIA DRA
//! driver for GPUs — the kubelet plugin DaemonSet `nvidia-dra-driver-kubelet-plugin` (the `gpus`
//! plugin always, `compute-domains` with `draDriver.computeDomains`), the ComputeDomain controller
//! Deployment, the DeviceClasses, the admission policy that keeps the kubelet plugin's
//! ResourceSlice writes to its own node, and their RBAC. [`DraValidator`] (NVIDIA's
//! `state-dra-validation`): DaemonSet `nvidia-dra-validator`, which claims a GPU through DRA on
//! each node and runs a CUDA kernel on it. Both refuse, rendering nothing, when the API server
//! serves no usable version of `resource.k8s.io` (`v1`, else `v1beta2`, of which the driver warns)
//! ([`prerequisites`]); the driver also refuses feature gates the driver itself refuses
//! ([`feature_gates`]). Pure validate and render steps.

mod feature_gates;
pub mod prerequisites;
mod render;
#[cfg(test)]
mod testing;
mod validate;
mod validator;

use gpu_operator_api::GpuCluster;
use gpu_operator_core::{
    Error,
    contract::{Children, Cluster, ImageEnv, Operand, Warning},
};

pub use render::{
    ADMISSION_POLICY, KUBELET_PLUGIN_DAEMONSET, validator::NAME as VALIDATOR_DAEMONSET,
};
pub use validate::{ComputeDomains, Input, Plugin};
pub use validator::ValidatorInput;

/// The DRA driver's condition on the GPUCluster.
pub const DRA_DRIVER_READY: &str = "DRADriverReady";
/// The DRA validator's condition on the GPUCluster.
pub const DRA_VALIDATOR_READY: &str = "DRAValidatorReady";
/// Warning reason of a feature gate no DRA driver release we know has.
pub const UNKNOWN_FEATURE_GATE: &str = "UnknownFeatureGate";

/// The NVIDIA DRA driver for GPUs.
pub struct DraDriver;

impl Operand for DraDriver {
    type Owner = GpuCluster;
    const NAME: &'static str = "dra-driver";
    const CONDITION: &'static str = DRA_DRIVER_READY;
    const SECTION: &'static str = "draDriver";
    type Input = Input;
    const IMAGES: &'static [ImageEnv] = &[ImageEnv {
        var: validate::IMAGE_ENV,
        chart_values: Some("draDriver"),
    }];

    fn validate(spec: &GpuCluster, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
        validate::validate(spec, cluster)
    }

    fn render(input: &Input) -> Children {
        render::children(input)
    }

    fn unserved(input: &Input) -> Option<String> {
        input.unserved.clone()
    }

    fn warnings(input: &Input) -> Vec<Warning> {
        let gates = input.unknown_gates.iter().map(|gate| Warning {
            reason: UNKNOWN_FEATURE_GATE,
            message: format!(
                "spec.draDriver.featureGates: {gate} is not a gate of the DRA driver \
                     releases this operator knows; the driver refuses gates it does not know at \
                     start-up: remove it unless your driver version has it"
            ),
        });
        input.beta_api.iter().cloned().chain(gates).collect()
    }
}

/// The DRA validator: a GPU claimed through DRA computes on every DRA node.
pub struct DraValidator;

impl Operand for DraValidator {
    type Owner = GpuCluster;
    const NAME: &'static str = "dra-validator";
    const CONDITION: &'static str = DRA_VALIDATOR_READY;
    const SECTION: &'static str = "draDriver";
    type Input = ValidatorInput;

    fn validate(spec: &GpuCluster, cluster: &Cluster<'_>) -> Result<Option<ValidatorInput>, Error> {
        validator::validate(spec, cluster)
    }

    fn render(input: &ValidatorInput) -> Children {
        Children {
            service_accounts: vec![render::validator::service_account()],
            resource_claim_templates: vec![render::validator::claim_template()],
            daemonsets: vec![render::validator::daemonset(input)],
            ..Children::default()
        }
    }
}
