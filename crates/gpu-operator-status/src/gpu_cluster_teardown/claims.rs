//! Which DRA ResourceClaims still hold devices of the NVIDIA DRA driver, and what the GPUCluster
//! says while they do. Pure: the claims come listed by [`super::reconcile`].

use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::ResourceExt as _;

/// The DRA drivers whose devices the GPUCluster's kubelet plugin publishes: GPUs (and their MIG
/// and VFIO devices) and ComputeDomain channels and daemons.
pub const OUR_DRIVERS: [&str; 2] = ["gpu.nvidia.com", "compute-domain.nvidia.com"];

/// The GPUCluster's own DaemonSets whose pods hold admin-access claims of our devices (made from
/// their ResourceClaimTemplates, named after the pods): the DRA validator, the DCGM exporter and
/// DCGM. The teardown removes them first; their claims are never waited for.
pub const CLAIMING_DAEMONSETS: [&str; 3] = [
    "nvidia-dra-validator",
    "nvidia-dcgm-exporter-dra",
    "nvidia-dcgm-dra",
];

/// How many claims the message names; the rest are counted.
pub const NAMED_CLAIMS: usize = 5;

/// A claim holding devices of [`OUR_DRIVERS`], and the pods it is reserved for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldClaim {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The pods it is reserved for (`status.reservedFor`), by name.
    pub pods: Vec<String>,
}

/// The claims of `claims` that hold devices of [`OUR_DRIVERS`], except those of
/// [`CLAIMING_DAEMONSETS`] in `operator_namespace` (removed first, which releases them), sorted
/// by namespace and name.
pub fn held(claims: &[ResourceClaim], operator_namespace: &str) -> Vec<HeldClaim> {
    let mut held: Vec<HeldClaim> = claims
        .iter()
        .filter(|claim| holds_our_devices(claim) && !is_ours(claim, operator_namespace))
        .map(|claim| HeldClaim {
            namespace: claim.namespace().unwrap_or_default(),
            name: claim.name_any(),
            pods: reserved_pods(claim),
        })
        .collect();
    held.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    held
}

/// Whether `claim` is allocated devices of one of [`OUR_DRIVERS`].
fn holds_our_devices(claim: &ResourceClaim) -> bool {
    claim
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_deref())
        .unwrap_or_default()
        .iter()
        .any(|result| OUR_DRIVERS.contains(&result.driver.as_str()))
}

/// Whether `claim` is one of [`CLAIMING_DAEMONSETS`]': in the operator namespace, made for one of
/// their pods (the claim's name and its owner pod's start with the DaemonSet's).
fn is_ours(claim: &ResourceClaim, operator_namespace: &str) -> bool {
    claim.namespace().as_deref() == Some(operator_namespace)
        && CLAIMING_DAEMONSETS.iter().any(|daemonset| {
            let prefix = format!("{daemonset}-");
            claim.name_any().starts_with(&prefix)
                || claim
                    .owner_references()
                    .iter()
                    .any(|owner| owner.kind == "Pod" && owner.name.starts_with(&prefix))
        })
}

/// The pods `claim` is reserved for.
fn reserved_pods(claim: &ResourceClaim) -> Vec<String> {
    claim
        .status
        .as_ref()
        .and_then(|s| s.reserved_for.as_deref())
        .unwrap_or_default()
        .iter()
        .filter(|consumer| consumer.resource == "pods" && consumer.api_group.is_none())
        .map(|consumer| consumer.name.clone())
        .collect()
}

/// The message of the GPUCluster's `Ready` while `held` claims remain: up to [`NAMED_CLAIMS`]
/// of them as `namespace/name` with their pods, the count of the rest, and the fix.
pub fn waiting_message(held: &[HeldClaim]) -> String {
    let named: Vec<String> = held
        .iter()
        .take(NAMED_CLAIMS)
        .map(|claim| {
            let pods = if claim.pods.is_empty() {
                "reserved for no pod".to_owned()
            } else {
                format!("reserved for pod(s) {}", claim.pods.join(", "))
            };
            format!("{}/{} ({pods})", claim.namespace, claim.name)
        })
        .collect();
    let more = held.len().saturating_sub(NAMED_CLAIMS);
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    format!(
        "GPUCluster is being deleted: waiting for {} ResourceClaim(s) holding NVIDIA DRA devices \
         to be released before removing the DRA kubelet plugin: {}{more}; delete the workloads \
         (pods, Jobs, Deployments) that use them, or their ResourceClaims",
        held.len(),
        named.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use k8s_openapi::{
        api::resource::v1::{
            AllocationResult, DeviceAllocationResult, DeviceRequestAllocationResult,
            ResourceClaimConsumerReference, ResourceClaimSpec, ResourceClaimStatus,
        },
        apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference},
    };

    use super::*;

    const NS: &str = "gpu-operator";

    fn claim(namespace: &str, name: &str, drivers: &[&str], pods: &[&str]) -> ResourceClaim {
        let results = drivers
            .iter()
            .map(|driver| DeviceRequestAllocationResult {
                driver: (*driver).to_owned(),
                device: "gpu-0".to_owned(),
                pool: "node-a".to_owned(),
                request: "gpu".to_owned(),
                ..DeviceRequestAllocationResult::default()
            })
            .collect();
        ResourceClaim {
            metadata: ObjectMeta {
                namespace: Some(namespace.to_owned()),
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            spec: ResourceClaimSpec::default(),
            status: Some(ResourceClaimStatus {
                allocation: (!drivers.is_empty()).then(|| AllocationResult {
                    devices: Some(DeviceAllocationResult {
                        results: Some(results),
                        ..DeviceAllocationResult::default()
                    }),
                    ..AllocationResult::default()
                }),
                reserved_for: Some(
                    pods.iter()
                        .map(|pod| ResourceClaimConsumerReference {
                            resource: "pods".to_owned(),
                            name: (*pod).to_owned(),
                            uid: "uid".to_owned(),
                            api_group: None,
                        })
                        .collect(),
                ),
                ..ResourceClaimStatus::default()
            }),
        }
    }

    #[test]
    fn only_claims_allocated_our_devices_are_held_sorted() {
        let claims = [
            claim("ml", "train-gpu", &["gpu.nvidia.com"], &["train-0"]),
            claim("imex", "domain", &["compute-domain.nvidia.com"], &[]),
            claim("other", "nic", &["sriov.example.com"], &["net-0"]),
            claim("ml", "pending", &[], &[]),
            claim("ab", "mixed", &["sriov.example.com", "gpu.nvidia.com"], &[]),
        ];
        let names: Vec<_> = held(&claims, NS)
            .into_iter()
            .map(|c| format!("{}/{}", c.namespace, c.name))
            .collect();
        assert_eq!(names, ["ab/mixed", "imex/domain", "ml/train-gpu"]);
    }

    #[test]
    fn the_validators_claims_are_not_waited_for_but_a_users_in_our_namespace_is() {
        let mut by_owner = claim(NS, "gpu-claim-x7k2p", &["gpu.nvidia.com"], &[]);
        by_owner.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "v1".to_owned(),
            kind: "Pod".to_owned(),
            name: "nvidia-dra-validator-4hx9z".to_owned(),
            uid: "uid".to_owned(),
            ..OwnerReference::default()
        }]);
        let claims = [
            claim(
                NS,
                "nvidia-dra-validator-4hx9z-gpu-abcde",
                &["gpu.nvidia.com"],
                &[],
            ),
            by_owner,
            claim(NS, "mine", &["gpu.nvidia.com"], &["debug"]),
            claim(
                "elsewhere",
                "nvidia-dra-validator-x-gpu",
                &["gpu.nvidia.com"],
                &[],
            ),
        ];
        let names: Vec<_> = held(&claims, NS).into_iter().map(|c| c.name).collect();
        assert_eq!(names, ["nvidia-dra-validator-x-gpu", "mine"]);
    }

    #[test]
    fn the_message_names_the_claims_their_pods_and_the_fix_and_counts_the_rest() {
        let claims: Vec<_> = (0..7)
            .map(|i| claim("ml", &format!("c{i}"), &["gpu.nvidia.com"], &["p"]))
            .collect();
        let message = waiting_message(&held(&claims, NS));
        assert!(
            message.contains("waiting for 7 ResourceClaim(s)"),
            "{message}"
        );
        assert!(
            message.contains("ml/c0 (reserved for pod(s) p)"),
            "{message}"
        );
        assert!(
            message.contains("ml/c4") && !message.contains("ml/c5"),
            "{message}"
        );
        assert!(message.contains("and 2 more"), "{message}");
        assert!(message.contains("delete the workloads"), "{message}");
        let one = waiting_message(&held(&claims[..1], NS));
        assert!(!one.contains("more"), "{one}");
        let unreserved = waiting_message(&held(&[claim("a", "b", &["gpu.nvidia.com"], &[])], NS));
        assert!(
            unreserved.contains("a/b (reserved for no pod)"),
            "{unreserved}"
        );
    }
}
