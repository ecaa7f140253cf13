//! Taking over DaemonSets another operator left, NVIDIA's GPU Operator above all: a DaemonSet's
//! selector is immutable, so a rendered DaemonSet whose selector differs from the live one's
//! would be refused (422). When our pod template carries every label the live selector asks for,
//! the live selector is kept: the pods the DaemonSet owns stay its own and nothing restarts for
//! it (NVIDIA's `nvidia-operator-validator` selects `app` and `app.kubernetes.io/part-of`, ours
//! `app` alone). A live selector our pods would not match is not taken over: the API server's
//! refusal then names the DaemonSet and its selector.

use std::collections::BTreeMap;

use k8s_openapi::{api::apps::v1::DaemonSet, apimachinery::pkg::apis::meta::v1::LabelSelector};

/// `desired` with the selector of `live` when the two differ and the pod template of `desired`
/// has every label `live` selects (match expressions are not taken over: their absence in
/// `desired` would not be a match we can check by labels alone).
pub fn keep_live_selector(mut desired: DaemonSet, live: Option<&DaemonSet>) -> DaemonSet {
    let Some(live_selector) = live.and_then(|l| l.spec.as_ref()).map(|s| &s.selector) else {
        return desired;
    };
    let Some(spec) = desired.spec.as_mut() else {
        return desired;
    };
    if same_selector(&spec.selector, live_selector)
        || live_selector
            .match_expressions
            .as_ref()
            .is_some_and(|e| !e.is_empty())
    {
        return desired;
    }
    let empty = BTreeMap::new();
    let template_labels = spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.as_ref())
        .unwrap_or(&empty);
    let wanted = live_selector.match_labels.as_ref().unwrap_or(&empty);
    if !wanted.is_empty()
        && wanted
            .iter()
            .all(|(key, value)| template_labels.get(key) == Some(value))
    {
        spec.selector = live_selector.clone();
    }
    desired
}

/// Whether two selectors select the same, taking an absent map or list as an empty one.
fn same_selector(a: &LabelSelector, b: &LabelSelector) -> bool {
    let labels = |s: &LabelSelector| s.match_labels.clone().unwrap_or_default();
    let expressions = |s: &LabelSelector| s.match_expressions.clone().unwrap_or_default();
    labels(a) == labels(b) && expressions(a) == expressions(b)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::{
        api::apps::v1::DaemonSetSpec,
        apimachinery::pkg::apis::meta::v1::{LabelSelectorRequirement, ObjectMeta},
    };

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn ds(selector: &[(&str, &str)], template: &[(&str, &str)]) -> DaemonSet {
        let mut ds = DaemonSet {
            spec: Some(DaemonSetSpec {
                selector: LabelSelector {
                    match_labels: Some(labels(selector)),
                    ..LabelSelector::default()
                },
                ..DaemonSetSpec::default()
            }),
            ..DaemonSet::default()
        };
        if let Some(spec) = ds.spec.as_mut() {
            spec.template.metadata = Some(ObjectMeta {
                labels: Some(labels(template)),
                ..ObjectMeta::default()
            });
        }
        ds
    }

    fn selector(ds: &DaemonSet) -> BTreeMap<String, String> {
        ds.spec
            .as_ref()
            .unwrap()
            .selector
            .match_labels
            .clone()
            .unwrap()
    }

    // NVIDIA's v26.7.0 validator DaemonSet, as e2e/fixtures/nvidia-v26.7.0/objects.yaml has it.
    const NVIDIA_VALIDATOR: [(&str, &str); 2] = [
        ("app", "nvidia-operator-validator"),
        ("app.kubernetes.io/part-of", "gpu-operator"),
    ];

    #[test]
    fn a_live_selector_our_pods_match_is_kept() {
        let ours = ds(
            &[("app", "nvidia-operator-validator")],
            &[
                ("app", "nvidia-operator-validator"),
                ("app.kubernetes.io/part-of", "gpu-operator"),
                ("app.kubernetes.io/managed-by", "gpu-operator"),
            ],
        );
        let nvidia = ds(&NVIDIA_VALIDATOR, &NVIDIA_VALIDATOR);
        let kept = keep_live_selector(ours.clone(), Some(&nvidia));
        assert_eq!(selector(&kept), labels(&NVIDIA_VALIDATOR));
        assert_eq!(
            selector(&keep_live_selector(ours.clone(), None)),
            labels(&[("app", "nvidia-operator-validator")]),
            "nothing live: ours"
        );
        assert_eq!(
            kept.spec.unwrap().template,
            ours.spec.unwrap().template,
            "only the selector is taken over"
        );
    }

    #[test]
    fn a_live_selector_our_pods_would_not_match_is_not_taken_over() {
        let ours = ds(&[("app", "x")], &[("app", "x")]);
        let other = ds(&[("app", "x"), ("tier", "gpu")], &[]);
        assert_eq!(
            selector(&keep_live_selector(ours.clone(), Some(&other))),
            labels(&[("app", "x")])
        );
        let mut with_expression = ds(&[("app", "x")], &[]);
        with_expression
            .spec
            .as_mut()
            .unwrap()
            .selector
            .match_expressions = Some(vec![LabelSelectorRequirement {
            key: "tier".to_owned(),
            operator: "Exists".to_owned(),
            values: None,
        }]);
        let kept = keep_live_selector(ours, Some(&with_expression));
        assert!(
            kept.spec.unwrap().selector.match_expressions.is_none(),
            "expressions are never copied"
        );
    }
}
