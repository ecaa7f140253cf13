//! `spec.psa.enabled`: the operator labels its own namespace
//! `pod-security.kubernetes.io/{enforce,audit,warn}=privileged`, as NVIDIA's operator does at the
//! start of every reconcile, so that Pod Security admission lets in the operands that need host
//! paths, host PID or privilege (the driver, the toolkit, the validator, node discovery). The
//! operator's own pod meets `restricted` and needs none of it. The labels are written only when
//! one differs (a read per reconcile, no write once converged), with server-side apply, so only
//! these three labels are ours; turning `psa.enabled` off leaves them, as NVIDIA's operator does.

use std::collections::BTreeMap;

use gpu_operator_api::{ClusterPolicy, labels::POD_SECURITY_LABELS};
use k8s_openapi::api::core::v1::Namespace;
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use serde_json::json;

use gpu_operator_core::{Context, Error, pipeline::apply::FIELD_MANAGER_PREFIX};

/// The Pod Security level `psa.enabled` sets.
pub const LEVEL: &str = "privileged";

/// The field manager of the namespace labels.
const MANAGER: &str = "pod-security";

/// The labels to write on a namespace that carries `live`, when `policy` asks for them and one
/// of them differs; `None` when there is nothing to write.
pub fn labels_to_write(
    policy: &ClusterPolicy,
    live: Option<&BTreeMap<String, String>>,
) -> Option<BTreeMap<String, String>> {
    let enabled = policy.spec.psa.as_ref().and_then(|p| p.enabled) == Some(true);
    if !enabled {
        return None;
    }
    let wanted: BTreeMap<String, String> = POD_SECURITY_LABELS
        .iter()
        .map(|label| ((*label).to_owned(), LEVEL.to_owned()))
        .collect();
    let current = wanted
        .iter()
        .all(|(key, value)| live.and_then(|l| l.get(key)) == Some(value));
    (!current).then_some(wanted)
}

/// Labels the operator namespace for `policy` (see the module header).
pub async fn reconcile(ctx: &Context, policy: &ClusterPolicy) -> Result<(), Error> {
    if policy.spec.psa.as_ref().and_then(|p| p.enabled) != Some(true) {
        return Ok(());
    }
    let namespaces: Api<Namespace> = Api::all(ctx.client.clone());
    let action = format!("reading namespace {} for psa.enabled", ctx.namespace);
    let live = namespaces
        .get_metadata(&ctx.namespace)
        .await
        .map_err(Error::kube(action))?;
    let Some(labels) = labels_to_write(policy, live.metadata.labels.as_ref()) else {
        return Ok(());
    };
    let patch = json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": ctx.namespace, "labels": labels},
    });
    let params = PatchParams::apply(&format!("{FIELD_MANAGER_PREFIX}{MANAGER}")).force();
    let action = format!(
        "labelling namespace {} pod-security.kubernetes.io/*={LEVEL} (psa.enabled)",
        ctx.namespace
    );
    namespaces
        .patch(&ctx.namespace, &params, &Patch::Apply(patch))
        .await
        .map_err(Error::kube(action))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::spec::PsaSpec;

    use super::*;

    fn policy(enabled: Option<bool>) -> ClusterPolicy {
        let mut policy = ClusterPolicy::new(
            "cluster-policy",
            gpu_operator_api::ClusterPolicySpec::default(),
        );
        policy.spec.psa = enabled.map(|enabled| PsaSpec {
            enabled: Some(enabled),
        });
        policy
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// NVIDIA's operator: `pod-security.kubernetes.io/{enforce,audit,warn}=privileged`.
    fn nvidia_labels() -> BTreeMap<String, String> {
        labels(&[
            ("pod-security.kubernetes.io/enforce", "privileged"),
            ("pod-security.kubernetes.io/audit", "privileged"),
            ("pod-security.kubernetes.io/warn", "privileged"),
        ])
    }

    #[test]
    fn enabled_labels_a_restricted_or_bare_namespace_privileged() {
        let restricted = labels(&[
            ("pod-security.kubernetes.io/enforce", "restricted"),
            ("kubernetes.io/metadata.name", "gpu-operator"),
        ]);
        assert_eq!(
            labels_to_write(&policy(Some(true)), Some(&restricted)),
            Some(nvidia_labels())
        );
        assert_eq!(
            labels_to_write(&policy(Some(true)), None),
            Some(nvidia_labels())
        );
        // One level of the three differing is enough to write.
        let mut almost = nvidia_labels();
        almost.insert(
            "pod-security.kubernetes.io/warn".to_owned(),
            "baseline".to_owned(),
        );
        assert_eq!(
            labels_to_write(&policy(Some(true)), Some(&almost)),
            Some(nvidia_labels())
        );
    }

    #[test]
    fn nothing_is_written_once_labelled_or_when_not_enabled() {
        let mut labelled = nvidia_labels();
        labelled.insert("team".to_owned(), "gpu".to_owned());
        assert_eq!(labels_to_write(&policy(Some(true)), Some(&labelled)), None);
        let restricted = labels(&[("pod-security.kubernetes.io/enforce", "restricted")]);
        for off in [None, Some(false)] {
            assert_eq!(labels_to_write(&policy(off), Some(&restricted)), None);
        }
    }
}
