//! NVIDIADriver as an [`Owner`]: not a singleton (each one serves the GPU nodes it selects), with
//! NVIDIA's overall `Ready` and `Error` conditions. Its operands validate the whole object, not
//! only its spec: NVIDIA names a CR's driver DaemonSets after the CR
//! (`nvidia-gpu-driver-<name>-<os>`) and hashes its uid into their `app` label, so the name and
//! uid are part of what they render from.

use std::sync::Arc;

use gpu_operator_api::{NvidiaDriver, nvidia_driver::NvidiaDriverState};
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

impl Owner for NvidiaDriver {
    /// The whole object: the name and uid name its DaemonSets (see the module header).
    type Spec = NvidiaDriver;
    const SINGLETON: bool = false;
    const STATUS_FIELDS: &'static [&'static str] = &["state", "namespace", "observedGeneration"];

    fn spec(&self) -> &NvidiaDriver {
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
    /// schema requires `state`). Its overall status (`state`, `Ready`, `Error`) is then kept by
    /// `gpu_operator_status::nvidia_driver_status`.
    fn seed_status(&self) -> Option<serde_json::Value> {
        self.status
            .is_none()
            .then(|| serde_json::json!({ "state": NvidiaDriverState::NotReady.as_str() }))
    }

    fn cache(stores: &Stores) -> &Store<Self> {
        &stores.nvidia_drivers
    }

    fn events(stores: &Stores) -> &Arc<Notify> {
        &stores.nvidia_driver_events
    }

    fn changes(subscriptions: &Subscriptions) -> Changes<Self> {
        subscriptions.nvidia_drivers.clone()
    }
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::{NvidiaDriverSpec, NvidiaDriverStatus};

    use super::*;
    use crate::pipeline::active;

    #[test]
    fn every_nvidia_driver_not_being_deleted_is_served_and_its_status_reads_as_nvidias() {
        let mut a = NvidiaDriver::new("a", NvidiaDriverSpec::default());
        assert!(a.conditions().is_none() && a.state().is_none());
        assert_eq!(
            a.seed_status(),
            Some(serde_json::json!({"state": "notReady"}))
        );
        a.status = Some(NvidiaDriverStatus {
            state: NvidiaDriverState::NotReady,
            ..NvidiaDriverStatus::default()
        });
        assert_eq!(a.conditions(), Some(&[][..]));
        assert_eq!(a.state(), Some("notReady"));
        assert_eq!(a.seed_status(), None, "seeded once");
        assert_eq!(a.spec().metadata.name.as_deref(), Some("a"));
        let b = Arc::new(NvidiaDriver::new("b", NvidiaDriverSpec::default()));
        let owners = vec![Arc::new(a.clone()), b.clone()];
        assert!(active::is_active(&a, &owners) && active::is_active(b.as_ref(), &owners));
    }
}
