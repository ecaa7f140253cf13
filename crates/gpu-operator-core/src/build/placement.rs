//! Where operand pods run: each operand's own node selector (the `nvidia.com/gpu.deploy.<operand>`
//! gate and its extras) plus our `daemonsets.nodeSelector` and `daemonsets.affinity`, which narrow
//! the placement of every operand (NVIDIA/gpu-operator#2626); they never widen it.

use std::collections::BTreeMap;

use gpu_operator_api::{labels::GPU_DEPLOY_PREFIX, spec::DaemonsetsSpec};
use k8s_openapi::api::core::v1::{Affinity, NodeSelector, NodeSelectorTerm, PodSpec};

/// Adds the deploy gate of `deploy_label` and the user's placement to `pod`. The operand's own
/// selector keys win over the user's.
pub fn apply(pod: &mut PodSpec, common: &DaemonsetsSpec, deploy_label: &str) {
    let mut node_selector: BTreeMap<String, String> =
        common.node_selector.clone().unwrap_or_default();
    node_selector.extend(pod.node_selector.take().unwrap_or_default());
    node_selector.insert(
        format!("{GPU_DEPLOY_PREFIX}{deploy_label}"),
        "true".to_owned(),
    );
    pod.node_selector = Some(node_selector);
    if let Some(user) = &common.affinity {
        pod.affinity = Some(add_affinity(pod.affinity.take(), user));
    }
}

/// The operand's own affinity with the user's `daemonsets.affinity` filling what it leaves open;
/// required node-affinity terms are combined so both must hold.
fn add_affinity(own: Option<Affinity>, user: &Affinity) -> Affinity {
    let Some(mut own) = own else {
        return user.clone();
    };
    own.node_affinity = match (own.node_affinity.take(), &user.node_affinity) {
        (Some(mut mine), Some(theirs)) => {
            mine.required_during_scheduling_ignored_during_execution = match (
                mine.required_during_scheduling_ignored_during_execution
                    .take(),
                &theirs.required_during_scheduling_ignored_during_execution,
            ) {
                (Some(a), Some(b)) => Some(and_selectors(&a, b)),
                (a, b) => a.or_else(|| b.clone()),
            };
            let mut preferred = mine
                .preferred_during_scheduling_ignored_during_execution
                .take()
                .unwrap_or_default();
            preferred.extend(
                theirs
                    .preferred_during_scheduling_ignored_during_execution
                    .iter()
                    .flatten()
                    .cloned(),
            );
            mine.preferred_during_scheduling_ignored_during_execution =
                Some(preferred).filter(|p| !p.is_empty());
            Some(mine)
        }
        (mine, theirs) => mine.or_else(|| theirs.clone()),
    };
    own.pod_affinity = own.pod_affinity.or_else(|| user.pod_affinity.clone());
    own.pod_anti_affinity = own
        .pod_anti_affinity
        .or_else(|| user.pod_anti_affinity.clone());
    own
}

/// Node selectors whose terms are ORed: `a AND b` is every pair of terms merged.
fn and_selectors(a: &NodeSelector, b: &NodeSelector) -> NodeSelector {
    let mut terms = Vec::new();
    for left in &a.node_selector_terms {
        for right in &b.node_selector_terms {
            let mut term: NodeSelectorTerm = left.clone();
            let add = |into: &mut Option<Vec<_>>, from: &Option<Vec<_>>| {
                let mut all = into.take().unwrap_or_default();
                all.extend(from.iter().flatten().cloned());
                *into = Some(all).filter(|v| !v.is_empty());
            };
            add(&mut term.match_expressions, &right.match_expressions);
            add(&mut term.match_fields, &right.match_fields);
            terms.push(term);
        }
    }
    NodeSelector {
        node_selector_terms: terms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daemonsets_node_selector_and_affinity_add_to_every_operands_placement() {
        let zone = NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_expressions: Some(vec![
                    k8s_openapi::api::core::v1::NodeSelectorRequirement {
                        key: "zone".into(),
                        operator: "In".into(),
                        values: Some(vec!["a".into()]),
                    },
                ]),
                ..NodeSelectorTerm::default()
            }],
        };
        let common = DaemonsetsSpec {
            node_selector: Some(BTreeMap::from([
                ("pool".into(), "gpu".into()),
                ("nvidia.com/gpu.deploy.x".into(), "false".into()),
            ])),
            affinity: Some(Affinity {
                node_affinity: Some(k8s_openapi::api::core::v1::NodeAffinity {
                    required_during_scheduling_ignored_during_execution: Some(zone.clone()),
                    ..Default::default()
                }),
                ..Affinity::default()
            }),
            ..DaemonsetsSpec::default()
        };
        let own = PodSpec {
            node_selector: Some(BTreeMap::from([(
                "nvidia.com/mps.capable".into(),
                "true".into(),
            )])),
            ..PodSpec::default()
        };
        let mut pod = own;
        apply(&mut pod, &common, "x");
        let selector = pod.node_selector.unwrap();
        assert_eq!(selector["pool"], "gpu");
        assert_eq!(selector["nvidia.com/mps.capable"], "true");
        assert_eq!(
            selector["nvidia.com/gpu.deploy.x"], "true",
            "the operand's gate wins"
        );
        assert_eq!(pod.affinity, common.affinity);

        let both = add_affinity(common.affinity.clone(), common.affinity.as_ref().unwrap());
        let terms = both
            .node_affinity
            .unwrap()
            .required_during_scheduling_ignored_during_execution
            .unwrap()
            .node_selector_terms;
        assert_eq!(terms.len(), 1);
        assert_eq!(terms[0].match_expressions.as_ref().unwrap().len(), 2);
    }
}
