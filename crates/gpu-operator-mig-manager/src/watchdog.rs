//! The MIG watchdog's findings: GPU nodes whose MIG manager reports that the layout they ask for
//! failed (`nvidia.com/mig.config.state=failed`). NVIDIA's MIG manager then leaves the node's GPU
//! operands `paused-for-mig-change` and nothing reports it (NVIDIA/gpu-operator#2833): the node
//! offers no GPUs. Here it turns `MIGManagerReady` False naming the nodes and layouts, and a
//! Warning Event says how to recover. Nothing is reconfigured: the watchdog reports only.

use std::collections::BTreeMap;

use gpu_operator_core::{cache::facts::NodeSample, contract::Warning};

/// The failed layouts, by layout: what `MIGManagerReady` names.
pub fn unserved(failed: &BTreeMap<String, NodeSample>) -> Option<String> {
    if failed.is_empty() {
        return None;
    }
    let layouts: Vec<String> = failed
        .iter()
        .map(|(layout, nodes)| format!("layout {} failed on {}", shown(layout), nodes.describe()))
        .collect();
    Some(format!(
        "MIG reconfiguration failed (nvidia.com/mig.config.state=failed): {}; their GPU operands \
         stay paused-for-mig-change and they offer no GPUs",
        layouts.join(", ")
    ))
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
        assert_eq!(unserved(&BTreeMap::new()), None);
        assert_eq!(warning(&BTreeMap::new()), None);
        let two = failed(&[
            ("all-1g.10gb", &["h100-1", "h100-0"]),
            ("all-balanced", &["a100-0"]),
        ]);
        assert_eq!(
            unserved(&two).unwrap(),
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
            unserved(&unlabelled)
                .unwrap()
                .contains("layout (none) failed on 1 node(s) (x)")
        );
    }
}
