//! Which upgrade policy each node follows. While NVIDIADrivers deploy the drivers
//! (`driver.useNvidiaDriverCRD`), a node owned by an NVIDIADriver (`nvidia.com/gpu-operator.driver.owner`)
//! that sets its own `upgradePolicy` follows that one — `autoUpgrade` then defaults to true, as
//! NVIDIA's CRD has it — and its nodes are one pool, admitted against their own
//! `maxParallelUpgrades` and `maxUnavailable`. Every other node follows the ClusterPolicy's.
//! An NVIDIADriver's pool moves only once the driver reconciler acted on its current generation
//! (its `status.observedGeneration`), for the reason `caught_up` gives.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use gpu_operator_api::{ClusterPolicySpec, NvidiaDriver};
use kube::ResourceExt as _;

use crate::{
    facts::NodeFacts,
    plan,
    policy::{InvalidPolicy, Policy},
};

/// The pool of the nodes that follow the ClusterPolicy's policy.
pub const CLUSTER_POOL: &str = "";

/// One pool's policy, as far as it can be followed.
#[derive(Debug)]
pub enum PoolPolicy {
    /// Followed.
    Follow(Policy),
    /// Automatic upgrades are off: its nodes are handed back.
    Off,
    /// Its driver DaemonSets may still hold the NVIDIADriver's previous spec: wait.
    CatchingUp,
    /// Cannot be followed; the message names the object and the field.
    Invalid(String),
}

/// The policy of every pool, by pool name (the NVIDIADriver's, or [`CLUSTER_POOL`]).
#[derive(Debug)]
pub struct Pools(BTreeMap<String, PoolPolicy>);

impl Pools {
    /// The ClusterPolicy's policy `cluster` (resolved from `spec`), and, when `drivers` deploy
    /// the drivers, each one's that sets its own.
    pub fn new(
        spec: &ClusterPolicySpec,
        cluster: Result<Policy, InvalidPolicy>,
        drivers: &[Arc<NvidiaDriver>],
        namespace: &str,
    ) -> Self {
        let mut pools = BTreeMap::new();
        pools.insert(
            CLUSTER_POOL.to_owned(),
            match cluster {
                Ok(p) if p.auto_upgrade => PoolPolicy::Follow(p),
                Ok(_) => PoolPolicy::Off,
                Err(e) => PoolPolicy::Invalid(e.to_string()),
            },
        );
        if spec.driver.use_nvidia_driver_crd == Some(true) {
            for driver in drivers {
                let Some(own) = driver.spec.upgrade_policy.as_ref() else {
                    continue;
                };
                let name = driver.name_any();
                let caught_up = driver.status.as_ref().and_then(|s| s.observed_generation)
                    == driver.metadata.generation;
                let pool = match Policy::resolve(Some(own)) {
                    Err(e) => PoolPolicy::Invalid(format!(
                        "NVIDIADriver {name}: {}",
                        e.to_string()
                            .replacen("driver.upgradePolicy", "spec.upgradePolicy", 1)
                    )),
                    Ok(_) if own.auto_upgrade == Some(false) => PoolPolicy::Off,
                    Ok(_) if !caught_up => PoolPolicy::CatchingUp,
                    Ok(p) => PoolPolicy::Follow(Policy {
                        auto_upgrade: true,
                        ..p.with_gpu_users(spec, namespace)
                    }),
                };
                pools.insert(name, pool);
            }
        }
        Self(pools)
    }

    /// The pool `node` belongs to.
    pub fn pool_of<'a>(&self, node: &'a NodeFacts) -> &'a str {
        node.owner
            .as_deref()
            .filter(|owner| self.0.contains_key(*owner))
            .unwrap_or(CLUSTER_POOL)
    }

    /// The policy of pool `pool`.
    pub fn policy(&self, pool: &str) -> &PoolPolicy {
        self.0
            .get(pool)
            .or_else(|| self.0.get(CLUSTER_POOL))
            .unwrap_or(&PoolPolicy::Off)
    }

    /// Whether some pool upgrades automatically (or will, once caught up).
    pub fn any_on(&self) -> bool {
        self.0
            .values()
            .any(|p| matches!(p, PoolPolicy::Follow(_) | PoolPolicy::CatchingUp))
    }

    /// The pools whose policy cannot be followed, with why.
    pub fn invalid(&self) -> Vec<&str> {
        self.0
            .values()
            .filter_map(|p| match p {
                PoolPolicy::Invalid(why) => Some(why.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// The nodes of one pass by what their pool does.
pub struct Split<'a> {
    /// The nodes whose pool upgrades them, each pool's side by side.
    pub follow: Vec<NodeFacts>,
    /// The policy of each of `follow`.
    pub policies: Vec<&'a Policy>,
    /// The nodes whose pool's upgrades are off or cannot be followed: handed back.
    pub handed_back: Vec<NodeFacts>,
    /// The nodes of pools that wait for their driver reconciler: kept as they are.
    pub catching_up: Vec<NodeFacts>,
}

impl Split<'_> {
    /// How many of the nodes not followed in this pass run the driver their DaemonSet asks for.
    pub fn current_elsewhere(&self) -> usize {
        self.handed_back
            .iter()
            .chain(&self.catching_up)
            .filter(|n| {
                n.driver
                    .as_ref()
                    .is_some_and(|d| d.in_sync && !d.terminating)
            })
            .count()
    }
}

impl Pools {
    /// Splits `nodes` by what their pool does; a pool catching up keeps its nodes as they are.
    pub fn split(&self, nodes: Vec<NodeFacts>) -> Split<'_> {
        let mut followed: Vec<(NodeFacts, &Policy)> = Vec::with_capacity(nodes.len());
        let (mut handed_back, mut catching_up) = (Vec::new(), Vec::new());
        for node in nodes {
            match self.policy(self.pool_of(&node)) {
                PoolPolicy::Follow(p) => followed.push((node, p)),
                PoolPolicy::CatchingUp => catching_up.push(node),
                PoolPolicy::Off | PoolPolicy::Invalid(_) => handed_back.push(node),
            }
        }
        // Each pool's nodes side by side (stable: one pool keeps the cache's order), so a pool is
        // admitted on a slice of them, not on copies.
        followed.sort_by(|a, b| self.pool_of(&a.0).cmp(self.pool_of(&b.0)));
        let (follow, policies) = followed.into_iter().unzip();
        Split {
            follow,
            policies,
            handed_back,
            catching_up,
        }
    }

    /// The nodes admitted in this pass, each pool against its own limits, and how many more
    /// could start.
    pub fn admit(&self, split: &Split<'_>) -> (BTreeSet<String>, usize) {
        let mut admitted = BTreeSet::new();
        let mut available = 0;
        let mut start = 0;
        for nodes in split
            .follow
            .chunk_by(|a, b| self.pool_of(a) == self.pool_of(b))
        {
            let policy = split.policies[start];
            start += nodes.len();
            let pool_admitted = plan::admit(nodes, policy);
            available += plan::available(nodes, policy).saturating_sub(pool_admitted.len());
            admitted.extend(pool_admitted);
        }
        (admitted, available)
    }
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::{NvidiaDriverSpec, nvidia_driver::NvidiaDriverStatus};
    use serde_json::json;

    use super::*;

    fn driver(
        name: &str,
        upgrade: Option<serde_json::Value>,
        caught_up: bool,
    ) -> Arc<NvidiaDriver> {
        let mut d = NvidiaDriver::new(name, NvidiaDriverSpec::default());
        d.spec.upgrade_policy = upgrade.map(|u| serde_json::from_value(u).unwrap());
        d.metadata.generation = Some(2);
        d.status = Some(NvidiaDriverStatus {
            observed_generation: Some(if caught_up { 2 } else { 1 }),
            ..NvidiaDriverStatus::default()
        });
        Arc::new(d)
    }

    fn node(owner: Option<&str>) -> NodeFacts {
        NodeFacts {
            name: "n".into(),
            owner: owner.map(str::to_owned),
            ..NodeFacts::default()
        }
    }

    fn handed_over() -> ClusterPolicySpec {
        let mut spec = ClusterPolicySpec::default();
        spec.driver.use_nvidia_driver_crd = Some(true);
        spec
    }

    #[test]
    fn a_driver_with_its_own_policy_is_a_pool_and_the_others_follow_the_cluster_policy() {
        let drivers = [
            driver("h100", Some(json!({"maxParallelUpgrades": 2})), true),
            driver("t4", None, true),
            driver("off", Some(json!({"autoUpgrade": false})), true),
            driver("bumped", Some(json!({})), false),
            driver("bad", Some(json!({"maxUnavailable": "many"})), true),
        ];
        let pools = Pools::new(
            &handed_over(),
            Policy::resolve(None),
            &drivers,
            "gpu-operator",
        );
        let h100 = node(Some("h100"));
        assert_eq!(pools.pool_of(&h100), "h100");
        let PoolPolicy::Follow(p) = pools.policy("h100") else {
            panic!("{pools:?}")
        };
        assert!(
            p.auto_upgrade,
            "autoUpgrade defaults to true on an NVIDIADriver"
        );
        assert_eq!(p.max_parallel, 2);
        assert_eq!(p.operator_namespace, "gpu-operator");
        // Without a policy of its own, a driver's nodes follow the ClusterPolicy's (off here).
        let t4 = node(Some("t4"));
        assert_eq!(pools.pool_of(&t4), CLUSTER_POOL);
        assert_eq!(pools.pool_of(&node(None)), CLUSTER_POOL);
        assert!(matches!(pools.policy(CLUSTER_POOL), PoolPolicy::Off));
        assert!(matches!(pools.policy("off"), PoolPolicy::Off));
        assert!(matches!(pools.policy("bumped"), PoolPolicy::CatchingUp));
        assert_eq!(
            pools.invalid().len(),
            1,
            "the bad policy is named: {:?}",
            pools.invalid()
        );
        assert!(
            pools.invalid()[0].starts_with("NVIDIADriver bad: spec.upgradePolicy.maxUnavailable"),
            "{:?}",
            pools.invalid()
        );
        assert!(pools.any_on());
        // A pass follows the h100 pool, hands the t4 node back, keeps the bumped pool's node.
        let in_sync = |owner: &str| NodeFacts {
            name: owner.into(),
            owner: Some(owner.into()),
            driver: Some(crate::facts::PodFacts {
                name: "p".into(),
                uid: "u".into(),
                created: k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ready: true,
                terminating: false,
                in_sync: true,
                older_template: false,
            }),
            ..NodeFacts::default()
        };
        let split = pools.split(vec![in_sync("h100"), in_sync("t4"), in_sync("bumped")]);
        assert_eq!(split.follow.len(), 1);
        assert_eq!((split.handed_back.len(), split.catching_up.len()), (1, 1));
        assert_eq!(split.current_elsewhere(), 2);
        let (admitted, _) = pools.admit(&split);
        assert!(admitted.is_empty(), "an in-sync node is not admitted");
        // Two nodes to upgrade in each of two pools, interleaved: each pool admits against its own
        // limits (25% of its 2 nodes: one each), not against the 4 together.
        let required = |name: &str, owner: Option<&str>| {
            let mut node = in_sync(owner.unwrap_or("t4"));
            node.name = name.into();
            node.owner = owner.map(str::to_owned);
            node.ready = true;
            node.state = Some(crate::state::UpgradeState::Required);
            if let Some(d) = node.driver.as_mut() {
                d.in_sync = false;
            }
            node
        };
        let on = Pools::new(
            &handed_over(),
            Policy::resolve(Some(
                &serde_json::from_value(json!({"autoUpgrade": true})).unwrap(),
            )),
            &drivers,
            "gpu-operator",
        );
        let split = on.split(vec![
            required("a", Some("h100")),
            required("b", None),
            required("c", Some("h100")),
            required("d", None),
        ]);
        let (admitted, _) = on.admit(&split);
        assert_eq!(admitted.into_iter().collect::<Vec<_>>(), ["a", "b"]);
    }

    #[test]
    fn without_the_handover_only_the_cluster_policy_counts() {
        let drivers = [driver("h100", Some(json!({"autoUpgrade": true})), true)];
        let pools = Pools::new(
            &ClusterPolicySpec::default(),
            Policy::resolve(None),
            &drivers,
            "gpu-operator",
        );
        assert_eq!(pools.pool_of(&node(Some("h100"))), CLUSTER_POOL);
        assert!(!pools.any_on());
    }
}
