//! Lifting the startup taint `nvidia.com/gpu.not-ready:NoSchedule` from the node once its stack
//! is ready: a pure function computes the remaining taints, and a resourceVersion-guarded merge
//! patch of the node writes them (retried on conflict; [`rewrite`], which the GPU health agent's
//! taint uses too).

use gpu_operator_api::validator::{STARTUP_TAINT_EFFECT, STARTUP_TAINT_KEY};
use k8s_openapi::api::core::v1::{Node, Taint};
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use serde_json::json;

use crate::node_conditions::{ATTEMPTS, ReportError, is_conflict};

/// The taints without the startup taint, or `None` when the node does not carry it.
pub fn without_startup_taint(taints: &[Taint]) -> Option<Vec<Taint>> {
    let is_startup = |t: &Taint| t.key == STARTUP_TAINT_KEY && t.effect == STARTUP_TAINT_EFFECT;
    taints
        .iter()
        .any(is_startup)
        .then(|| taints.iter().filter(|t| !is_startup(t)).cloned().collect())
}

/// The merge patch replacing the node's taints, guarded by its resourceVersion (taints have no
/// merge key, so the list is replaced whole and must not race another writer).
pub fn patch_body(remaining: &[Taint], resource_version: &str) -> serde_json::Value {
    json!({
        "metadata": {"resourceVersion": resource_version},
        "spec": {"taints": remaining},
    })
}

/// Removes the startup taint from node `name`; returns whether it was there.
pub async fn lift(nodes: &Api<Node>, name: &str) -> Result<bool, ReportError> {
    let lifted = rewrite(
        nodes,
        name,
        &crate::node_conditions::patch_params(),
        "removing the startup taint from",
        without_startup_taint,
    )
    .await?;
    if lifted {
        tracing::info!(node = name, "startup taint {STARTUP_TAINT_KEY} lifted");
    }
    Ok(lifted)
}

/// Replaces node `name`'s taints with what `change` makes of them (`None`: nothing to change),
/// with a resourceVersion-guarded merge patch retried on conflict; returns whether it wrote.
/// `action` names the write in errors.
pub async fn rewrite(
    nodes: &Api<Node>,
    name: &str,
    params: &PatchParams,
    action: &'static str,
    change: impl Fn(&[Taint]) -> Option<Vec<Taint>>,
) -> Result<bool, ReportError> {
    let api = |action| ReportError::api(action, name);
    for _ in 0..ATTEMPTS {
        let node = nodes.get(name).await.map_err(api("getting"))?;
        let taints = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        let Some(new) = change(&taints) else {
            return Ok(false);
        };
        let rv = node.metadata.resource_version.clone().unwrap_or_default();
        match nodes
            .patch(name, params, &Patch::Merge(patch_body(&new, &rv)))
            .await
        {
            Ok(_) => return Ok(true),
            Err(e) if is_conflict(&e) => {}
            Err(e) => return Err(api(action)(e)),
        }
    }
    Err(ReportError::Conflicts(name.to_owned(), ATTEMPTS))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            effect: effect.into(),
            ..Taint::default()
        }
    }

    #[test]
    fn removes_only_the_startup_taint() {
        let taints = vec![
            taint("node.kubernetes.io/unschedulable", "NoSchedule"),
            taint(STARTUP_TAINT_KEY, "NoSchedule"),
            taint(STARTUP_TAINT_KEY, "NoExecute"),
        ];
        let remaining = without_startup_taint(&taints).unwrap();
        assert_eq!(
            remaining,
            vec![
                taint("node.kubernetes.io/unschedulable", "NoSchedule"),
                taint(STARTUP_TAINT_KEY, "NoExecute")
            ]
        );
    }

    #[test]
    fn nothing_to_do_without_the_taint() {
        assert_eq!(without_startup_taint(&[]), None);
        assert_eq!(without_startup_taint(&[taint("other", "NoSchedule")]), None);
    }

    #[test]
    fn the_patch_is_guarded() {
        let body = patch_body(&[], "42");
        assert_eq!(body["metadata"]["resourceVersion"], "42");
        assert_eq!(body["spec"]["taints"], serde_json::json!([]));
    }
}
