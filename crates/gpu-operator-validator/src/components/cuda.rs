//! The CUDA check: a workload pod pinned to the node runs the CUDA check image and must succeed.
//! Without a configured image the check fails and says so rather than passing.

use gpu_operator_api::validator::{CUDA_WORKLOAD_APP, env, reason};
use k8s_openapi::{api::core::v1::Pod, apimachinery::pkg::apis::meta::v1::OwnerReference};
use kube::Api;

use super::{Failed, Outcome, passed};
use crate::{
    config::Config,
    workload_pod::{self, Workload},
};

/// The owner reference to the validator's pod when `POD_NAME` is set.
pub async fn validator_pod_owner(
    cfg: &Config,
    pods: &Api<Pod>,
) -> Result<Option<OwnerReference>, Failed> {
    let Some(name) = cfg.pod_name.as_deref() else {
        return Ok(None);
    };
    let pod = pods.get(name).await.map_err(|e| {
        Failed::new(
            reason::API_ERROR,
            format!(
                "getting the validator's own pod {name} (POD_NAME): {}",
                super::api_error(&e)
            ),
        )
    })?;
    Ok(workload_pod::owner_reference(&pod))
}

/// The image of the CUDA pod, or the failure saying none is configured.
pub fn image(cfg: &Config) -> Result<String, Failed> {
    cfg.workload.cuda_image.clone().ok_or_else(|| {
        Failed::permanent(
            reason::CUDA_IMAGE_NOT_CONFIGURED,
            format!(
                "no CUDA check image is configured (set {} or {}): the CUDA check did not run",
                env::CUDA_VALIDATOR_IMAGE,
                env::VALIDATOR_IMAGE
            ),
        )
    })
}

/// The CUDA workload pod this check creates on its node. Pure.
pub fn pod(cfg: &Config, owner: Option<OwnerReference>) -> Result<Pod, Failed> {
    let workload = Workload {
        app: CUDA_WORKLOAD_APP,
        container: "cuda-validation",
        image: image(cfg)?,
        resource: None,
    };
    Ok(workload_pod::build_for(&workload, cfg, owner))
}

/// Runs the CUDA check.
pub async fn check(cfg: &Config, client: &kube::Client) -> Outcome {
    if !cfg.with_workload {
        return passed(
            reason::CUDA_VALIDATED,
            "CUDA workload skipped (WITH_WORKLOAD=false)",
        );
    }
    let node = cfg.node_name.as_deref().unwrap_or_default();
    let namespace = cfg.namespace.as_deref().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let owner = validator_pod_owner(cfg, &pods).await?;
    let pod = pod(cfg, owner)?;
    let name =
        workload_pod::run(&pods, &pod, node, cfg.workload.timeout, cfg.sleep_interval).await?;
    passed(
        reason::CUDA_VALIDATED,
        format!("CUDA workload pod {namespace}/{name} succeeded"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Fixture;

    #[test]
    fn without_an_image_the_check_says_so_and_is_not_retried() {
        let mut f = Fixture::new("cuda");
        f.set("NODE_NAME", "n");
        f.set("OPERATOR_NAMESPACE", "ns");
        let failed = image(&f.config()).unwrap_err();
        assert_eq!(failed.reason, reason::CUDA_IMAGE_NOT_CONFIGURED);
        assert!(failed.permanent);
        assert!(failed.message.contains("CUDA_VALIDATOR_IMAGE"));
        f.set(
            "VALIDATOR_IMAGE",
            "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.3.0",
        );
        assert!(image(&f.config()).unwrap().ends_with("v25.3.0"));
    }
}
