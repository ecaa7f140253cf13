//! Which cache events are worth a reconcile. Node events fire on every change of a node (status
//! heartbeats too), so only new nodes and label changes pass; ClusterPolicy events fire on status
//! writes and every spec change too, so only a change of the active policy's identity or of what
//! the label decision reads of its spec passes.

use std::{
    collections::HashMap,
    hash::{DefaultHasher, Hash, Hasher},
};

use gpu_operator_api::ClusterPolicy;
use gpu_operator_core::{cache::node_meta::NodeMeta, pipeline::active};

use crate::desired::{PolicyInputs, policy_inputs};
use kube::{
    Resource as _, ResourceExt as _,
    runtime::reflector::{ObjectRef, Store},
};

/// Events between two sweeps of the names of deleted nodes out of [`NodeLabelFilter`].
const PRUNE_EVERY: u32 = 1024;

/// Passes a node on when it is new (by name and uid) or its labels changed since last seen.
pub struct NodeLabelFilter {
    seen: HashMap<String, u64>,
    events: u32,
    nodes: Store<NodeMeta>,
}

impl NodeLabelFilter {
    /// A filter that forgets nodes once they are gone from `nodes`.
    pub fn new(nodes: Store<NodeMeta>) -> Self {
        Self {
            seen: HashMap::new(),
            events: 0,
            nodes,
        }
    }

    /// Whether `node` needs a reconcile: true the first time it is seen, after its labels
    /// changed, and when it was recreated under the same name.
    pub fn changed(&mut self, node: &NodeMeta) -> bool {
        self.events = self.events.wrapping_add(1);
        if self.events.is_multiple_of(PRUNE_EVERY) {
            let nodes = &self.nodes;
            self.seen
                .retain(|name, _| nodes.get(&ObjectRef::new(name)).is_some());
        }
        let mut hasher = DefaultHasher::new();
        node.meta().uid.hash(&mut hasher);
        node.labels().hash(&mut hasher);
        let fingerprint = hasher.finish();
        self.seen.insert(node.name_any(), fingerprint) != Some(fingerprint)
    }

    /// How many nodes the filter remembers.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.seen.len()
    }
}

/// Identity of the active ClusterPolicy and what of its spec the label decision reads.
type PolicyFingerprint = (Option<String>, PolicyInputs);

/// Passes a ClusterPolicy event on when the active policy changed as the label decision sees it:
/// another one became active, or a spec field it reads moved ([`policy_inputs`]). Status writes,
/// ignored policies and the other spec changes do not pass: at 5,000 nodes each one woke 4,286
/// node reconciles that relabelled nothing, on the same two cores as the operand reconcile the
/// change was for.
pub struct ActivePolicyFilter {
    last: Option<PolicyFingerprint>,
    policies: Store<ClusterPolicy>,
}

impl ActivePolicyFilter {
    /// A filter reading the active policy from `policies`.
    pub fn new(policies: Store<ClusterPolicy>) -> Self {
        Self {
            last: None,
            policies,
        }
    }

    /// Whether the active policy differs from the one at the previous call.
    pub fn changed(&mut self) -> bool {
        let now = active::active(&self.policies.state())
            .map(|p| (p.meta().uid.clone(), policy_inputs(&p.spec)));
        if now == self.last {
            return false;
        }
        self.last = now;
        true
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use gpu_operator_api::{
        ClusterPolicySpec,
        spec::{MigManagerSpec, MigPartedConfigSpec, MigSpec, MigStrategy, SandboxWorkloadsSpec},
    };
    use k8s_openapi::api::core::v1::Node;
    use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
    use kube::{
        core::PartialObjectMeta,
        runtime::{reflector::store::Writer, watcher::Event},
    };

    use super::*;

    fn node(name: &str, uid: &str, labels: &[(&str, &str)], rv: &str) -> NodeMeta {
        partial(name, uid, labels, rv).into()
    }

    fn partial(
        name: &str,
        uid: &str,
        labels: &[(&str, &str)],
        rv: &str,
    ) -> PartialObjectMeta<Node> {
        let mut node = PartialObjectMeta::<Node>::default();
        node.metadata.name = Some(name.to_owned());
        node.metadata.uid = Some(uid.to_owned());
        node.metadata.resource_version = Some(rv.to_owned());
        node.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>(),
        );
        node
    }

    #[test]
    fn only_new_nodes_and_label_changes_pass() {
        let writer = Writer::<NodeMeta>::default();
        let mut filter = NodeLabelFilter::new(writer.as_reader());
        let first = node("a", "u1", &[("x", "1")], "1");
        assert!(filter.changed(&first), "a new node passes");
        assert!(!filter.changed(&first), "a repeat does not");
        let heartbeat = partial("a", "u1", &[("x", "1")], "2");
        assert!(
            !filter.changed(&heartbeat.clone().into()),
            "a status-only change does not"
        );
        let mut annotated = heartbeat;
        annotated.metadata.annotations = Some(BTreeMap::from([(
            gpu_operator_api::node_validation::ANNOTATION.into(),
            "b".into(),
        )]));
        assert!(
            !filter.changed(&annotated.into()),
            "an annotation change does not"
        );
        assert!(
            filter.changed(&node("a", "u1", &[("x", "2")], "3")),
            "a label change passes"
        );
        assert!(
            filter.changed(&node("a", "u2", &[("x", "2")], "4")),
            "a recreated node passes"
        );
        assert!(
            filter.changed(&node("b", "u3", &[("x", "2")], "5")),
            "another node passes"
        );
    }

    #[test]
    fn deleted_nodes_are_forgotten() {
        let mut writer = Writer::<NodeMeta>::default();
        let kept = node("kept", "u", &[], "1");
        writer.apply_watcher_event(&Event::Apply(kept.clone()));
        let mut filter = NodeLabelFilter::new(writer.as_reader());
        for i in 0..PRUNE_EVERY - 1 {
            filter.changed(&node(&format!("gone-{i}"), "u", &[], "1"));
        }
        assert_eq!(filter.len(), (PRUNE_EVERY - 1) as usize);
        filter.changed(&kept);
        assert_eq!(
            filter.len(),
            1,
            "only nodes still in the cache are remembered"
        );
    }

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
}
