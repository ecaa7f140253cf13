//! GPU users by DRA claim: a pod whose ResourceClaim (`resource.k8s.io`, at the served version:
//! `v1` and `v1beta2` read alike) is allocated devices
//! of NVIDIA's DRA driver holds the GPUs without requesting `nvidia.com/gpu`, and keeps the driver
//! in use like any GPU pod. Claims are read one by one, only for the pods of a node whose upgrade
//! evicts or waits on them, so no cache of every claim in the cluster is kept.

use gpu_operator_api::gpu_cluster::claims::OUR_DRIVERS;
use gpu_operator_core::{Context, Error};
use kube::{
    Api,
    api::{ApiResource, DynamicObject, GroupVersionKind},
};
use serde_json::Value;

use crate::facts::Workload;

/// Whether a ResourceClaim's JSON has devices of one of [`OUR_DRIVERS`] allocated: they hold
/// NVIDIA's kernel modules (GPUs and MIG devices, and the IMEX channels of compute domains).
fn allocated_by_nvidia(claim: &Value) -> bool {
    claim
        .pointer("/status/allocation/devices/results")
        .and_then(Value::as_array)
        .is_some_and(|results| {
            results.iter().any(|r| {
                r.get("driver")
                    .and_then(Value::as_str)
                    .is_some_and(|d| OUR_DRIVERS.contains(&d))
            })
        })
}

/// Sets [`Workload::dra_claim`] on each running pod of `workloads` with a claim NVIDIA's DRA
/// driver allocated. A claim already gone holds nothing.
pub async fn mark(ctx: &Context, workloads: &mut [Workload]) -> Result<(), Error> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(
            "resource.k8s.io",
            ctx.server.dra_api_in_use().version(),
            "ResourceClaim",
        ),
        "resourceclaims",
    );
    for workload in workloads.iter_mut().filter(|w| !w.finished) {
        let claims: Api<DynamicObject> =
            Api::namespaced_with(ctx.client.clone(), &workload.namespace, &resource);
        for name in &workload.claims {
            let claim = claims.get_opt(name).await.map_err(Error::kube(format!(
                "reading ResourceClaim {}/{name} of pod {}",
                workload.namespace, workload.name
            )))?;
            if claim.is_some_and(|c| allocated_by_nvidia(&c.data)) {
                workload.dra_claim = Some(name.clone());
                break;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_claim_counts_when_nvidias_driver_allocated_it() {
        let claim = |driver: &str| {
            json!({"status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": driver, "pool": "node-1", "device": "gpu-0"}]}}}})
        };
        assert!(allocated_by_nvidia(&claim("gpu.nvidia.com")));
        assert!(allocated_by_nvidia(&claim("compute-domain.nvidia.com")));
        assert!(!allocated_by_nvidia(&claim("dra.net")));
        assert!(
            !allocated_by_nvidia(&json!({"spec": {"devices": {"requests": []}}})),
            "a claim not allocated yet holds nothing"
        );
    }
}
