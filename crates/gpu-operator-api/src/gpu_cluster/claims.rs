//! Which DRA ResourceClaims hold devices of the GPUCluster's DRA driver, read from the claims'
//! `status.allocation`: anywhere in the cluster (the GPUCluster's teardown waits for them), or on
//! one node (the node labeller's switch of a node away from DRA waits for them; the DRA driver's
//! pool of a node's devices is the node's name). Pure: the callers list the claims.

use k8s_openapi::api::resource::v1::{DeviceRequestAllocationResult, ResourceClaim};
use kube::ResourceExt as _;

/// The DRA drivers whose devices the GPUCluster's kubelet plugin publishes: GPUs (and their MIG
/// and VFIO devices) and ComputeDomain channels and daemons.
pub const OUR_DRIVERS: [&str; 2] = ["gpu.nvidia.com", "compute-domain.nvidia.com"];

/// The GPUCluster's own DaemonSets whose pods hold admin-access claims of our devices (made from
/// their ResourceClaimTemplates, named after the pods): the DRA validator, the DCGM exporter and
/// DCGM. Whoever removes the DRA stack removes them first; their claims are never waited for.
pub const CLAIMING_DAEMONSETS: [&str; 3] = [
    "nvidia-dra-validator",
    "nvidia-dcgm-exporter-dra",
    "nvidia-dcgm-dra",
];

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
    select(claims, |claim| {
        holds_our_devices(claim, None) && !is_ours(claim, operator_namespace)
    })
}

/// The claims of `claims` that hold devices of [`OUR_DRIVERS`] on `node` (a result in the
/// node's pool), except those of [`CLAIMING_DAEMONSETS`] in `operator_namespace`, sorted.
pub fn held_on_node(
    claims: &[ResourceClaim],
    operator_namespace: &str,
    node: &str,
) -> Vec<HeldClaim> {
    select(claims, |claim| {
        holds_our_devices(claim, Some(node)) && !is_ours(claim, operator_namespace)
    })
}

/// The claims of [`CLAIMING_DAEMONSETS`]' pods in `operator_namespace` that hold devices of
/// [`OUR_DRIVERS`] on `node`, sorted: what the GPUCluster's own pods still hold there.
pub fn ours_on_node(
    claims: &[ResourceClaim],
    operator_namespace: &str,
    node: &str,
) -> Vec<HeldClaim> {
    select(claims, |claim| {
        holds_our_devices(claim, Some(node)) && is_ours(claim, operator_namespace)
    })
}

/// The claims `keep` keeps, as [`HeldClaim`]s sorted by namespace and name.
fn select(claims: &[ResourceClaim], keep: impl Fn(&ResourceClaim) -> bool) -> Vec<HeldClaim> {
    let mut held: Vec<HeldClaim> = claims
        .iter()
        .filter(|claim| keep(claim))
        .map(|claim| HeldClaim {
            namespace: claim.namespace().unwrap_or_default(),
            name: claim.name_any(),
            pods: reserved_pods(claim),
        })
        .collect();
    held.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    held
}

/// Whether `claim` is allocated devices of one of [`OUR_DRIVERS`] (in `node`'s pool, when given).
pub fn holds_our_devices(claim: &ResourceClaim, node: Option<&str>) -> bool {
    let on_node = |result: &DeviceRequestAllocationResult| node.is_none_or(|n| result.pool == n);
    claim
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_deref())
        .unwrap_or_default()
        .iter()
        .any(|result| OUR_DRIVERS.contains(&result.driver.as_str()) && on_node(result))
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

#[cfg(test)]
mod tests {
    use k8s_openapi::{
        api::resource::v1::{
            AllocationResult, DeviceAllocationResult, ResourceClaimConsumerReference,
            ResourceClaimSpec, ResourceClaimStatus,
        },
        apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference},
    };

    use super::*;

    const NS: &str = "gpu-operator";

    /// A claim allocated one device of each of `drivers` in `pool`, reserved for `pods`.
    fn claim_in(
        pool: &str,
        namespace: &str,
        name: &str,
        drivers: &[&str],
        pods: &[&str],
    ) -> ResourceClaim {
        let results = drivers
            .iter()
            .map(|driver| DeviceRequestAllocationResult {
                driver: (*driver).to_owned(),
                device: "gpu-0".to_owned(),
                pool: pool.to_owned(),
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

    fn claim(namespace: &str, name: &str, drivers: &[&str], pods: &[&str]) -> ResourceClaim {
        claim_in("node-a", namespace, name, drivers, pods)
    }

    fn names(held: Vec<HeldClaim>) -> Vec<String> {
        held.into_iter()
            .map(|c| format!("{}/{}", c.namespace, c.name))
            .collect()
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
        assert_eq!(
            names(held(&claims, NS)),
            ["ab/mixed", "imex/domain", "ml/train-gpu"]
        );
        assert_eq!(held(&claims, NS)[2].pods, ["train-0"]);
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
    fn on_a_node_only_results_in_its_pool_count_split_into_users_and_ours() {
        let claims = [
            claim_in("node-a", "ml", "here", &["gpu.nvidia.com"], &["p"]),
            claim_in("node-b", "ml", "there", &["gpu.nvidia.com"], &["q"]),
            claim_in("node-a", "net", "nic", &["sriov.example.com"], &["r"]),
            claim_in(
                "node-a",
                "imex",
                "domain",
                &["compute-domain.nvidia.com"],
                &[],
            ),
            claim_in(
                "node-a",
                NS,
                "nvidia-dcgm-exporter-dra-x1-dcgm",
                &["gpu.nvidia.com"],
                &[],
            ),
        ];
        assert_eq!(
            names(held_on_node(&claims, NS, "node-a")),
            ["imex/domain", "ml/here"]
        );
        assert_eq!(names(held_on_node(&claims, NS, "node-b")), ["ml/there"]);
        assert!(held_on_node(&claims, NS, "node-c").is_empty());
        assert_eq!(
            names(ours_on_node(&claims, NS, "node-a")),
            [format!("{NS}/nvidia-dcgm-exporter-dra-x1-dcgm")]
        );
        assert!(ours_on_node(&claims, NS, "node-b").is_empty());
    }
}
