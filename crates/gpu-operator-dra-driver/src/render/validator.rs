//! The DRA validator's objects (NVIDIA's `state-dra-validation`): ServiceAccount
//! `nvidia-dra-validator`; ResourceClaimTemplate `nvidia-dra-validator-gpu`, an admin-access claim
//! of one `gpu.nvidia.com` device (admin access reaches a device whoever holds it, so the check
//! never waits for a free GPU; the namespace needs `resource.kubernetes.io/admin-access=true`);
//! and DaemonSet `nvidia-dra-validator` on the nodes labelled
//! `nvidia.com/gpu.deploy.dra-validator=true`, whose `gpu-validation` init container holds the
//! claim and runs `vectorAdd`, the CUDA workload of our validator image: a kernel on every GPU the
//! DRA driver handed over (through CDI, with the driver's libraries), each element checked. Where
//! NVIDIA lists the GPUs (`nvidia-smi -L`), this proves the claimed GPU computes. Then the pod
//! idles, so its readiness says the node's DRA path works.

use gpu_operator_core::{
    build::{
        daemonset::Identity,
        meta,
        pod::{self, Barrier, Finish, HostPaths, Wrap},
    },
    contract::Operand as _,
};
use k8s_openapi::{
    api::{
        apps::v1::DaemonSet,
        core::v1::{
            Affinity, Container, NodeAffinity, NodeSelector, NodeSelectorRequirement,
            NodeSelectorTerm, PodResourceClaim, PodSpec, ResourceClaim, ResourceRequirements,
            ServiceAccount,
        },
        resource::v1::{
            DeviceClaim, DeviceRequest, ExactDeviceRequest, ResourceClaimSpec,
            ResourceClaimTemplate, ResourceClaimTemplateSpec,
        },
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};

use crate::{DraValidator, ValidatorInput};

/// Name of the DaemonSet, its ServiceAccount and `app` label.
pub const NAME: &str = "nvidia-dra-validator";
/// Name of the ResourceClaimTemplate.
pub const CLAIM_TEMPLATE: &str = "nvidia-dra-validator-gpu";
/// Operand of the `nvidia.com/gpu.deploy.<operand>` gate.
pub const DEPLOY_LABEL: &str = "dra-validator";
/// The pod's claim and the template's request.
const CLAIM: &str = "validation-gpu";
/// The DeviceClass of whole GPUs.
const GPU_CLASS: &str = "gpu.nvidia.com";
/// The main container's idle loop once the GPU computed.
const IDLE_SCRIPT: &str =
    "echo the DRA driver handed over a GPU that computes; while true; do sleep 86400; done";

fn metadata(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        labels: Some(meta::labels(name, DraValidator::NAME)),
        ..ObjectMeta::default()
    }
}

/// ServiceAccount `nvidia-dra-validator`.
pub fn service_account() -> ServiceAccount {
    ServiceAccount {
        metadata: metadata(NAME),
        ..ServiceAccount::default()
    }
}

/// ResourceClaimTemplate `nvidia-dra-validator-gpu`.
pub fn claim_template() -> ResourceClaimTemplate {
    ResourceClaimTemplate {
        metadata: metadata(CLAIM_TEMPLATE),
        spec: ResourceClaimTemplateSpec {
            metadata: None,
            spec: ResourceClaimSpec {
                devices: Some(DeviceClaim {
                    requests: Some(vec![DeviceRequest {
                        name: CLAIM.to_owned(),
                        exactly: Some(ExactDeviceRequest {
                            admin_access: Some(true),
                            allocation_mode: Some("ExactCount".to_owned()),
                            count: Some(1),
                            device_class_name: GPU_CLASS.to_owned(),
                            ..ExactDeviceRequest::default()
                        }),
                        ..DeviceRequest::default()
                    }]),
                    ..DeviceClaim::default()
                }),
            },
        },
    }
}

/// DaemonSet `nvidia-dra-validator`.
pub fn daemonset(input: &ValidatorInput) -> DaemonSet {
    let gpu_validation = Container {
        name: "gpu-validation".to_owned(),
        image: Some(input.image.clone()),
        command: Some(vec!["vectorAdd".to_owned()]),
        resources: Some(ResourceRequirements {
            claims: Some(vec![ResourceClaim {
                name: CLAIM.to_owned(),
                request: None,
            }]),
            ..ResourceRequirements::default()
        }),
        ..Container::default()
    };
    let main = Container {
        name: NAME.to_owned(),
        image: Some(input.image.clone()),
        command: Some(["sh", "-c", IDLE_SCRIPT].map(str::to_owned).to_vec()),
        ..Container::default()
    };
    let pod = PodSpec {
        service_account_name: Some(NAME.to_owned()),
        affinity: Some(gpu_present()),
        resource_claims: Some(vec![PodResourceClaim {
            name: CLAIM.to_owned(),
            resource_claim_template_name: Some(CLAIM_TEMPLATE.to_owned()),
            ..PodResourceClaim::default()
        }]),
        init_containers: Some(vec![gpu_validation]),
        containers: vec![main],
        ..PodSpec::default()
    };
    let steps = Finish {
        component: &input.component,
        barrier: Barrier::None,
        host_paths: HostPaths::ResolvedByOperand,
        args: None,
    };
    pod::finish(pod, steps).into_daemonset(Wrap {
        identity: Identity {
            name: NAME,
            component: DraValidator::NAME,
            deploy_label: DEPLOY_LABEL,
            always_on_delete: false,
        },
        daemonsets: &input.shared.daemonsets,
        gpus: None,
    })
}

fn gpu_present() -> Affinity {
    Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: Some(vec![NodeSelectorRequirement {
                        key: gpu_operator_api::labels::GPU_PRESENT.to_owned(),
                        operator: "In".to_owned(),
                        values: Some(vec!["true".to_owned()]),
                    }]),
                    ..NodeSelectorTerm::default()
                }],
            }),
            ..NodeAffinity::default()
        }),
        ..Affinity::default()
    }
}
