//! The MIG watchdog's findings: GPU nodes whose MIG manager reports that the layout they ask for
//! failed (`nvidia.com/mig.config.state=failed`), and nodes the node labeller marked stuck
//! (`nvidia.com/gpu-operator.mig-stuck`: `pending` or `rebooting` past
//! `migManager.watchdog.timeoutSeconds`). NVIDIA's MIG manager then leaves the node's GPU operands
//! `paused-for-mig-change` and nothing reports it (NVIDIA/gpu-operator#2833): the node offers no
//! GPUs. Here it turns `MIGManagerReady` False naming the nodes and layouts, and a Warning Event
//! says how to recover. The recovery itself (`migManager.watchdog.recovery`) is the node
//! labeller's, per node (`gpu_operator_node_labels::mig_watchdog`).

use std::collections::BTreeMap;

use gpu_operator_core::{cache::facts::NodeSample, contract::Warning};

/// The failed and stuck layouts, by layout: what `MIGManagerReady` names.
pub fn unserved(
    failed: &BTreeMap<String, NodeSample>,
    stuck: &BTreeMap<String, NodeSample>,
) -> Option<String> {
    let said = |what: &str, by_layout: &BTreeMap<String, NodeSample>| {
        let layouts: Vec<String> = by_layout
            .iter()
            .map(|(layout, nodes)| format!("layout {} {what} {}", shown(layout), nodes.describe()))
            .collect();
        layouts.join(", ")
    };
    let parts: Vec<String> = [
        (!failed.is_empty()).then(|| {
            format!(
                "MIG reconfiguration failed (nvidia.com/mig.config.state=failed): {}",
                said("failed on", failed)
            )
        }),
        (!stuck.is_empty()).then(|| {
            format!(
                "MIG reconfiguration stuck past migManager.watchdog.timeoutSeconds \
                 (nvidia.com/gpu-operator.mig-stuck): {}",
                said("stuck on", stuck)
            )
        }),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!parts.is_empty()).then(|| {
        format!(
            "{}; their GPU operands stay paused-for-mig-change and they offer no GPUs",
            parts.join("; ")
        )
    })
}

/// The Warning about stuck nodes, once per finding.
pub fn stuck_warning(stuck: &BTreeMap<String, NodeSample>) -> Option<Warning> {
    let (layout, nodes) = stuck.iter().next()?;
    let more = match stuck.len() {
        1 => String::new(),
        n => format!(" (and {} other layout(s))", n - 1),
    };
    Some(Warning {
        reason: "MIGConfigStuck",
        message: format!(
            "MIG layout {} has been pending or rebooting past migManager.watchdog.timeoutSeconds \
             on {}{more}: read the log of the node's nvidia-mig-manager pod; \
             migManager.watchdog.recovery says what the operator does about it",
            shown(layout),
            nodes.describe()
        ),
    })
}

/// The Warning that says how to recover, once per finding.
pub fn warning(failed: &BTreeMap<String, NodeSample>) -> Option<Warning> {
    let (layout, nodes) = failed.iter().next()?;
    let more = match failed.len() {
        1 => String::new(),
        n => format!(" (and {} other layout(s))", n - 1),
    };
    Some(Warning {
        reason: "MIGConfigFailed",
        message: format!(
            "MIG layout {} failed on {}{more}: read the log of the node's nvidia-mig-manager pod, \
             fix the layout (migManager.config) or stop what holds the GPUs \
             (migManager.gpuClientsConfig), then set nvidia.com/mig.config again or delete that \
             pod to retry",
            shown(layout),
            nodes.describe()
        ),
    })
}

/// A layout as said: quoted, `(none)` for a node without `nvidia.com/mig.config`.
fn shown(layout: &str) -> String {
    if layout.is_empty() {
        "(none)".to_owned()
    } else {
        format!("{layout:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(pairs: &[(&str, &[&str])]) -> BTreeMap<String, NodeSample> {
        pairs
            .iter()
            .map(|(layout, nodes)| {
                let mut sample = NodeSample::default();
                for n in *nodes {
                    sample.add(n);
                }
                ((*layout).to_owned(), sample)
            })
            .collect()
    }

    #[test]
    fn failed_layouts_are_named_with_their_nodes_and_the_way_back() {
        assert_eq!(unserved(&BTreeMap::new(), &BTreeMap::new()), None);
        assert_eq!(stuck_warning(&BTreeMap::new()), None);
        assert_eq!(warning(&BTreeMap::new()), None);
        let two = failed(&[
            ("all-1g.10gb", &["h100-1", "h100-0"]),
            ("all-balanced", &["a100-0"]),
        ]);
        assert_eq!(
            unserved(&two, &BTreeMap::new()).unwrap(),
            "MIG reconfiguration failed (nvidia.com/mig.config.state=failed): layout \
             \"all-1g.10gb\" failed on 2 node(s) (h100-0, h100-1), layout \"all-balanced\" failed \
             on 1 node(s) (a100-0); their GPU operands stay paused-for-mig-change and they offer \
             no GPUs"
        );
        let warning = warning(&two).unwrap();
        assert_eq!(warning.reason, "MIGConfigFailed");
        assert!(
            warning.message.starts_with(
                "MIG layout \"all-1g.10gb\" failed on 2 node(s) (h100-0, h100-1) (and 1 other layout(s)): read the log"
            ),
            "{}",
            warning.message
        );
        let unlabelled = failed(&[("", &["x"])]);
        assert!(
            unserved(&unlabelled, &BTreeMap::new())
                .unwrap()
                .contains("layout (none) failed on 1 node(s) (x)")
        );
    }

    #[test]
    fn stuck_layouts_are_named_beside_failed_ones() {
        let stuck = failed(&[("all-1g.10gb", &["h100-2"])]);
        let both = unserved(&failed(&[("all-balanced", &["a100-0"])]), &stuck).unwrap();
        assert_eq!(
            both,
            "MIG reconfiguration failed (nvidia.com/mig.config.state=failed): layout \
             \"all-balanced\" failed on 1 node(s) (a100-0); MIG reconfiguration stuck past \
             migManager.watchdog.timeoutSeconds (nvidia.com/gpu-operator.mig-stuck): layout \
             \"all-1g.10gb\" stuck on 1 node(s) (h100-2); their GPU operands stay \
             paused-for-mig-change and they offer no GPUs"
        );
        let warning = stuck_warning(&stuck).unwrap();
        assert_eq!(warning.reason, "MIGConfigStuck");
        assert!(warning.message.contains("on 1 node(s) (h100-2)"));
    }
}
