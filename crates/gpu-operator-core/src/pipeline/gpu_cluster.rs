//! GPUCluster as an [`Owner`]: a singleton (NVIDIA's name rule allows only `gpu-cluster`), with
//! NVIDIA's overall `Ready` and `Error` conditions and `state`. Its operands validate the whole
//! object: the DRA stack's teardown reads its deletion and finalizer.

use std::sync::Arc;

use gpu_operator_api::{GpuCluster, gpu_cluster::GpuClusterState};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::runtime::reflector::Store;
use tokio::sync::Notify;

use crate::{
    cache::{
        change_stream::Changes,
        stores::{Stores, Subscriptions},
    },
    contract::Owner,
};

impl Owner for GpuCluster {
    /// The whole object (see the module header).
    type Spec = GpuCluster;
    const SINGLETON: bool = true;
    const STATUS_FIELDS: &'static [&'static str] = &["state", "namespace", "observedGeneration"];

    fn spec(&self) -> &GpuCluster {
        self
    }

    fn conditions(&self) -> Option<&[Condition]> {
        self.status
            .as_ref()
            .map(|status| status.conditions.as_deref().unwrap_or_default())
    }

    fn state(&self) -> Option<&str> {
        self.status.as_ref().map(|status| status.state.as_str())
    }

    /// `state: notReady` while it has no status, so its operands' conditions can be written (its
    /// schema requires `state`).
    fn seed_status(&self) -> Option<serde_json::Value> {
        self.status
            .is_none()
            .then(|| serde_json::json!({ "state": GpuClusterState::NotReady.as_str() }))
    }

    fn cache(stores: &Stores) -> &Store<Self> {
        &stores.gpu_clusters
    }

    fn events(stores: &Stores) -> &Arc<Notify> {
        &stores.gpu_cluster_events
    }

    fn changes(subscriptions: &Subscriptions) -> Changes<Self> {
        subscriptions.gpu_clusters.clone()
    }
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::{GpuClusterSpec, GpuClusterStatus};

    use super::*;
    use crate::pipeline::active;

    #[test]
    fn the_gpu_cluster_is_a_singleton_seeded_not_ready() {
        let mut cluster = GpuCluster::new("gpu-cluster", GpuClusterSpec::default());
        assert!(cluster.conditions().is_none() && cluster.state().is_none());
        assert_eq!(
            cluster.seed_status(),
            Some(serde_json::json!({"state": "notReady"}))
        );
        cluster.status = Some(GpuClusterStatus::default());
        assert_eq!(cluster.state(), Some("notReady"));
        assert_eq!(cluster.seed_status(), None, "seeded once");
        let owners = vec![Arc::new(cluster.clone())];
        assert!(active::is_active(&cluster, &owners));
    }
}
