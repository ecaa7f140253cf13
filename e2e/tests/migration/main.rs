//! Switching from NVIDIA's GPU Operator: the cluster NVIDIA's operator v26.7.0 left (its objects,
//! dumped from a run of it on the default fleet into `e2e/fixtures/nvidia-v26.7.0`, its node
//! labels, its ClusterPolicy with NVIDIA's status) is loaded into a fresh namespace; the real
//! DaemonSet controller and kwok run the pods as on NVIDIA's cluster. Then our operator starts and
//! takes over: no request refused (selectors are immutable), no driver pod replaced, every other
//! operand rolled at most once, what NVIDIA made and we do not render removed and named in one
//! Event (with the RuntimeClasses of NVIDIA's deprecated Kata manager: deleted under NVIDIA's
//! names, named as kept under another), the rest taken over with no field of NVIDIA's left
//! behind, node labels kept, and the
//! ClusterPolicy plainly `ready`: NVIDIA's driver pods install what ours would, so they count as
//! current and no driver upgrade starts.
#![cfg(feature = "e2e")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::large_futures
)]

mod load;
use gpu_operator_e2e::scenario as support;

use std::collections::{BTreeMap, BTreeSet};

use gpu_operator_api::conditions::DRIVER_UPGRADE;
use gpu_operator_harness::{
    fleet::PROFILE_LABEL, node_marks::NodeMarks, operator::writes_by, unique_name, wait_until,
};
use k8s_openapi::{
    api::{core::v1::Event, node::v1::RuntimeClass},
    jiff::Timestamp,
};
use kube::{
    Api, ResourceExt as _,
    api::{DeleteParams, ListParams, PostParams},
};

use gpu_operator_e2e::nvidia_fixture::Fixture;
use load::PodHistory;
use support::{Cleanup, IMAGES, TIMEOUT, condition, gpu_nodes, is_ready, setup, simulated_nodes};

const DRIVER: &str = "nvidia-driver-daemonset";
/// What NVIDIA's operator created for the default ClusterPolicy that ours does not render (read
/// off the fixture by hand): its operator-metrics Service, and namespaced RBAC where our operands
/// need only their ClusterRoles.
const NOT_OURS: [&str; 7] = [
    "Role nvidia-device-plugin",
    "Role nvidia-device-plugin-mps-control-daemon",
    "Role nvidia-driver",
    "RoleBinding nvidia-device-plugin",
    "RoleBinding nvidia-device-plugin-mps-control-daemon",
    "RoleBinding nvidia-driver",
    "Service gpu-operator",
];

#[tokio::test]
async fn our_operator_takes_over_what_nvidias_operator_left() {
    let env = setup().await;
    let fixture = Fixture::read();
    let name = unique_name("migration");
    let _cleanup = Cleanup {
        namespace: env.namespace.clone(),
        policies: vec![name.clone()],
    };
    // NVIDIA's ClusterPolicy serves one OS per cluster (its driver image carries it): a fleet of
    // the OS of the fixture's driver image, with the labels and annotation NVIDIA's operator wrote.
    let nodes = simulated_nodes(&env.client).await;
    let gpus: BTreeSet<String> = gpu_nodes(&nodes).into_iter().collect();
    let marks = nodes
        .iter()
        .map(|n| {
            let profile = &n.labels()[PROFILE_LABEL];
            (
                n.name_any(),
                fixture.marks(profile, gpus.contains(&n.name_any())),
            )
        })
        .collect::<BTreeMap<_, _>>();
    let _marks = NodeMarks::set(&env.client, &marks, "gpu-operator")
        .await
        .unwrap();

    let policy = fixture.create_policy(&env.client, &name).await;
    let loaded = fixture
        .create_objects(&env.client, &env.namespace, &policy)
        .await;
    load::wait_pods_running(&env, &fixture).await;
    let daemonsets_before = load::daemonset_uids(&env).await;
    let driver_before = support::pods_of(&env, DRIVER).await;
    assert_eq!(
        driver_before.keys().cloned().collect::<BTreeSet<_>>(),
        gpus,
        "NVIDIA's driver pods run on every GPU node"
    );
    let history = PodHistory::watch(&env);
    history.wait_seen(&driver_before).await;

    let kata = KataRuntimeClasses::create(&env).await;

    let since = Timestamp::now();
    let operator = env.start(&IMAGES);
    let mut removed = wait_leftovers_event(&env, &name).await;
    kata.assert_removed_or_named(&mut removed).await;
    load::wait_rolled_out(&env).await;
    // NVIDIA's driver pods install what our driver template installs (`in_sync`): they count as
    // current, so nothing keeps the ClusterPolicy from `ready`.
    let policy = support::wait_policy(&env, &name, "every operand ready, and the policy", |p| {
        is_ready(p)
            && load::OPERANDS.iter().all(|c| {
                condition(p, c).is_some_and(|c| {
                    c.observed_generation == p.metadata.generation && c.status == "True"
                })
            })
    })
    .await;

    // No request refused; positive control: the operator did write NVIDIA's DaemonSets.
    let writes = writes_by(&env.user, since).unwrap();
    let refused: Vec<_> = writes.iter().filter(|w| w.code == 422).collect();
    assert!(refused.is_empty(), "refused writes: {refused:#?}");
    assert!(
        writes
            .iter()
            .any(|w| w.resource == "daemonsets" && w.name == DRIVER && w.code == 200),
        "the driver DaemonSet was written: {writes:#?}"
    );
    let log = std::fs::read_to_string(&operator.log).unwrap();
    assert!(
        !log.contains("immutable"),
        "refused for an immutable field: {log}"
    );

    // Pods: the driver's are NVIDIA's still; the others rolled at most once.
    assert_eq!(
        support::pods_of(&env, DRIVER).await,
        driver_before,
        "a driver pod was replaced"
    );
    let seen = history.stop();
    let rolled = load::assert_rolled_at_most_once(&seen, DRIVER);
    assert!(rolled > 0, "no operand rolled: {seen:#?}");
    assert_eq!(
        load::daemonset_uids(&env).await,
        daemonsets_before,
        "a DaemonSet was recreated"
    );

    // NVIDIA's objects: taken over, or removed and named in the Event.
    let expected: BTreeSet<String> = NOT_OURS.iter().map(|s| (*s).to_owned()).collect();
    assert_eq!(removed, expected);
    load::assert_adopted_or_removed(&env, &loaded, &removed).await;
    load::assert_mounted_config_maps_exist(&env).await;

    // Node labels kept.
    load::assert_marks_kept(&simulated_nodes(&env.client).await, &marks);

    // The driver upgrade agrees: every GPU node on the current driver, none to upgrade.
    let upgrade = condition(&policy, DRIVER_UPGRADE).unwrap();
    assert_eq!(
        (upgrade.status.as_str(), upgrade.message.split(';').next()),
        (
            "True",
            Some(format!("{n}/{n} GPU nodes on the current driver", n = gpus.len()).as_str())
        ),
        "{upgrade:#?}"
    );
    operator.stop().unwrap();
}

/// RuntimeClasses as NVIDIA's deprecated Kata manager labelled them: one under a name NVIDIA's
/// charts gave it, one under a name of the user's (which the operator may not delete).
struct KataRuntimeClasses {
    api: Api<RuntimeClass>,
}

impl KataRuntimeClasses {
    const NVIDIAS: &str = "kata-qemu-nvidia-gpu-snp";
    const USERS: &str = "kata-e2e-renamed";

    async fn create(env: &support::Env) -> Self {
        let api: Api<RuntimeClass> = Api::all(env.client.clone());
        for name in [Self::NVIDIAS, Self::USERS] {
            let class: RuntimeClass = serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "labels": {"nvidia.com/kata-runtime-class": "true"}},
                "handler": "kata-qemu-nvidia-gpu-snp",
            }))
            .unwrap();
            let _ = api.delete(name, &DeleteParams::default()).await;
            wait_until("an earlier run's RuntimeClass gone", TIMEOUT, || async {
                Ok(api.get_opt(name).await?.is_none().then_some(()))
            })
            .await
            .unwrap();
            api.create(&PostParams::default(), &class).await.unwrap();
        }
        Self { api }
    }

    /// NVIDIA's name deleted and named in the Event, the user's kept and named as kept; both
    /// taken out of `removed`.
    async fn assert_removed_or_named(&self, removed: &mut BTreeSet<String>) {
        assert!(
            removed.remove(&format!("RuntimeClass {}", Self::NVIDIAS)),
            "{removed:#?}"
        );
        let kept = removed
            .iter()
            .find(|r| r.starts_with(&format!("RuntimeClass {} (NOT removed", Self::USERS)))
            .cloned()
            .unwrap_or_else(|| panic!("the renamed one named as kept: {removed:#?}"));
        removed.remove(&kept);
        assert!(self.api.get_opt(Self::NVIDIAS).await.unwrap().is_none());
        assert!(self.api.get_opt(Self::USERS).await.unwrap().is_some());
        self.api
            .delete(Self::USERS, &DeleteParams::default())
            .await
            .unwrap();
    }
}

/// Waits for the Event on ClusterPolicy `name` naming what was removed; returns those names.
async fn wait_leftovers_event(env: &support::Env, name: &str) -> BTreeSet<String> {
    let events: Api<Event> = Api::all(env.client.clone());
    let selector = format!("involvedObject.name={name},reason=RemovedLeftovers");
    let note = wait_until("the Event naming NVIDIA's leftovers", TIMEOUT, || async {
        let list = events
            .list(&ListParams::default().fields(&selector))
            .await?;
        Ok(list.items.into_iter().find_map(|e| e.message))
    })
    .await
    .unwrap();
    let (_, names) = note.split_once("does not use: ").unwrap();
    names.split(", ").map(str::to_owned).collect()
}
