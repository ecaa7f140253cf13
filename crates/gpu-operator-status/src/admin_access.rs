//! The operator namespace's `resource.kubernetes.io/admin-access=true` label, as NVIDIA's
//! GPUCluster controller sets it: the scheduler admits a ResourceClaim (or template) with
//! `adminAccess: true`, such as the DRA validator's, only in a namespace so labelled. Written
//! while a GPUCluster is active, only when missing (a read per reconcile, no write once
//! converged), with server-side apply under a field manager of its own, like
//! [`crate::pod_security`]'s labels on the same namespace; never removed, as NVIDIA's operator
//! never removes it (other claims of the namespace may rely on it).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Namespace;
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use serde_json::json;

use gpu_operator_core::{Context, Error, pipeline::apply::FIELD_MANAGER_PREFIX};

/// The label the scheduler requires for `adminAccess` claims.
pub const LABEL: &str = "resource.kubernetes.io/admin-access";
/// Its value.
pub const VALUE: &str = "true";

/// The field manager of the label.
const MANAGER: &str = "dra-admin-access";

/// Whether a namespace carrying `live` labels lacks the label (or has another value).
pub fn needs_label(live: Option<&BTreeMap<String, String>>) -> bool {
    live.and_then(|labels| labels.get(LABEL))
        .map(String::as_str)
        != Some(VALUE)
}

/// Labels the operator namespace when it lacks the label (see the module header).
pub async fn reconcile(ctx: &Context) -> Result<(), Error> {
    let namespaces: Api<Namespace> = Api::all(ctx.client.clone());
    let action = format!(
        "reading namespace {} for the DRA admin-access label",
        ctx.namespace
    );
    let live = namespaces
        .get_metadata(&ctx.namespace)
        .await
        .map_err(Error::kube(action))?;
    if !needs_label(live.metadata.labels.as_ref()) {
        return Ok(());
    }
    let patch = json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": ctx.namespace, "labels": {LABEL: VALUE}},
    });
    let params = PatchParams::apply(&format!("{FIELD_MANAGER_PREFIX}{MANAGER}")).force();
    let action = format!(
        "labelling namespace {} {LABEL}={VALUE} (GPUCluster)",
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
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn the_label_is_written_only_when_missing_or_not_true() {
        assert!(needs_label(None));
        assert!(needs_label(Some(&labels(&[("team", "gpu")]))));
        assert!(needs_label(Some(&labels(&[(LABEL, "false")]))));
        assert!(!needs_label(Some(&labels(&[
            (LABEL, "true"),
            ("team", "gpu")
        ]))));
    }
}
