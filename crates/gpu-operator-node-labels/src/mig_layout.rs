//! MIG before work (NVIDIA/gpu-operator#2670): a MIG-capable node whose `nvidia.com/mig.config`
//! asks for a MIG layout gets the deploy labels of the GPU clients only once NVIDIA's MIG manager
//! has applied that layout (`nvidia.com/mig.config.state=success`). Without this, a node created
//! with a preset layout (an autoscaler's node template) starts the device plugin before the MIG
//! manager has run; the plugin fails with "device 0 has no MIG devices configured" and pods land
//! on a node that is not ready for them.
//!
//! Pure: [`layout_wait`] reads the node's labels (as the labelling rules leave them) and the
//! active policy.
//!
//! The rule:
//! - It applies to a `container` node whose GPUs are MIG-capable, with the MIG manager enabled in
//!   the policy and its deploy label `true` on the node (a MIG manager is going to run there), and
//!   whose `nvidia.com/mig.config` names a layout other than
//!   [`MigPartedConfigSpec::DEFAULT_LAYOUT`]. The default (`all-disabled`, the layout the labeller
//!   seeds) does not wait: it leaves every GPU whole, which the device plugin serves whatever the
//!   MIG manager has done, and holding it back would starve every MIG-capable node where no MIG
//!   manager reports a state (the kwok e2e fleet, a MIG manager stopped by hand).
//! - While `nvidia.com/mig.config.state` is anything but `success` (absent, `pending`,
//!   `rebooting`, `failed`), the deploy labels of [`HELD_OPERANDS`] are not added. The MIG
//!   manager's label carries no layout name, so `success` is trusted for the layout the node asks
//!   for now: the MIG manager sets `pending` first whenever the layout it reads is not applied.
//! - A label that is already there (any non-empty value: `true`, `false`, the MIG manager's
//!   `paused-for-mig-change`) is never touched: re-layouts of a running node are the MIG
//!   manager's own pause and restore.
//!
//! "Held back" means absent, not `paused-for-mig-change`. NVIDIA's MIG manager (mig-parted
//! `pkg/mig/reconfigure`) reads each of these labels, writes `paused-for-mig-change` for any value
//! but `false` (an absent one included) while it works, and writes `true` for any value but
//! `false` when it sets its final state (`success`, `failed`, and "already applied"), so with the
//! real MIG manager both choices end in `true`. Absent is the one that also ends well without it:
//! when the hold-back stops for another reason (the node's layout changed to `all-disabled`, the
//! MIG manager disabled in the policy or on the node), the labeller's ordinary rule fills the
//! missing labels in, while a `paused-for-mig-change` we had written would be a value the
//! labeller never overwrites, so the node would stay without a device plugin. It also keeps
//! `paused-for-mig-change` meaning what NVIDIA's tools mean by it: a MIG change in progress.

use std::collections::BTreeMap;

use gpu_operator_api::{
    ClusterPolicySpec,
    labels::{self, operand},
    spec::{MigPartedConfigSpec, WorkloadConfig},
};

use crate::workload::{self, deploy_label};

/// The operands whose deploy labels wait for the MIG layout: those NVIDIA's MIG manager pauses
/// while it changes the layout (device plugin, GFD, DCGM exporter, DCGM and the GPU clients of
/// `nvidia.com/gpu.deploy.client`; its `nvsm` is not one the operator labels).
pub const HELD_OPERANDS: [&str; 5] = [
    operand::DEVICE_PLUGIN,
    operand::GPU_FEATURE_DISCOVERY,
    operand::DCGM_EXPORTER,
    operand::DCGM,
    operand::CLIENT,
];

/// A node waiting for its MIG layout before its GPU clients may be scheduled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayoutWait {
    /// The layout the node asks for (`nvidia.com/mig.config`).
    pub layout: String,
    /// The MIG manager's `nvidia.com/mig.config.state`, `None` while it has written none.
    pub state: Option<String>,
    /// The deploy labels held back (missing on the node and not added), in order.
    pub held: Vec<String>,
}

impl LayoutWait {
    /// Whether the MIG manager reported that it could not apply the layout.
    pub fn failed(&self) -> bool {
        self.state.as_deref() == Some("failed")
    }

    /// One line for the node's Event and the log: the node, the layout, the state it is in and
    /// the one it waits for, and what is held back.
    pub fn message(&self, node: &str) -> String {
        let operands: Vec<&str> = self
            .held
            .iter()
            .map(|key| key.trim_start_matches(labels::GPU_DEPLOY_PREFIX))
            .collect();
        format!(
            "node {node} asks for MIG layout {layout} ({config}={layout}); {state_key} is {state}, \
             so the deploy labels of {operands} are held back until the MIG manager sets it to \
             {SUCCESS}",
            layout = self.layout,
            config = labels::MIG_CONFIG,
            state_key = labels::MIG_CONFIG_STATE,
            state = self.state.as_deref().unwrap_or("not set"),
            operands = operands.join(", "),
        )
    }
}

/// The value of `nvidia.com/mig.config.state` once the MIG manager applied the layout.
pub const SUCCESS: &str = "success";

/// Whether the policy deploys the MIG manager (`migManager.enabled`, true unless set false).
pub fn mig_manager_enabled(policy: &ClusterPolicySpec) -> bool {
    policy
        .mig_manager
        .as_ref()
        .is_none_or(|m| m.enabled != Some(false))
}

/// Whether `node_labels` (as the labelling rules leave them for `config`) wait for a MIG layout,
/// and which missing deploy labels are held back; `None` when nothing waits (the rule is in the
/// module's header). A wait with nothing missing to hold back is `None` too.
pub fn layout_wait(
    node_labels: &BTreeMap<String, String>,
    policy: &ClusterPolicySpec,
    config: WorkloadConfig,
) -> Option<LayoutWait> {
    let mig_manager_runs = node_labels
        .get(&deploy_label(operand::MIG_MANAGER))
        .is_some_and(|v| v == "true");
    if config != WorkloadConfig::Container
        || !mig_manager_enabled(policy)
        || !mig_manager_runs
        || !workload::mig_capable(node_labels)
    {
        return None;
    }
    let layout = node_labels
        .get(labels::MIG_CONFIG)
        .filter(|l| !l.is_empty() && *l != MigPartedConfigSpec::DEFAULT_LAYOUT)?;
    let state = node_labels.get(labels::MIG_CONFIG_STATE);
    if state.is_some_and(|s| s == SUCCESS) {
        return None;
    }
    let held: Vec<String> = HELD_OPERANDS
        .iter()
        .map(|operand| deploy_label(operand))
        .filter(|key| node_labels.get(key).is_none_or(String::is_empty))
        .collect();
    (!held.is_empty()).then(|| LayoutWait {
        layout: layout.clone(),
        state: state.filter(|s| !s.is_empty()).cloned(),
        held,
    })
}

/// How many valid layout names a report of an unknown one suggests.
const SUGGESTIONS: usize = 3;

/// The `known` layout names closest to `layout` (edit distance, then name), when `layout` is not
/// one of them; `None` when it is.
pub fn closest_layouts<'a>(
    layout: &str,
    known: impl IntoIterator<Item = &'a str>,
) -> Option<Vec<&'a str>> {
    let mut ranked: Vec<(usize, &str)> = Vec::new();
    for name in known {
        if name == layout {
            return None;
        }
        ranked.push((edit_distance(layout, name), name));
    }
    ranked.sort_unstable();
    Some(
        ranked
            .into_iter()
            .take(SUGGESTIONS)
            .map(|(_, name)| name)
            .collect(),
    )
}

/// Levenshtein distance of `a` and `b`, by characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current.push(substitution.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::closest_layouts;
    use crate::desired::{decide, fixtures::*, label_changes};

    const CONFIG: &str = "nvidia.com/mig.config";
    const STATE: &str = "nvidia.com/mig.config.state";
    /// What NVIDIA's MIG manager pauses and restores (mig-parted `pkg/mig/reconfigure`), as the
    /// operator labels them: written out here, not read from the code under test.
    const GPU_CLIENTS: [&str; 5] = [
        "nvidia.com/gpu.deploy.device-plugin",
        "nvidia.com/gpu.deploy.gpu-feature-discovery",
        "nvidia.com/gpu.deploy.dcgm-exporter",
        "nvidia.com/gpu.deploy.dcgm",
        "nvidia.com/gpu.deploy.client",
    ];
    /// The other gates of a `container` MIG node, which never wait.
    const OTHERS: [&str; 5] = [
        "nvidia.com/gpu.deploy.driver",
        "nvidia.com/gpu.deploy.container-toolkit",
        "nvidia.com/gpu.deploy.operator-validator",
        "nvidia.com/gpu.deploy.node-status-exporter",
        "nvidia.com/gpu.deploy.mig-manager",
    ];

    /// A fresh H100 node, created already asking for `layout` (an autoscaler's node template).
    fn created_with(layout: &str, state: Option<&str>) -> BTreeMap<String, String> {
        let mut extra = vec![(CONFIG, layout)];
        extra.extend(state.map(|s| (STATE, s)));
        with(&n1_h100_fresh(), &extra, &[])
    }

    fn applied(node: &BTreeMap<String, String>) -> BTreeMap<String, String> {
        let mut out = node.clone();
        for (key, value) in label_changes(node, &default_policy()) {
            match value {
                Some(value) => out.insert(key, value),
                None => out.remove(&key),
            };
        }
        out
    }

    fn gate(node: &BTreeMap<String, String>, key: &str) -> Option<String> {
        node.get(key).cloned()
    }

    #[test]
    fn a_node_created_with_a_mig_layout_gets_no_gpu_client_gates_until_the_layout_is_applied() {
        for state in [
            None,
            Some("pending"),
            Some("rebooting"),
            Some("failed"),
            Some(""),
        ] {
            let node = applied(&created_with("all-1g.10gb", state));
            for key in GPU_CLIENTS {
                assert_eq!(gate(&node, key), None, "{key} with state {state:?}");
            }
            for key in OTHERS {
                assert_eq!(gate(&node, key).as_deref(), Some("true"), "{key}");
            }
            assert_eq!(
                label_changes(&node, &default_policy()),
                BTreeMap::new(),
                "waiting writes nothing more (state {state:?})"
            );
            let wait = decide(&node, &default_policy()).layout_wait.unwrap();
            assert_eq!(wait.layout, "all-1g.10gb");
            assert_eq!(wait.held, GPU_CLIENTS, "in the MIG manager's order");
            assert_eq!(wait.failed(), state == Some("failed"));
        }
    }

    #[test]
    fn the_gpu_client_gates_come_in_one_pass_once_the_mig_manager_reports_success() {
        let waiting = applied(&created_with("all-1g.10gb", Some("pending")));
        let success = with(&waiting, &[(STATE, "success")], &[]);
        let changes = label_changes(&success, &default_policy());
        let expected: BTreeMap<String, Option<String>> = GPU_CLIENTS
            .iter()
            .map(|k| ((*k).to_owned(), Some("true".to_owned())))
            .collect();
        assert_eq!(changes, expected);
        let after = applied(&success);
        assert_eq!(label_changes(&after, &default_policy()), BTreeMap::new());
        assert_eq!(decide(&after, &default_policy()).layout_wait, None);
    }

    #[test]
    fn the_default_layout_does_not_wait() {
        for state in [None, Some("pending")] {
            let node = applied(&created_with("all-disabled", state));
            for key in GPU_CLIENTS.iter().chain(&OTHERS) {
                assert_eq!(gate(&node, key).as_deref(), Some("true"), "{key}");
            }
            assert_eq!(decide(&node, &default_policy()).layout_wait, None);
        }
    }

    #[test]
    fn nothing_waits_where_no_mig_manager_will_apply_the_layout() {
        let node = created_with("all-1g.10gb", None);
        let disabled = mig_policy(Some(false), None);
        let after = label_changes(&node, &disabled);
        for key in GPU_CLIENTS {
            assert_eq!(
                after[key].as_deref(),
                Some("true"),
                "MIG manager disabled: {key}"
            );
        }
        let off_here = with(
            &node,
            &[("nvidia.com/gpu.deploy.mig-manager", "false")],
            &[],
        );
        let after = label_changes(&off_here, &default_policy());
        for key in GPU_CLIENTS {
            assert_eq!(
                after[key].as_deref(),
                Some("true"),
                "mig-manager=false: {key}"
            );
        }
        let t4 = with(&n3_t4(), &[(CONFIG, "all-1g.10gb")], &[]);
        assert_eq!(
            label_changes(&t4, &default_policy())["nvidia.com/gpu.deploy.device-plugin"].as_deref(),
            Some("true"),
            "not MIG-capable"
        );
    }

    #[test]
    fn gates_already_on_the_node_are_never_touched() {
        for value in ["true", "false", "paused-for-mig-change"] {
            let running = with(
                &n1_h100_labelled(),
                &[
                    (CONFIG, "all-1g.10gb"),
                    (STATE, "pending"),
                    ("nvidia.com/gpu.deploy.client", value),
                    ("nvidia.com/gpu.deploy.device-plugin", value),
                ],
                &[],
            );
            assert_eq!(
                label_changes(&running, &default_policy()),
                BTreeMap::new(),
                "{value}"
            );
        }
        // Only the missing (or empty) ones wait.
        let partly = with(
            &n1_h100_labelled(),
            &[
                (CONFIG, "all-1g.10gb"),
                (STATE, "pending"),
                ("nvidia.com/gpu.deploy.dcgm", ""),
            ],
            &[],
        );
        let wait = decide(&partly, &default_policy()).layout_wait.unwrap();
        assert_eq!(
            wait.held,
            ["nvidia.com/gpu.deploy.dcgm", "nvidia.com/gpu.deploy.client"]
        );
        assert_eq!(label_changes(&partly, &default_policy()), BTreeMap::new());
    }

    #[test]
    fn a_seeded_layout_that_changes_mig_waits_in_the_same_pass() {
        let policy = mig_policy(None, Some("all-balanced"));
        let changes = label_changes(&n1_h100_fresh(), &policy);
        assert_eq!(changes[CONFIG].as_deref(), Some("all-balanced"));
        for key in GPU_CLIENTS {
            assert!(!changes.contains_key(key), "{key}");
        }
    }

    #[test]
    fn the_message_names_the_node_the_layout_and_the_states() {
        let node = applied(&created_with("all-1g.10gb", Some("pending")));
        let message = decide(&node, &default_policy())
            .layout_wait
            .unwrap()
            .message("gpu-7");
        for part in [
            "gpu-7",
            "all-1g.10gb",
            "nvidia.com/mig.config.state is pending",
            "success",
            "device-plugin",
        ] {
            assert!(message.contains(part), "{part} in {message}");
        }
    }

    #[test]
    fn an_unknown_layout_gets_the_closest_valid_names() {
        let known = [
            "all-disabled",
            "all-enabled",
            "all-balanced",
            "all-1g.10gb",
            "all-1g.20gb",
            "all-2g.20gb",
            "all-3g.40gb",
        ];
        assert_eq!(closest_layouts("all-1g.10gb", known), None);
        assert_eq!(
            closest_layouts("all-1g.10GB", known),
            Some(vec!["all-1g.10gb", "all-1g.20gb", "all-2g.20gb"])
        );
        assert_eq!(
            closest_layouts("all-balance", known).unwrap()[0],
            "all-balanced",
            "one letter missing"
        );
        assert_eq!(
            closest_layouts("all-3g.40gb ", known).unwrap()[0],
            "all-3g.40gb",
            "a trailing space"
        );
        assert_eq!(closest_layouts("x", []), Some(vec![]));
    }
}
