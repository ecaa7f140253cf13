//! Which NVIDIADriver serves each GPU node ([`assign`]), by NVIDIA's rule: a node that exactly one
//! NVIDIADriver without `default: true` selects (its `nodeSelector`; none selects every node) is
//! that one's; a node that none selects is the default NVIDIADriver's; a node that two or more
//! select is a conflict, said and never settled by a guess. NVIDIA's operator names the owner in
//! the node label `nvidia.com/gpu-operator.driver.owner` and stops its whole assignment on a
//! conflict (or on two defaults), leaving every node's owner as it was; here only the conflicting
//! nodes are left as they were, and each NVIDIADriver in a conflict is told its nodes (the first
//! few and how many) and the others that select them. Two defaults serve no node, and the nodes
//! no NVIDIADriver serves are counted for the ClusterPolicy's driver condition.
//!
//! The node labeller writes the owner label node by node (`gpu_operator_node_labels::driver_owner`,
//! the same rule); this whole-fleet view gives the warnings ([`warnings`]): each NVIDIADriver in
//! a conflict, each of two defaults, and the ClusterPolicy's driver naming the GPU nodes no
//! NVIDIADriver serves.

use std::collections::{BTreeMap, BTreeSet};

use gpu_operator_api::{NvidiaDriver, labels};
use gpu_operator_core::{
    cache::{facts::NodeSample, stores::Stores},
    contract::Warning,
};

/// Reason of the warning of an NVIDIADriver whose nodes another one selects too.
pub const CONFLICT: &str = "NodeSelectorConflict";
/// Reason of the warning of each of several default NVIDIADrivers.
pub const DEFAULTS: &str = "MultipleDefaultNVIDIADrivers";
/// Reason of the warning of an NVIDIADriver (not the default) that selects no GPU node.
pub const NONE_SELECTED: &str = "NoNodesSelected";
/// Reason of the ClusterPolicy driver's warning of GPU nodes no NVIDIADriver serves.
pub const UNSERVED: &str = "NodesWithoutNVIDIADriver";

/// The owners of the GPU nodes, and what stands in the way of an owner.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Assignment {
    /// The NVIDIADriver of each GPU node that has exactly one.
    pub owners: BTreeMap<String, String>,
    /// By NVIDIADriver: its nodes that another one selects too, and those others.
    pub conflicts: BTreeMap<String, Conflict>,
    /// GPU nodes no NVIDIADriver serves (no selector matches, and no single default).
    pub unselected: NodeSample,
    /// The NVIDIADrivers with `default: true`, by name; more than one serve no node.
    pub defaults: Vec<String>,
    /// How many GPU nodes there are.
    pub gpu_nodes: usize,
    /// The NVIDIADrivers that select at least one GPU node, the default aside.
    pub selecting: BTreeSet<String>,
}

/// The nodes of one NVIDIADriver that others select too.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Conflict {
    /// The nodes, the first few by name and how many.
    pub nodes: NodeSample,
    /// The other NVIDIADrivers that select them.
    pub others: BTreeSet<String>,
}

impl Conflict {
    /// The sentence for the condition and Warning Event of NVIDIADriver `name`.
    pub fn message(&self, name: &str) -> String {
        let others: Vec<&str> = self.others.iter().map(String::as_str).collect();
        format!(
            "spec.nodeSelector of NVIDIADriver {name} selects {} that NVIDIADriver {} selects \
             too: no driver is deployed there by either, and what runs there is left as it is; \
             change the nodeSelectors so that each node is selected by one NVIDIADriver",
            self.nodes.describe(),
            others.join(", ")
        )
    }
}

impl Assignment {
    /// The sentence for the default NVIDIADrivers' conditions when there are several.
    pub fn defaults_message(&self) -> Option<String> {
        (self.defaults.len() > 1).then(|| {
            format!(
                "spec.default is true on {} NVIDIADrivers ({}): the default serves every GPU \
                 node no other NVIDIADriver selects, so there can be one; none of them serves \
                 those nodes until only one is the default",
                self.defaults.len(),
                self.defaults.join(", ")
            )
        })
    }
}

/// The owners of the GPU nodes `nodes` (name, and a lookup of its labels) among `drivers`;
/// NVIDIADrivers being deleted serve nothing.
pub fn assign<'a, L>(
    nodes: impl IntoIterator<Item = (&'a str, L)>,
    drivers: &[&NvidiaDriver],
) -> Assignment
where
    L: Fn(&str) -> Option<&'a str>,
{
    let live: Vec<(&str, &NvidiaDriver)> = drivers
        .iter()
        .filter(|d| d.metadata.deletion_timestamp.is_none())
        .map(|d| (d.metadata.name.as_deref().unwrap_or_default(), *d))
        .collect();
    let mut assignment = Assignment {
        defaults: live
            .iter()
            .filter(|(_, d)| d.spec.default)
            .map(|(name, _)| (*name).to_owned())
            .collect(),
        ..Assignment::default()
    };
    assignment.defaults.sort();
    let default = match assignment.defaults.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    };
    for (node, labels) in nodes {
        assignment.gpu_nodes += 1;
        let selecting: Vec<&str> = live
            .iter()
            .filter(|(_, d)| d.spec.selects_by(&labels))
            .map(|(name, _)| *name)
            .collect();
        assignment
            .selecting
            .extend(selecting.iter().map(|name| (*name).to_owned()));
        match selecting.as_slice() {
            [] => match &default {
                Some(default) => {
                    assignment.owners.insert(node.to_owned(), default.clone());
                }
                None => assignment.unselected.add(node),
            },
            [one] => {
                assignment.owners.insert(node.to_owned(), (*one).to_owned());
            }
            several => {
                for name in several {
                    let conflict = assignment.conflicts.entry((*name).to_owned()).or_default();
                    conflict.nodes.add(node);
                    conflict.others.extend(
                        several
                            .iter()
                            .filter(|other| *other != name)
                            .map(|other| (*other).to_owned()),
                    );
                }
            }
        }
    }
    assignment
}

/// The assignment of the GPU nodes in `stores` among its NVIDIADrivers.
pub fn of_caches(stores: &Stores) -> Assignment {
    // The labels are looked up in the cache, not copied: a copy of every GPU node's labels per
    // NVIDIADriver reconcile was megabytes at a thousand nodes.
    let nodes = stores.nodes.state();
    let drivers = stores.nvidia_drivers.state();
    let drivers: Vec<&NvidiaDriver> = drivers.iter().map(AsRef::as_ref).collect();
    assign(
        nodes
            .iter()
            .filter(|n| n.labels().get(labels::GPU_PRESENT) == Some("true"))
            .map(|n| (n.name(), move |key: &str| n.labels().get(key))),
        &drivers,
    )
}

/// The warnings of NVIDIADriver `cr` (its conflicts; the defaults when it is one of several).
pub fn warnings(cr: &NvidiaDriver, assignment: &Assignment) -> Vec<Warning> {
    let name = cr.metadata.name.as_deref().unwrap_or_default();
    let mut warnings = Vec::new();
    if let Some(conflict) = assignment.conflicts.get(name) {
        warnings.push(Warning {
            reason: CONFLICT,
            message: conflict.message(name),
        });
    }
    if !cr.spec.default && assignment.gpu_nodes > 0 && !assignment.selecting.contains(name) {
        let selector: Vec<String> = cr
            .spec
            .node_selector
            .iter()
            .flatten()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let selector = selector.join(",");
        warnings.push(Warning {
            reason: NONE_SELECTED,
            message: format!(
                "spec.nodeSelector of NVIDIADriver {name} ({selector}) selects none of the {} GPU \
                 node(s), so it deploys no driver; check the labels of the nodes it is meant for \
                 (kubectl get nodes -l '{selector}')",
                assignment.gpu_nodes
            ),
        });
    }
    if cr.spec.default
        && let Some(message) = assignment.defaults_message()
    {
        warnings.push(Warning {
            reason: DEFAULTS,
            message,
        });
    }
    warnings
}

/// The ClusterPolicy driver's warning of the GPU nodes no NVIDIADriver serves, if any.
pub fn unserved_warning(assignment: &Assignment) -> Option<Warning> {
    (assignment.unselected.count > 0).then(|| Warning {
        reason: UNSERVED,
        message: format!(
            "no NVIDIADriver serves {}: none selects them and none is the default, so no \
             driver is deployed there; select them with an NVIDIADriver's nodeSelector or set \
             default: true on one",
            assignment.unselected.describe()
        ),
    })
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::NvidiaDriverSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    fn driver(name: &str, default: bool, selector: &[(&str, &str)]) -> NvidiaDriver {
        let spec = NvidiaDriverSpec {
            default,
            node_selector: (!selector.is_empty()).then(|| {
                selector
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect()
            }),
            ..NvidiaDriverSpec::default()
        };
        NvidiaDriver::new(name, spec)
    }

    fn fleet() -> Vec<(String, BTreeMap<String, String>)> {
        let product = |p: &str| BTreeMap::from([("nvidia.com/gpu.product".into(), p.into())]);
        vec![
            ("h100-0".into(), product("H100")),
            ("h100-1".into(), product("H100")),
            ("t4-0".into(), product("T4")),
            ("a100-0".into(), product("A100")),
        ]
    }

    fn run(drivers: &[NvidiaDriver]) -> Assignment {
        let nodes = fleet();
        let drivers: Vec<&NvidiaDriver> = drivers.iter().collect();
        assign(
            nodes
                .iter()
                .map(|(n, l)| (n.as_str(), move |k: &str| l.get(k).map(String::as_str))),
            &drivers,
        )
    }

    fn owners(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(n, o)| ((*n).to_owned(), (*o).to_owned()))
            .collect()
    }

    #[test]
    fn each_node_is_its_selectors_and_the_rest_the_defaults() {
        let got = run(&[
            driver("h100", false, &[("nvidia.com/gpu.product", "H100")]),
            driver("fallback", true, &[]),
        ]);
        assert_eq!(
            got.owners,
            owners(&[
                ("h100-0", "h100"),
                ("h100-1", "h100"),
                ("t4-0", "fallback"),
                ("a100-0", "fallback"),
            ])
        );
        assert!(got.conflicts.is_empty() && got.defaults_message().is_none());
        assert_eq!(got.unselected.count, 0);
    }

    #[test]
    fn a_node_two_select_is_nobodys_and_both_are_told_the_node_and_the_other() {
        let got = run(&[
            driver("h100", false, &[("nvidia.com/gpu.product", "H100")]),
            driver("everything", false, &[]),
            driver("fallback", true, &[]),
        ]);
        // `everything` (no nodeSelector) selects every node: only it and `h100` meet on the H100s.
        assert_eq!(
            got.owners,
            owners(&[("t4-0", "everything"), ("a100-0", "everything")])
        );
        let h100 = &got.conflicts["h100"];
        assert_eq!(h100.nodes.describe(), "2 node(s) (h100-0, h100-1)");
        assert_eq!(h100.others, BTreeSet::from(["everything".to_owned()]));
        assert_eq!(
            got.conflicts["everything"].others,
            BTreeSet::from(["h100".to_owned()])
        );
        let message = h100.message("h100");
        for part in [
            "h100-0",
            "h100-1",
            "everything",
            "spec.nodeSelector",
            "left as it is",
        ] {
            assert!(message.contains(part), "{part}: {message}");
        }
        assert!(!got.conflicts.contains_key("fallback"));
    }

    #[test]
    fn two_defaults_serve_nothing_and_the_unselected_nodes_are_counted() {
        let got = run(&[
            driver("h100", false, &[("nvidia.com/gpu.product", "H100")]),
            driver("b", true, &[]),
            driver("a", true, &[]),
        ]);
        assert_eq!(
            got.owners,
            owners(&[("h100-0", "h100"), ("h100-1", "h100")])
        );
        assert_eq!(got.defaults, ["a", "b"]);
        let message = got.defaults_message().unwrap();
        assert!(message.contains("2 NVIDIADrivers (a, b)"), "{message}");
        assert_eq!(got.unselected.describe(), "2 node(s) (a100-0, t4-0)");
    }

    #[test]
    fn the_warnings_name_the_conflict_the_defaults_and_the_unserved_nodes() {
        let h100 = driver("h100", false, &[("nvidia.com/gpu.product", "H100")]);
        let everything = driver("everything", false, &[]);
        let got = run(&[h100.clone(), everything.clone()]);
        let [warning] = warnings(&h100, &got).try_into().unwrap();
        assert_eq!(warning.reason, "NodeSelectorConflict");
        assert!(warning.message.contains("h100-0"), "{}", warning.message);
        assert!(unserved_warning(&got).is_none(), "every node is selected");
        let (a, b) = (driver("a", true, &[]), driver("b", true, &[]));
        let got = run(&[h100.clone(), a.clone(), b]);
        assert!(warnings(&h100, &got).is_empty());
        let [warning] = warnings(&a, &got).try_into().unwrap();
        assert_eq!(warning.reason, "MultipleDefaultNVIDIADrivers");
        let unserved = unserved_warning(&got).unwrap();
        assert_eq!(unserved.reason, "NodesWithoutNVIDIADriver");
        assert!(
            unserved.message.contains("2 node(s) (a100-0, t4-0)"),
            "{}",
            unserved.message
        );
    }

    #[test]
    fn a_driver_that_selects_no_gpu_node_is_told_with_its_selector() {
        let b200 = driver("b200", false, &[("nvidia.com/gpu.product", "B200")]);
        let h100 = driver("h100", false, &[("nvidia.com/gpu.product", "H100")]);
        let fallback = driver("fallback", true, &[]);
        let got = run(&[b200.clone(), h100.clone(), fallback.clone()]);
        let [warning] = warnings(&b200, &got).try_into().unwrap();
        assert_eq!(warning.reason, "NoNodesSelected");
        assert!(
            warning
                .message
                .contains("(nvidia.com/gpu.product=B200) selects none of the 4 GPU node(s)"),
            "{}",
            warning.message
        );
        assert!(warnings(&h100, &got).is_empty());
        assert!(
            warnings(&fallback, &got).is_empty(),
            "a default may serve none"
        );
        let nothing: Vec<(String, BTreeMap<String, String>)> = Vec::new();
        let empty = assign(
            nothing
                .iter()
                .map(|(n, l)| (n.as_str(), move |k: &str| l.get(k).map(String::as_str))),
            &[&b200],
        );
        assert!(
            warnings(&b200, &empty).is_empty(),
            "no GPU node to select yet"
        );
    }

    #[test]
    fn a_driver_being_deleted_selects_nothing() {
        let mut going = driver("going", false, &[("nvidia.com/gpu.product", "H100")]);
        going.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        let got = run(&[
            going,
            driver("h100", false, &[("nvidia.com/gpu.product", "H100")]),
        ]);
        assert_eq!(
            got.owners,
            owners(&[("h100-0", "h100"), ("h100-1", "h100")])
        );
        assert!(got.conflicts.is_empty());
        assert_eq!(got.unselected.count, 2);
    }
}
