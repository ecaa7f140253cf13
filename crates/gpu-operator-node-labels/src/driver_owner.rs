//! NVIDIA's node label `nvidia.com/gpu-operator.driver.owner`: the NVIDIADriver that serves a GPU
//! node while the active ClusterPolicy hands the drivers to NVIDIADrivers
//! (`driver.useNvidiaDriverCRD: true`), and that NVIDIADriver's DaemonSets select by. The node's
//! owner is the one NVIDIADriver without `default: true` whose `nodeSelector` selects it, else the
//! single default NVIDIADriver, else none (the label goes). A node that two or more select keeps
//! its label as it is, whatever it is: a conflict is said (each NVIDIADriver's condition names it)
//! and never settled by a guess, and the driver pod already running there is left alone.
//! NVIDIADrivers being deleted serve nothing. With the ClusterPolicy's own driver the label is
//! left as it is, as NVIDIA's operator leaves it.

use std::collections::BTreeMap;

use gpu_operator_api::{ClusterPolicySpec, NvidiaDriver, labels};

/// The owner label's change on a node with `node_labels`, if any: `Some(Some(owner))` sets it,
/// `Some(None)` removes it.
pub fn owner_change(
    node_labels: &BTreeMap<String, String>,
    policy: &ClusterPolicySpec,
    drivers: &[impl AsRef<NvidiaDriver>],
) -> Option<Option<String>> {
    let handed_over = policy.driver_enabled() && policy.driver.use_nvidia_driver_crd == Some(true);
    let gpu = node_labels.get(labels::GPU_PRESENT).map(String::as_str) == Some("true");
    if !handed_over || !gpu {
        return None;
    }
    let live = drivers
        .iter()
        .map(AsRef::as_ref)
        .filter(|d| d.metadata.deletion_timestamp.is_none());
    let name = |d: &NvidiaDriver| d.metadata.name.clone().unwrap_or_default();
    let selecting: Vec<String> = live
        .clone()
        .filter(|d| d.spec.selects(node_labels))
        .map(name)
        .collect();
    let desired = match selecting.as_slice() {
        [] => {
            let defaults: Vec<String> = live.filter(|d| d.spec.default).map(name).collect();
            match defaults.as_slice() {
                [one] => Some(one.clone()),
                _ => None,
            }
        }
        [one] => Some(one.clone()),
        _ => return None,
    };
    (node_labels.get(labels::DRIVER_OWNER) != desired.as_ref()).then_some(desired)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn driver(name: &str, spec: serde_json::Value) -> Arc<NvidiaDriver> {
        Arc::new(NvidiaDriver::new(
            name,
            serde_json::from_value(spec).unwrap(),
        ))
    }

    fn handed_over() -> ClusterPolicySpec {
        let mut spec = ClusterPolicySpec::default();
        spec.driver.use_nvidia_driver_crd = Some(true);
        spec
    }

    fn node(product: &str, owner: Option<&str>) -> BTreeMap<String, String> {
        let mut labels = BTreeMap::from([
            ("nvidia.com/gpu.present".to_owned(), "true".to_owned()),
            ("nvidia.com/gpu.product".to_owned(), product.to_owned()),
        ]);
        if let Some(owner) = owner {
            labels.insert(
                "nvidia.com/gpu-operator.driver.owner".to_owned(),
                owner.to_owned(),
            );
        }
        labels
    }

    #[test]
    fn each_gpu_node_is_labelled_with_its_one_nvidia_driver_and_a_conflict_keeps_its_label() {
        let h100 = driver(
            "h100",
            serde_json::json!({"nodeSelector": {"nvidia.com/gpu.product": "H100"}}),
        );
        let fallback = driver("fallback", serde_json::json!({"default": true}));
        let everything = driver("everything", serde_json::json!({}));
        let policy = handed_over();
        let two = [h100.clone(), fallback.clone()];
        // (node, drivers, change): by hand.
        let set = |o: &str| Some(Some(o.to_owned()));
        assert_eq!(
            owner_change(&node("H100", None), &policy, &two),
            set("h100")
        );
        assert_eq!(
            owner_change(&node("T4", None), &policy, &two),
            set("fallback")
        );
        assert_eq!(
            owner_change(&node("H100", Some("h100")), &policy, &two),
            None
        );
        assert_eq!(
            owner_change(&node("T4", Some("h100")), &policy, &two),
            set("fallback")
        );
        let conflict = [h100.clone(), everything.clone(), fallback.clone()];
        assert_eq!(
            owner_change(&node("H100", Some("h100")), &policy, &conflict),
            None
        );
        assert_eq!(owner_change(&node("H100", None), &policy, &conflict), None);
        assert_eq!(
            owner_change(&node("T4", None), &policy, &conflict),
            set("everything")
        );
        // No owner at all: the label goes.
        assert_eq!(
            owner_change(
                &node("T4", Some("h100")),
                &policy,
                std::slice::from_ref(&h100)
            ),
            Some(None)
        );
        let two_defaults = [
            fallback.clone(),
            driver("other", serde_json::json!({"default": true})),
        ];
        assert_eq!(
            owner_change(&node("T4", Some("fallback")), &policy, &two_defaults),
            Some(None)
        );
    }

    #[test]
    fn nothing_changes_with_the_cluster_policys_driver_or_off_gpu_nodes() {
        let h100 = [driver("h100", serde_json::json!({}))];
        let own = ClusterPolicySpec::default();
        assert_eq!(owner_change(&node("H100", None), &own, &h100), None);
        let mut off = handed_over();
        off.driver.enabled = Some(false);
        assert_eq!(owner_change(&node("H100", None), &off, &h100), None);
        let mut cpu = node("H100", None);
        cpu.remove("nvidia.com/gpu.present");
        assert_eq!(owner_change(&cpu, &handed_over(), &h100), None);
    }
}
