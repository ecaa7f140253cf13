//! The agent's decisions on hand-written node states.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1;
use serde_json::json;

use super::*;

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

const PRESENT: &str = "feature.node.kubernetes.io/pci-10de.present";
const KERNEL: &str = "feature.node.kubernetes.io/kernel-version.full";

fn entry(manager: &str, operation: &str, labels: &[&str]) -> ManagedFieldsEntry {
    let fields: serde_json::Map<_, _> = labels
        .iter()
        .map(|l| (format!("f:{l}"), json!({})))
        .collect();
    ManagedFieldsEntry {
        manager: Some(manager.into()),
        operation: Some(operation.into()),
        fields_v1: Some(FieldsV1(json!({"f:metadata": {"f:labels": fields}}))),
        ..ManagedFieldsEntry::default()
    }
}

#[test]
fn owned_labels_are_those_the_agent_applied() {
    let managed = [
        entry(FIELD_MANAGER, "Apply", &[PRESENT, KERNEL]),
        entry("kubectl-label", "Update", &["team"]),
        entry(FIELD_MANAGER, "Update", &["other"]),
    ];
    assert_eq!(
        owned_labels(&managed, FIELD_MANAGER),
        [PRESENT, KERNEL].iter().map(|s| (*s).to_owned()).collect()
    );
    assert!(owned_labels(&managed, "nfd-master").is_empty());
}

#[test]
fn writes_only_when_a_value_is_missing_or_differs_or_an_owned_label_is_stale() {
    let desired = map(&[(PRESENT, "true"), (KERNEL, "6.8.0")]);
    let owned: BTreeSet<String> = [PRESENT, KERNEL].iter().map(|s| (*s).to_owned()).collect();
    // Positive control: a fresh node gets the labels.
    assert_eq!(
        plan(None, &BTreeMap::new(), &BTreeSet::new(), desired.clone()),
        Plan::Apply(desired.clone())
    );
    // Converged: nothing to do.
    let labels = map(&[(PRESENT, "true"), (KERNEL, "6.8.0"), ("team", "a")]);
    assert_eq!(plan(None, &labels, &owned, desired.clone()), Plan::UpToDate);
    // Right value set by someone else: still nothing to do.
    assert_eq!(
        plan(None, &labels, &BTreeSet::new(), desired.clone()),
        Plan::UpToDate
    );
    // A kernel upgrade changes one value.
    let upgraded = map(&[(PRESENT, "true"), (KERNEL, "6.8.1")]);
    assert_eq!(
        plan(None, &labels, &owned, upgraded.clone()),
        Plan::Apply(upgraded)
    );
    // The GPU is gone: the agent releases its label (the apply leaves it out).
    let no_gpu = map(&[(KERNEL, "6.8.0")]);
    assert_eq!(
        plan(None, &labels, &owned, no_gpu.clone()),
        Plan::Apply(no_gpu.clone())
    );
    // ... but a label it never owned is not its to release.
    assert_eq!(
        plan(None, &labels, &[KERNEL.to_owned()].into(), no_gpu),
        Plan::UpToDate
    );
}

#[test]
fn nfd_is_recognised_by_its_api_its_annotations_or_its_other_labels() {
    let ours = map(&[(PRESENT, "true"), (KERNEL, "6.8.0"), ("team", "a")]);
    assert_eq!(nfd_sign(false, &ours, &BTreeMap::new()), None);
    assert!(
        nfd_sign(true, &ours, &BTreeMap::new())
            .unwrap()
            .contains("nfd.k8s-sigs.io")
    );
    let annotations = map(&[("nfd.node.kubernetes.io/feature-labels", "pci-10de.present")]);
    assert!(
        nfd_sign(false, &ours, &annotations)
            .unwrap()
            .contains("nfd.node.kubernetes.io/feature-labels")
    );
    let mut nfd_labels = ours.clone();
    nfd_labels.insert(
        "feature.node.kubernetes.io/cpu-cpuid.AVX512F".into(),
        "true".into(),
    );
    let sign = nfd_sign(false, &nfd_labels, &BTreeMap::new()).unwrap();
    assert!(sign.contains("cpu-cpuid.AVX512F"), "{sign}");
    // With NFD there, nothing is written even on a fresh node.
    assert_eq!(
        plan(
            Some(sign.clone()),
            &BTreeMap::new(),
            &BTreeSet::new(),
            map(&[(PRESENT, "true")])
        ),
        Plan::NfdPresent(sign)
    );
}
