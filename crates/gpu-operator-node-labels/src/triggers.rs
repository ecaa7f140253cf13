//! Which ClusterPolicy events are worth relabelling every node: they fire on status writes and
//! every spec change too, so only a change of the active policy's identity or of what the label
//! decision reads of its spec passes, or a GPUCluster coming or going (the DRA gates, see
//! `crate::resource_api`; its spec and status writes relabel nothing). (Node events come filtered by the shared cache: only new
//! nodes and label changes, see `Subscriptions::node_labels`.)

use std::collections::BTreeMap;

use gpu_operator_api::{ClusterPolicy, GpuCluster, NvidiaDriver};
use gpu_operator_core::pipeline::active;
use kube::{Resource as _, runtime::reflector::Store};

use crate::desired::{PolicyInputs, policy_inputs};

/// Identity of the active ClusterPolicy and what of its spec the label decision reads, with what
/// the owner label reads of the NVIDIADrivers ([`DriversFingerprint`]).
type PolicyFingerprint = (Option<String>, PolicyInputs, bool, DriversFingerprint);

/// Of each NVIDIADriver by name: `default`, `nodeSelector`, and whether it is being deleted.
type DriversFingerprint = Vec<(String, bool, Option<BTreeMap<String, String>>, bool)>;

/// Passes a ClusterPolicy event on when the active policy changed as the label decision sees it:
/// another one became active, or a spec field it reads moved ([`policy_inputs`]). Status writes,
/// ignored policies and the other spec changes do not pass: at 5,000 nodes each one woke 4,286
/// node reconciles that relabelled nothing, on the same two cores as the operand reconcile the
/// change was for.
pub struct ActivePolicyFilter {
    last: Option<PolicyFingerprint>,
    policies: Store<ClusterPolicy>,
    drivers: Option<Store<NvidiaDriver>>,
    /// Whether a GPUCluster existed at the previous call.
    last_gpu_cluster: bool,
    gpu_clusters: Option<Store<GpuCluster>>,
}

impl ActivePolicyFilter {
    /// A filter reading the active policy from `policies`.
    pub fn new(policies: Store<ClusterPolicy>) -> Self {
        Self {
            last: None,
            policies,
            drivers: None,
            last_gpu_cluster: false,
            gpu_clusters: None,
        }
    }

    /// Also passes a GPUCluster of `gpu_clusters` appearing or going away.
    #[must_use]
    pub fn with_gpu_clusters(mut self, gpu_clusters: Store<GpuCluster>) -> Self {
        self.gpu_clusters = Some(gpu_clusters);
        self
    }

    /// Also passes changes of what the node owner label reads of the NVIDIADrivers in `drivers`
    /// (see `crate::driver_owner`).
    #[must_use]
    pub fn with_drivers(mut self, drivers: Store<NvidiaDriver>) -> Self {
        self.drivers = Some(drivers);
        self
    }

    fn drivers(&self) -> DriversFingerprint {
        let mut all: DriversFingerprint = self
            .drivers
            .iter()
            .flat_map(Store::state)
            .map(|d| {
                (
                    d.metadata.name.clone().unwrap_or_default(),
                    d.spec.default,
                    d.spec.node_selector.clone(),
                    d.metadata.deletion_timestamp.is_some(),
                )
            })
            .collect();
        all.sort();
        all
    }

    /// Whether the active policy, or the presence of a GPUCluster, differs from the previous
    /// call.
    pub fn changed(&mut self) -> bool {
        let gpu_cluster = self
            .gpu_clusters
            .as_ref()
            .is_some_and(|s| !s.state().is_empty());
        let cluster_moved = gpu_cluster != self.last_gpu_cluster;
        self.last_gpu_cluster = gpu_cluster;
        let policy_moved = self.policy_changed();
        cluster_moved || policy_moved
    }

    /// Whether the active policy differs from the one at the previous call.
    fn policy_changed(&mut self) -> bool {
        let drivers = self.drivers();
        let now = active::active(&self.policies.state()).map(|p| {
            let handed_over =
                p.spec.driver_enabled() && p.spec.driver.use_nvidia_driver_crd == Some(true);
            (
                p.meta().uid.clone(),
                policy_inputs(&p.spec),
                handed_over,
                if handed_over { drivers } else { Vec::new() },
            )
        });
        if now == self.last {
            return false;
        }
        self.last = now;
        true
    }
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::{
        ClusterPolicySpec,
        spec::{MigManagerSpec, MigPartedConfigSpec, MigSpec, MigStrategy, SandboxWorkloadsSpec},
    };
    use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
    use kube::runtime::{reflector::store::Writer, watcher::Event};

    use super::*;

    fn policy(name: &str, uid: &str, created: i64, generation: i64) -> ClusterPolicy {
        let mut p = ClusterPolicy::new(name, ClusterPolicySpec::default());
        p.metadata.uid = Some(uid.to_owned());
        p.metadata.generation = Some(generation);
        p.metadata.creation_timestamp = Some(Time(Timestamp::from_second(created).unwrap()));
        p
    }

    #[test]
    fn only_changes_of_the_active_policy_pass() {
        let mut writer = Writer::<ClusterPolicy>::default();
        let mut filter = ActivePolicyFilter::new(writer.as_reader());
        assert!(!filter.changed(), "no policy, nothing to do");
        writer.apply_watcher_event(&Event::Apply(policy("a", "ua", 10, 1)));
        assert!(filter.changed(), "the first policy becomes active");
        let mut status_write = policy("a", "ua", 10, 1);
        status_write.metadata.resource_version = Some("9".to_owned());
        writer.apply_watcher_event(&Event::Apply(status_write));
        assert!(!filter.changed(), "a status write keeps the generation");
        writer.apply_watcher_event(&Event::Apply(policy("b", "ub", 20, 1)));
        assert!(!filter.changed(), "a younger policy is ignored");
        writer.apply_watcher_event(&Event::Apply(policy("b", "ub", 20, 2)));
        assert!(!filter.changed(), "so are its spec changes");
        let mut strategy = policy("a", "ua", 10, 2);
        strategy.spec.mig = Some(MigSpec {
            strategy: Some(MigStrategy::Mixed),
        });
        writer.apply_watcher_event(&Event::Apply(strategy.clone()));
        assert!(
            !filter.changed(),
            "a spec change the label decision does not read relabels nothing"
        );
        let mut seed = strategy;
        seed.metadata.generation = Some(3);
        seed.spec.mig_manager = Some(MigManagerSpec {
            config: Some(MigPartedConfigSpec {
                default: Some("all-1g.10gb".to_owned()),
                ..MigPartedConfigSpec::default()
            }),
            ..MigManagerSpec::default()
        });
        writer.apply_watcher_event(&Event::Apply(seed));
        assert!(
            filter.changed(),
            "a new MIG layout to seed passes: unlabelled MIG nodes get it"
        );
        let mut sandbox = policy("a", "ua", 10, 4);
        sandbox.spec.sandbox_workloads = Some(SandboxWorkloadsSpec {
            enabled: Some(true),
            ..SandboxWorkloadsSpec::default()
        });
        writer.apply_watcher_event(&Event::Apply(sandbox));
        assert!(filter.changed(), "so do sandbox workloads turned on");
        writer.apply_watcher_event(&Event::Delete(policy("a", "ua", 10, 2)));
        assert!(filter.changed(), "another policy became active");
        writer.apply_watcher_event(&Event::Delete(policy("b", "ub", 20, 2)));
        assert!(filter.changed(), "no active policy any more");
    }

    #[test]
    fn a_gpu_cluster_coming_or_going_passes_and_its_writes_do_not() {
        use gpu_operator_api::GpuClusterSpec;
        let policies = Writer::<ClusterPolicy>::default();
        let mut clusters = Writer::<GpuCluster>::default();
        let mut filter =
            ActivePolicyFilter::new(policies.as_reader()).with_gpu_clusters(clusters.as_reader());
        assert!(!filter.changed(), "nothing yet");
        let cluster = GpuCluster::new("gpu-cluster", GpuClusterSpec::default());
        clusters.apply_watcher_event(&Event::Apply(cluster.clone()));
        assert!(filter.changed(), "a GPUCluster came: every GPU node is DRA");
        let mut written = cluster.clone();
        written.metadata.resource_version = Some("5".to_owned());
        written.metadata.deletion_timestamp = Some(Time(Timestamp::from_second(1).unwrap()));
        clusters.apply_watcher_event(&Event::Apply(written));
        assert!(
            !filter.changed(),
            "a write, even the deletion's start: it still exists"
        );
        clusters.apply_watcher_event(&Event::Delete(cluster));
        assert!(filter.changed(), "gone: the DRA gates go");
        assert!(!filter.changed());
    }

    #[test]
    fn nvidia_driver_selections_pass_while_nvidia_drivers_deploy_the_drivers() {
        let mut policies = Writer::<ClusterPolicy>::default();
        let mut drivers = Writer::<NvidiaDriver>::default();
        let mut filter =
            ActivePolicyFilter::new(policies.as_reader()).with_drivers(drivers.as_reader());
        policies.apply_watcher_event(&Event::Apply(policy("a", "ua", 10, 1)));
        assert!(filter.changed());
        let driver = |selector: &str| {
            let spec = serde_json::json!({"nodeSelector": {"nvidia.com/gpu.product": selector}});
            NvidiaDriver::new("h100", serde_json::from_value(spec).unwrap())
        };
        drivers.apply_watcher_event(&Event::Apply(driver("H100")));
        assert!(
            !filter.changed(),
            "the ClusterPolicy's own driver: no owner labels"
        );
        let mut handed_over = policy("a", "ua", 10, 2);
        handed_over.spec.driver.use_nvidia_driver_crd = Some(true);
        policies.apply_watcher_event(&Event::Apply(handed_over));
        assert!(filter.changed(), "the drivers handed to NVIDIADrivers");
        let mut status_write = driver("H100");
        status_write.metadata.resource_version = Some("7".to_owned());
        drivers.apply_watcher_event(&Event::Apply(status_write));
        assert!(!filter.changed(), "an NVIDIADriver's status write");
        drivers.apply_watcher_event(&Event::Apply(driver("H200")));
        assert!(filter.changed(), "its nodeSelector moved");
    }
}
