//! The DRA driver's own CRDs (`resource.nvidia.com/v1beta1`, namespaced), which NVIDIA's chart
//! installs beside its operator's: `ComputeDomain` (a Multi-Node NVLink domain that workloads
//! join through a ResourceClaimTemplate it generates) and `ComputeDomainClique` (the IMEX daemons
//! of one NVLink clique, written by the DRA driver). The operator never reads or writes them; the
//! DRA driver's ComputeDomain controller and kubelet plugin do. Their schemas keep the DRA
//! driver's v0.5 fields, defaults, enums and rules, so ComputeDomains written for it apply
//! unchanged; the descriptions are ours.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};

/// The API group of the DRA driver's CRDs.
pub const GROUP: &str = "resource.nvidia.com";

/// `Ready` or `NotReady`, `NotReady` when unset.
fn readiness(description: &str) -> Value {
    json!({
        "description": description,
        "type": "string",
        "enum": ["Ready", "NotReady"],
        "default": "NotReady",
    })
}

/// One IMEX daemon of a clique, keyed by `key` (`name` in a ComputeDomain's status, `nodeName`
/// in a clique).
fn daemon(key: &str) -> Value {
    json!({
        "description": "One node's IMEX daemon: where it runs and whether it is ready.",
        "type": "object",
        "required": ["cliqueID", "ipAddress", key],
        "properties": {
            key: {"description": "The node's name.", "type": "string"},
            "ipAddress": {"description": "The IP address the IMEX daemon listens on.", "type": "string"},
            "cliqueID": {"description": "The NVLink clique the node belongs to.", "type": "string"},
            "index": {
                "description": "The node's index within its clique, which gives it a stable DNS name there.",
                "type": "integer",
            },
            "status": readiness("Whether the node's IMEX daemon is ready to broker GPU memory exchanges."),
        },
    })
}

/// The CRD of kind `kind` (`plural`), served and stored as `v1beta1`, with `schema` and, when
/// `status` holds, a status subresource.
fn crd(
    kind: &str,
    plural: &str,
    schema: &Value,
    status: bool,
) -> Result<CustomResourceDefinition, serde_json::Error> {
    let mut version = json!({
        "name": "v1beta1",
        "served": true,
        "storage": true,
        "schema": {"openAPIV3Schema": schema},
    });
    if status {
        version["subresources"] = json!({"status": {}});
    }
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{GROUP}")},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind,
                "listKind": format!("{kind}List"),
                "plural": plural,
                "singular": kind.to_lowercase(),
            },
            "scope": "Namespaced",
            "versions": [version],
        },
    }))
}

/// The `ComputeDomain` CRD.
pub fn compute_domain_crd() -> Result<CustomResourceDefinition, serde_json::Error> {
    let schema = json!({
        "description": "A Multi-Node NVLink domain: the IMEX daemons of the nodes its workloads run on, joined through the ResourceClaimTemplate it generates.",
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {
                "description": "What the domain is; immutable once created.",
                "type": "object",
                "required": ["channel", "numNodes"],
                "x-kubernetes-validations": [{
                    "rule": "self == oldSelf",
                    "message": "a ComputeDomain's spec cannot change: create a new ComputeDomain",
                }],
                "properties": {
                    "numNodes": {
                        "description": "How many nodes are expected to join (deprecated). With the IMEXDaemonsWithDNSNames feature gate (the default) it only decides when the status says Ready, and 0 is recommended; without it, workload pods wait until this many IMEX daemons have joined.",
                        "type": "integer",
                    },
                    "channel": {
                        "description": "The IMEX channel workloads use to join the domain.",
                        "type": "object",
                        "required": ["resourceClaimTemplate"],
                        "properties": {
                            "resourceClaimTemplate": {
                                "description": "The ResourceClaimTemplate the driver generates for workloads to claim the channel.",
                                "type": "object",
                                "required": ["name"],
                                "properties": {"name": {"description": "Its name.", "type": "string"}},
                            },
                            "allocationMode": {
                                "description": "Claim one IMEX channel (Single, the default) or every channel of the IMEX domain (All).",
                                "type": "string",
                                "enum": ["All", "Single"],
                                "default": "Single",
                            },
                        },
                    },
                },
            },
            "status": {
                "description": "What the DRA driver observed: for debugging, not for workloads to wait on.",
                "type": "object",
                "required": ["status"],
                "properties": {
                    "status": readiness("Whether the domain is ready."),
                    "nodes": {
                        "description": "The IMEX daemons of the domain, one per node.",
                        "type": "array",
                        "items": daemon("name"),
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                    },
                },
            },
        },
    });
    crd("ComputeDomain", "computedomains", &schema, true)
}

/// The `ComputeDomainClique` CRD.
pub fn compute_domain_clique_crd() -> Result<CustomResourceDefinition, serde_json::Error> {
    let schema = json!({
        "description": "The IMEX daemons of one NVLink clique of a ComputeDomain, written by the DRA driver in its namespace (named <ComputeDomain uid>.<clique id>).",
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "daemons": {
                "description": "The clique's IMEX daemons, one per node.",
                "type": "array",
                "items": daemon("nodeName"),
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["nodeName"],
            },
        },
    });
    crd(
        "ComputeDomainClique",
        "computedomaincliques",
        &schema,
        false,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crds_are_namespaced_v1beta1_with_the_drivers_names() {
        let domain = serde_json::to_value(compute_domain_crd().unwrap()).unwrap();
        assert_eq!(
            domain["metadata"]["name"],
            "computedomains.resource.nvidia.com"
        );
        assert_eq!(domain["spec"]["scope"], "Namespaced");
        let version = &domain["spec"]["versions"][0];
        assert_eq!(version["name"], "v1beta1");
        let spec = &version["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(
            spec["properties"]["channel"]["properties"]["allocationMode"]["default"],
            "Single"
        );
        let clique = serde_json::to_value(compute_domain_clique_crd().unwrap()).unwrap();
        assert_eq!(clique["spec"]["names"]["kind"], "ComputeDomainClique");
        assert!(clique["spec"]["versions"][0].get("subresources").is_none());
    }
}
