//! Uninstall leaves nothing the operator wrote on nodes: every `nvidia.com/` label, annotation and
//! taint on every node is listed before the install and after `helm uninstall` plus the
//! `cleanup-node-labels` post-delete hook (on by default). The keys the operator wrote are told
//! apart without the code under test: keys absent before the install and not set by the test's
//! "person", keys whose only field managers are `gpu-operator…`, NVIDIA's driver upgrade keys
//! (written out by hand) and `gpu.deploy.*` labels left paused. Positive control: with the cleanup
//! off (the chart renders no hook Job) the same listing finds the driver upgrade's keys.

use std::{collections::BTreeSet, path::Path};

use gpu_operator_harness::{access::kubectl_ok, chart::render, wait_until};
use k8s_openapi::api::core::v1::Node;
use kube::{Api, ResourceExt as _, api::ListParams};

use super::{
    steps::{hook_args, hook_identity, remove_hook_identity, run_binary},
    support::TIMEOUT,
};

/// NVIDIA's driver upgrade keys on nodes (reference §1.7): the state label, and the annotations
/// an upgrade leaves behind. Not the user's request annotation or skip label.
const UPGRADE_KEYS: [&str; 6] = [
    "label nvidia.com/gpu-driver-upgrade-state",
    "annotation nvidia.com/gpu-driver-upgrade-enabled",
    "annotation nvidia.com/gpu-driver-upgrade.state-since",
    "annotation nvidia.com/gpu-driver-upgrade.failure-reason",
    "annotation nvidia.com/gpu-driver-upgrade.restart-pod-uid",
    "annotation nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable",
];

/// Every `nvidia.com/` key on every node, as `<node> <label|annotation|taint> <key>`.
pub async fn snapshot(client: &kube::Client) -> BTreeSet<String> {
    let nodes: Api<Node> = Api::all(client.clone());
    let mut keys = BTreeSet::new();
    for node in nodes.list(&ListParams::default()).await.unwrap() {
        let name = node.name_any();
        for (kind, key) in node_keys(&node) {
            keys.insert(format!("{name} {kind} {key}"));
        }
    }
    keys
}

/// The `nvidia.com/` labels, annotations and taints of `node`.
fn node_keys(node: &Node) -> Vec<(&'static str, String)> {
    let nvidia = |k: &String| k.starts_with("nvidia.com/");
    let labels = node.labels().keys().filter(|k| nvidia(k));
    let annotations = node.annotations().keys().filter(|k| nvidia(k));
    let taints = node.spec.iter().flat_map(|s| s.taints.iter().flatten());
    labels
        .map(|k| ("label", k.clone()))
        .chain(annotations.map(|k| ("annotation", k.clone())))
        .chain(
            taints
                .map(|t| ("taint", t.key.clone()))
                .filter(|(_, k)| nvidia(k)),
        )
        .collect()
}

/// Waits until the driver upgrade has marked the GPU nodes (`upgrade-done` and the
/// upgrade-enabled annotation), as a default install leaves them.
pub async fn wait_for_upgrade_keys(client: &kube::Client) {
    let nodes: Api<Node> = Api::all(client.clone());
    wait_until(
        "the driver upgrade to mark the GPU nodes",
        TIMEOUT,
        || async {
            let marked = nodes
                .list(&ListParams::default().labels("nvidia.com/gpu.present=true"))
                .await?
                .items
                .iter()
                .filter(|n| {
                    n.labels()
                        .get("nvidia.com/gpu-driver-upgrade-state")
                        .map(String::as_str)
                        == Some("upgrade-done")
                        && n.annotations()
                            .contains_key("nvidia.com/gpu-driver-upgrade-enabled")
                })
                .count();
            Ok((marked > 0).then_some(()))
        },
    )
    .await
    .unwrap();
}

/// What a person and another component set on the nodes after the install: keys that must stay.
pub struct PersonsKeys {
    /// The keys, as [`snapshot`] names them.
    pub keys: BTreeSet<String>,
    /// A deploy label an operand left paused on another node (must go).
    paused: String,
}

/// A person turns the driver off and asks for a MIG layout on a MIG node (both overwrite the
/// labeller's values, so the keys become theirs) and asks for a driver upgrade; the MIG manager
/// leaves a device plugin label paused on another node.
pub async fn persons_keys(client: &kube::Client) -> PersonsKeys {
    let nodes: Api<Node> = Api::all(client.clone());
    let gpu_nodes = nodes
        .list(
            &ListParams::default()
                .labels("nvidia.com/gpu.present=true,nvidia.com/mig.capable=true"),
        )
        .await
        .unwrap()
        .items;
    assert!(
        gpu_nodes.len() >= 2,
        "the fleet has fewer than two MIG nodes"
    );
    let (person, other) = (gpu_nodes[0].name_any(), gpu_nodes[1].name_any());
    kubectl_ok(&[
        "label",
        "node",
        &person,
        "--overwrite",
        "nvidia.com/gpu.deploy.driver=false",
        "nvidia.com/mig.config=all-1g.10gb",
    ])
    .unwrap();
    kubectl_ok(&[
        "annotate",
        "node",
        &person,
        "--overwrite",
        "nvidia.com/gpu-driver-upgrade-requested=true",
    ])
    .unwrap();
    kubectl_ok(&[
        "label",
        "node",
        &other,
        "--overwrite",
        "--field-manager=nvidia-mig-manager",
        "nvidia.com/gpu.deploy.device-plugin=paused-for-mig-change",
    ])
    .unwrap();
    PersonsKeys {
        keys: [
            format!("{person} label nvidia.com/gpu.deploy.driver"),
            format!("{person} label nvidia.com/mig.config"),
            format!("{person} annotation nvidia.com/gpu-driver-upgrade-requested"),
        ]
        .into(),
        paused: format!("{other} label nvidia.com/gpu.deploy.device-plugin"),
    }
}

/// The keys of ours left on the nodes: keys not there before the install and not the person's,
/// keys only `gpu-operator…` field managers own, NVIDIA's upgrade keys and paused deploy labels.
pub async fn leftovers(
    client: &kube::Client,
    before: &BTreeSet<String>,
    persons: &PersonsKeys,
) -> BTreeSet<String> {
    let nodes: Api<Node> = Api::all(client.clone());
    let mut left = BTreeSet::new();
    for node in nodes.list(&ListParams::default()).await.unwrap() {
        let name = node.name_any();
        let fields = serde_json::to_value(node.managed_fields()).unwrap();
        for (kind, key) in node_keys(&node) {
            let id = format!("{name} {kind} {key}");
            if persons.keys.contains(&id) {
                continue;
            }
            let owners = owners(&fields, kind, &key);
            let only_ours =
                !owners.is_empty() && owners.iter().all(|m| m.starts_with("gpu-operator"));
            let paused = kind == "label"
                && key.starts_with("nvidia.com/gpu.deploy.")
                && node.labels()[&key].starts_with("paused-for-");
            let upgrade = UPGRADE_KEYS.contains(&format!("{kind} {key}").as_str());
            if !before.contains(&id) || only_ours || paused || upgrade {
                left.insert(format!("{id} (managers {owners:?})"));
            }
        }
    }
    left
}

/// The field managers recorded for a label or annotation (`kind`) `key`.
fn owners(fields: &serde_json::Value, kind: &str, key: &str) -> Vec<String> {
    let section = match kind {
        "label" => "f:labels",
        "annotation" => "f:annotations",
        _ => return vec![],
    };
    fields
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| !e["fieldsV1"]["f:metadata"][section][format!("f:{key}")].is_null())
        .map(|e| e["manager"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// After `helm uninstall --no-hooks`: with the cleanup off the chart renders no hook and the
/// driver upgrade's keys are found left; the default chart's post-delete hook, run under its own
/// RBAC, leaves none of our keys and every key of the person's.
pub async fn uninstall_leaves_no_key_of_ours(
    client: &kube::Client,
    release: &str,
    dir: &Path,
    before: &BTreeSet<String>,
    persons: &PersonsKeys,
) {
    let template = "templates/cleanup-node-labels.yaml";
    let off = render(
        release,
        release,
        &[template],
        &["--set", "operator.cleanupNodeLabels=false"],
    );
    // `helm template --show-only` fails on a template that renders nothing.
    if let Ok(yaml) = &off {
        assert!(
            !yaml.contains("kind: Job"),
            "the cleanup hook renders with operator.cleanupNodeLabels=false: {yaml}"
        );
    }
    // Positive control: what the uninstall leaves when no cleanup runs.
    let left = leftovers(client, before, persons).await;
    for key in [
        "label nvidia.com/gpu-driver-upgrade-state",
        "annotation nvidia.com/gpu-driver-upgrade-enabled",
    ] {
        assert!(
            left.iter().any(|l| l.contains(&format!(" {key} "))),
            "without the cleanup, no {key} is found left: {left:#?}"
        );
    }
    assert!(
        left.iter().any(|l| l.starts_with(&persons.paused)),
        "{left:#?}"
    );

    // The hook of a default install: no --set.
    let (kubeconfig, name, job) = hook_identity(client, release, template, "", dir).await;
    assert_eq!(
        job["metadata"]["annotations"]["helm.sh/hook"],
        "post-delete"
    );
    let args = hook_args(&job);
    assert_eq!(args, ["cleanup-node-labels"]);
    let (ok, output) = run_binary(&["cleanup-node-labels"], &kubeconfig);
    assert!(
        ok,
        "cleanup-node-labels failed under the hook's RBAC: {output}"
    );
    remove_hook_identity(release, &name);

    let left = leftovers(client, before, persons).await;
    assert!(
        left.is_empty(),
        "keys of ours left after the cleanup: {left:#?}\n{output}"
    );
    let after = snapshot(client).await;
    let kept: Vec<&String> = persons
        .keys
        .iter()
        .filter(|k| !after.contains(*k))
        .collect();
    assert!(kept.is_empty(), "the person's keys were removed: {kept:?}");
    assert!(
        after
            .iter()
            .any(|k| k.ends_with(" label nvidia.com/gpu.product")),
        "GFD's labels were removed"
    );
}

/// Takes the person's keys off again when dropped (also on a failure), so later tests find the
/// fleet as it was: a `gpu.deploy.driver=false` left behind would keep the driver off a node.
impl Drop for PersonsKeys {
    fn drop(&mut self) {
        undo(self.keys.iter().chain([&self.paused]));
    }
}

fn undo<'a>(ids: impl Iterator<Item = &'a String>) {
    for id in ids {
        let mut parts = id.split(' ');
        let (Some(node), Some(kind), Some(key)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let verb = if kind == "label" { "label" } else { "annotate" };
        let _ = kubectl_ok(&[verb, "node", node, &format!("{key}-")]);
    }
}
