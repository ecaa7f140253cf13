//! The device plugin check: the node must advertise GPU capacity under the names its MIG strategy
//! gives (`nvidia.com/gpu` for none/single, `nvidia.com/mig-*` for MIG GPUs under mixed), waiting
//! up to `GPU_RESOURCE_WAIT_SECONDS`; then, with `WITH_WORKLOAD`, a pod requesting one runs.
//! On a node whose GPUs the GPUCluster's DRA driver offers (`nvidia.com/gpu.deploy.dra-driver`
//! is `true`: the node labeller took the device plugin off it) the check passes as `NotRequired`:
//! no device plugin runs there, and the GPUCluster's `DRAResourcesPublished` reports its GPUs.

use std::{collections::BTreeMap, time::Duration};

use gpu_operator_api::{labels, spec::MigPartedConfigSpec, validator::reason};
use k8s_openapi::{
    api::core::v1::{Node, Pod},
    apimachinery::pkg::{api::resource::Quantity, apis::meta::v1::OwnerReference},
};
use kube::{Api, ResourceExt as _};
use tracing::info;

use super::{Failed, Outcome, passed};
use crate::{
    config::{Config, MigStrategy},
    workload_pod::{self, Workload},
};

/// GFD's label with the MIG strategy the device plugin runs with.
pub const GFD_MIG_STRATEGY: &str = "nvidia.com/mig.strategy";
/// Prefix of whole-GPU resources (`nvidia.com/gpu`, `nvidia.com/gpu.shared`).
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";
/// Prefix of MIG resources under the mixed strategy.
pub const MIG_RESOURCE_PREFIX: &str = "nvidia.com/mig-";

fn count(q: &Quantity) -> i64 {
    q.0.trim().parse().unwrap_or(0)
}

/// The resources named `prefix*` with a positive quantity, and their counts.
pub(crate) fn advertised(
    resources: &BTreeMap<String, Quantity>,
    prefix: &str,
) -> Vec<(String, i64)> {
    resources
        .iter()
        .filter(|(name, q)| name.starts_with(prefix) && count(q) > 0)
        .map(|(name, q)| (name.clone(), count(q)))
        .collect()
}

fn list(resources: &[(String, i64)]) -> String {
    resources
        .iter()
        .map(|(n, c)| format!("{n}={c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The resource the node advertises for `strategy`, and how many; or why none fits.
pub fn choose_resource(node: &Node, strategy: MigStrategy) -> Result<(String, i64), Failed> {
    let name = node.name_any();
    let node_labels = node.labels();
    if let Some(gfd) = node_labels.get(GFD_MIG_STRATEGY)
        && strategy != MigStrategy::None
        && gfd != strategy.as_str()
    {
        return Err(Failed::new(
            reason::MIG_STRATEGY_MISMATCH,
            format!(
                "MIG_STRATEGY is {} but GPU Feature Discovery labels node {name} {GFD_MIG_STRATEGY}={gfd}",
                strategy.as_str()
            ),
        ));
    }
    let empty = BTreeMap::new();
    let capacity = node
        .status
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .unwrap_or(&empty);
    let gpus = advertised(capacity, GPU_RESOURCE);
    let migs = advertised(capacity, MIG_RESOURCE_PREFIX);
    let pick = |found: &[(String, i64)]| found.iter().max_by_key(|(_, c)| *c).cloned();
    match strategy {
        MigStrategy::None | MigStrategy::Single => {
            if let Some(found) = pick(&gpus) {
                return Ok(found);
            }
            if !migs.is_empty() {
                return Err(Failed::new(
                    reason::MIG_STRATEGY_MISMATCH,
                    format!(
                        "MIG_STRATEGY is {} (expects {GPU_RESOURCE}) but node {name} advertises only {}: the device plugin runs with strategy mixed",
                        strategy.as_str(),
                        list(&migs)
                    ),
                ));
            }
        }
        MigStrategy::Mixed => {
            if let Some(found) = pick(&migs) {
                return Ok(found);
            }
            let mig_config = node_labels
                .get(labels::MIG_CONFIG)
                .filter(|c| c.as_str() != MigPartedConfigSpec::DEFAULT_LAYOUT);
            if let (Some(found), None) = (pick(&gpus), mig_config) {
                // Under mixed, GPUs without MIG are still advertised as nvidia.com/gpu.
                return Ok(found);
            }
            if let Some(config) = mig_config
                && !gpus.is_empty()
            {
                return Err(Failed::new(
                    reason::MIG_STRATEGY_MISMATCH,
                    format!(
                        "MIG_STRATEGY is mixed and node {name} has MIG layout {}={config}, but it advertises no {MIG_RESOURCE_PREFIX}* resource, only {}",
                        labels::MIG_CONFIG,
                        list(&gpus)
                    ),
                ));
            }
        }
    }
    Err(Failed::new(
        reason::NO_GPU_RESOURCES,
        format!(
            "node {name} advertises no {GPU_RESOURCE}* or {MIG_RESOURCE_PREFIX}* capacity: the device plugin has not registered the GPUs"
        ),
    ))
}

/// Why the check is not required on `node`, when the DRA driver offers its GPUs. Pure.
pub fn not_required(node: &Node) -> Option<String> {
    (node
        .labels()
        .get(labels::DEPLOY_DRA_DRIVER)
        .map(String::as_str)
        == Some("true"))
    .then(|| {
        format!(
            "node {} is served by the DRA driver ({}=true): no device plugin runs there",
            node.name_any(),
            labels::DEPLOY_DRA_DRIVER
        )
    })
}

/// The device plugin workload pod this check creates on its node, requesting one `resource`.
/// Pure.
pub fn pod(cfg: &Config, resource: String, owner: Option<OwnerReference>) -> Result<Pod, Failed> {
    let Some(image) = cfg.workload.plugin_image.clone() else {
        return Err(Failed::permanent(
            reason::WORKLOAD_IMAGE_NOT_CONFIGURED,
            "WITH_WORKLOAD is true but VALIDATOR_IMAGE is not set: no image for the device plugin workload pod",
        ));
    };
    let workload = Workload {
        app: gpu_operator_api::validator::PLUGIN_WORKLOAD_APP,
        container: "plugin-validation",
        image,
        resource: Some(resource),
    };
    Ok(workload_pod::build_for(&workload, cfg, owner))
}

/// Runs the plugin check.
pub async fn check(cfg: &Config, client: &kube::Client) -> Outcome {
    let node_name = cfg.node_name.as_deref().unwrap_or_default();
    let nodes: Api<Node> = Api::all(client.clone());
    let deadline = tokio::time::Instant::now() + cfg.resource_wait;
    let (resource, count) = loop {
        let node = nodes.get(node_name).await.map_err(|e| {
            Failed::new(
                reason::API_ERROR,
                format!("getting node {node_name}: {}", super::api_error(&e)),
            )
        })?;
        if let Some(why) = not_required(&node) {
            return passed(reason::NOT_REQUIRED, why);
        }
        match choose_resource(&node, cfg.mig_strategy) {
            Ok(found) => break found,
            Err(failed) if tokio::time::Instant::now() >= deadline => return Err(failed),
            Err(failed) => {
                info!(reason = failed.reason, "{}; checking again", failed.message);
                tokio::time::sleep(cfg.sleep_interval.max(Duration::from_secs(1))).await;
            }
        }
    };
    let found = format!(
        "node advertises {resource}={count} (MIG strategy {})",
        cfg.mig_strategy.as_str()
    );
    if !cfg.with_workload {
        return passed(reason::DEVICE_PLUGIN_VALIDATED, found);
    }
    let namespace = cfg.namespace.as_deref().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let owner = super::cuda::validator_pod_owner(cfg, &pods).await?;
    let pod = pod(cfg, resource, owner)?;
    let name = workload_pod::run(
        &pods,
        &pod,
        node_name,
        cfg.workload.timeout,
        cfg.sleep_interval,
    )
    .await?;
    passed(
        reason::DEVICE_PLUGIN_VALIDATED,
        format!("{found}; workload pod {name} succeeded"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(capacity: &[(&str, &str)], node_labels: &[(&str, &str)]) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "gpu-1", "labels": node_labels.iter().copied().collect::<BTreeMap<_, _>>()},
            "status": {"capacity": capacity.iter().copied().collect::<BTreeMap<_, _>>()}
        }))
        .unwrap()
    }

    #[test]
    fn a_dra_node_needs_no_device_plugin() {
        let dra = node(&[], &[("nvidia.com/gpu.deploy.dra-driver", "true")]);
        assert_eq!(
            not_required(&dra).as_deref(),
            Some(
                "node gpu-1 is served by the DRA driver (nvidia.com/gpu.deploy.dra-driver=true): \
                 no device plugin runs there"
            )
        );
        assert!(not_required(&node(&[("nvidia.com/gpu", "8")], &[])).is_none());
        let paused = node(&[], &[("nvidia.com/gpu.deploy.dra-driver", "false")]);
        assert!(not_required(&paused).is_none());
    }

    #[test]
    fn single_and_none_want_whole_gpus() {
        let n = node(&[("cpu", "8"), ("nvidia.com/gpu", "8")], &[]);
        assert_eq!(
            choose_resource(&n, MigStrategy::Single).unwrap(),
            ("nvidia.com/gpu".into(), 8)
        );
        assert_eq!(choose_resource(&n, MigStrategy::None).unwrap().1, 8);
        let shared = node(
            &[("nvidia.com/gpu", "0"), ("nvidia.com/gpu.shared", "4")],
            &[],
        );
        assert_eq!(
            choose_resource(&shared, MigStrategy::Single).unwrap(),
            ("nvidia.com/gpu.shared".into(), 4)
        );
    }

    #[test]
    fn mig_resources_under_single_are_a_mismatch() {
        let n = node(&[("nvidia.com/mig-1g.10gb", "7")], &[]);
        let failed = choose_resource(&n, MigStrategy::Single).unwrap_err();
        assert_eq!(failed.reason, reason::MIG_STRATEGY_MISMATCH);
        assert!(
            failed.message.contains("nvidia.com/mig-1g.10gb=7"),
            "{}",
            failed.message
        );
        assert_eq!(
            choose_resource(&n, MigStrategy::Mixed).unwrap(),
            ("nvidia.com/mig-1g.10gb".into(), 7)
        );
    }

    #[test]
    fn mixed_accepts_whole_gpus_only_without_a_mig_layout() {
        let t4 = node(&[("nvidia.com/gpu", "1")], &[]);
        assert!(choose_resource(&t4, MigStrategy::Mixed).is_ok());
        let disabled = node(
            &[("nvidia.com/gpu", "8")],
            &[("nvidia.com/mig.config", "all-disabled")],
        );
        assert!(choose_resource(&disabled, MigStrategy::Mixed).is_ok());
        let balanced = node(
            &[("nvidia.com/gpu", "4")],
            &[("nvidia.com/mig.config", "all-balanced")],
        );
        let failed = choose_resource(&balanced, MigStrategy::Mixed).unwrap_err();
        assert_eq!(failed.reason, reason::MIG_STRATEGY_MISMATCH);
        assert!(failed.message.contains("all-balanced"));
        let a100_mixed = node(
            &[
                ("nvidia.com/gpu", "0"),
                ("nvidia.com/mig-1g.10gb", "8"),
                ("nvidia.com/mig-3g.40gb", "4"),
            ],
            &[("nvidia.com/mig.config", "all-balanced")],
        );
        assert_eq!(
            choose_resource(&a100_mixed, MigStrategy::Mixed).unwrap(),
            ("nvidia.com/mig-1g.10gb".into(), 8)
        );
    }

    #[test]
    fn gfd_strategy_label_must_agree() {
        let n = node(
            &[("nvidia.com/gpu", "8")],
            &[("nvidia.com/mig.strategy", "single")],
        );
        let failed = choose_resource(&n, MigStrategy::Mixed).unwrap_err();
        assert_eq!(failed.reason, reason::MIG_STRATEGY_MISMATCH);
        assert!(failed.message.contains("nvidia.com/mig.strategy=single"));
        assert!(choose_resource(&n, MigStrategy::Single).is_ok());
        assert!(choose_resource(&n, MigStrategy::None).is_ok());
    }

    #[test]
    fn no_capacity_is_no_gpu_resources() {
        for n in [
            node(&[("cpu", "8")], &[]),
            node(&[("nvidia.com/gpu", "0")], &[]),
        ] {
            let failed = choose_resource(&n, MigStrategy::Single).unwrap_err();
            assert_eq!(failed.reason, reason::NO_GPU_RESOURCES);
            assert!(failed.message.contains("gpu-1"));
        }
        let mut bare = Node::default();
        bare.metadata.name = Some("x".into());
        assert_eq!(
            choose_resource(&bare, MigStrategy::Mixed)
                .unwrap_err()
                .reason,
            reason::NO_GPU_RESOURCES
        );
    }
}
