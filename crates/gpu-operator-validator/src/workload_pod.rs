//! The workload pods of the `cuda` and `plugin` checks: a pure builder (pinned to the node by
//! `nodeName`, tolerating every taint, owned by the validator pod when `POD_NAME` is known) and
//! the runner that replaces the previous pod and waits for the new one to succeed.

use std::{collections::BTreeMap, time::Duration};

use gpu_operator_api::{labels, validator::reason};
use k8s_openapi::{
    api::core::v1::{
        Container, EnvVar, LocalObjectReference, Pod, PodSpec, ResourceRequirements, Toleration,
    },
    apimachinery::pkg::{
        api::resource::Quantity,
        apis::meta::v1::{ObjectMeta, OwnerReference},
    },
};
use kube::{
    Api, ResourceExt as _,
    api::{DeleteParams, ListParams, PostParams},
};
use tracing::info;

use crate::{
    components::{Failed, api_error},
    config::{Config, WorkloadSettings},
};

/// The GPUs the NVIDIA runtime gives the CUDA pod (the plugin pod gets its own from the plugin).
pub const NVIDIA_VISIBLE_DEVICES: &str = "NVIDIA_VISIBLE_DEVICES";
/// The driver parts the NVIDIA runtime mounts into a workload pod.
pub const NVIDIA_DRIVER_CAPABILITIES: &str = "NVIDIA_DRIVER_CAPABILITIES";

/// What differs between the CUDA and the device plugin workload pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workload {
    /// `app` label and name prefix (NVIDIA's names).
    pub app: &'static str,
    /// Name of the pod's container.
    pub container: &'static str,
    /// Image.
    pub image: String,
    /// Extended resource to request one of (the plugin check), or none (the CUDA check, which
    /// relies on `NVIDIA_VISIBLE_DEVICES=all` and the runtime class).
    pub resource: Option<String>,
}

/// Builds the pod for `workload` on `node`.
pub fn build(
    workload: &Workload,
    node: &str,
    namespace: &str,
    settings: &WorkloadSettings,
    owner: Option<OwnerReference>,
) -> Pod {
    let resources = workload.resource.as_ref().map(|name| {
        let one = BTreeMap::from([(name.clone(), Quantity("1".to_owned()))]);
        ResourceRequirements {
            limits: Some(one.clone()),
            requests: Some(one),
            ..ResourceRequirements::default()
        }
    });
    let var = |name: &str, value: &str| EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        value_from: None,
    };
    // The CUDA workload needs the driver's compute libraries (libcuda.so.1), which the NVIDIA
    // runtime mounts for the `compute` capability; some runtime versions default to `utility`.
    let mut env = vec![var(NVIDIA_DRIVER_CAPABILITIES, "compute,utility")];
    if workload.resource.is_none() {
        env.insert(0, var(NVIDIA_VISIBLE_DEVICES, "all"));
    }
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-", workload.app)),
            namespace: Some(namespace.to_owned()),
            labels: Some(BTreeMap::from([
                (labels::APP.to_owned(), workload.app.to_owned()),
                (
                    labels::APP_PART_OF.to_owned(),
                    labels::MANAGED_BY_VALUE.to_owned(),
                ),
            ])),
            owner_references: owner.map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.to_owned()),
            restart_policy: Some("Never".to_owned()),
            // Pinned by nodeName; it must run even while the node carries the startup taint.
            tolerations: Some(vec![Toleration {
                operator: Some("Exists".to_owned()),
                ..Toleration::default()
            }]),
            runtime_class_name: settings.runtime_class.clone(),
            image_pull_secrets: (!settings.pull_secrets.is_empty()).then(|| {
                settings
                    .pull_secrets
                    .iter()
                    .map(|name| LocalObjectReference { name: name.clone() })
                    .collect()
            }),
            containers: vec![Container {
                name: workload.container.to_owned(),
                image: Some(workload.image.clone()),
                image_pull_policy: settings.pull_policy.clone(),
                command: Some(settings.command.clone()),
                env: Some(env),
                resources,
                // A failed workload's last output lines become the termination message, which
                // `describe` puts into the check's failure (and so into the Node condition).
                termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: None,
    }
}

/// Builds the pod for `workload` on the node and in the namespace `cfg` names, with its settings.
pub fn build_for(workload: &Workload, cfg: &Config, owner: Option<OwnerReference>) -> Pod {
    build(
        workload,
        cfg.node_name.as_deref().unwrap_or_default(),
        cfg.namespace.as_deref().unwrap_or_default(),
        &cfg.workload,
        owner,
    )
}

/// The owner reference to the validator's own pod, so its workload pods go with it.
pub fn owner_reference(pod: &Pod) -> Option<OwnerReference> {
    Some(OwnerReference {
        api_version: "v1".to_owned(),
        kind: "Pod".to_owned(),
        name: pod.metadata.name.clone()?,
        uid: pod.metadata.uid.clone()?,
        controller: Some(false),
        block_owner_deletion: Some(false),
    })
}

/// What a finished or stuck pod says about itself: container termination or waiting reasons.
pub fn describe(pod: &Pod) -> String {
    let Some(status) = &pod.status else {
        return "no status yet".to_owned();
    };
    let mut parts = vec![format!(
        "phase {}",
        status.phase.as_deref().unwrap_or("Unknown")
    )];
    for c in status.container_statuses.iter().flatten() {
        let Some(state) = &c.state else { continue };
        if let Some(t) = &state.terminated {
            parts.push(format!(
                "container {} exited {}{}{}",
                c.name,
                t.exit_code,
                t.reason
                    .as_ref()
                    .map_or_else(String::new, |r| format!(" ({r})")),
                t.message
                    .as_ref()
                    .map_or_else(String::new, |m| format!(": {m}"))
            ));
        } else if let Some(w) = &state.waiting {
            parts.push(format!(
                "container {} waiting: {}{}",
                c.name,
                w.reason.as_deref().unwrap_or("unknown"),
                w.message
                    .as_ref()
                    .map_or_else(String::new, |m| format!(" ({m})"))
            ));
        }
    }
    if let Some(message) = &status.message {
        parts.push(message.clone());
    }
    parts.join(", ")
}

fn api_failure(what: String) -> impl FnOnce(kube::Error) -> Failed {
    move |e| Failed::new(reason::API_ERROR, format!("{what}: {}", api_error(&e)))
}

/// Deletes this node's previous pods of the workload, creates a new one and waits until it
/// succeeds (`WorkloadFailed` when it fails, `WorkloadTimeout` after `timeout`).
pub async fn run(
    pods: &Api<Pod>,
    pod: &Pod,
    node: &str,
    timeout: Duration,
    poll: Duration,
) -> Result<String, Failed> {
    let app = pod.labels().get(labels::APP).cloned().unwrap_or_default();
    let previous = pods
        .list(
            &ListParams::default()
                .labels(&format!("{}={app}", labels::APP))
                .fields(&format!("spec.nodeName={node}")),
        )
        .await
        .map_err(api_failure(format!("listing previous {app} pods")))?;
    for old in previous {
        let name = old.name_any();
        match pods
            .delete(&name, &DeleteParams::background().grace_period(0))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(api_failure(format!("deleting previous pod {name}"))(e)),
        }
    }
    let created = pods
        .create(&PostParams::default(), pod)
        .await
        .map_err(api_failure(format!("creating a {app} pod")))?;
    let name = created.name_any();
    let namespace = created.namespace().unwrap_or_default();
    info!(pod = %name, "workload pod created, waiting for it to succeed");
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let current = pods
            .get(&name)
            .await
            .map_err(api_failure(format!("getting pod {namespace}/{name}")))?;
        match current.status.as_ref().and_then(|s| s.phase.as_deref()) {
            Some("Succeeded") => return Ok(name),
            Some("Failed") => {
                return Err(Failed::new(
                    reason::WORKLOAD_FAILED,
                    format!("pod {namespace}/{name} failed: {}", describe(&current)),
                ));
            }
            _ if tokio::time::Instant::now() >= deadline => {
                return Err(Failed::new(
                    reason::WORKLOAD_TIMEOUT,
                    format!(
                        "pod {namespace}/{name} did not succeed within {}s: {}",
                        timeout.as_secs(),
                        describe(&current)
                    ),
                ));
            }
            _ => tokio::time::sleep(poll).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> WorkloadSettings {
        WorkloadSettings {
            pull_policy: Some("IfNotPresent".into()),
            pull_secrets: vec!["regcred".into()],
            runtime_class: Some("nvidia".into()),
            command: vec!["vectorAdd".into()],
            timeout: Duration::from_secs(300),
            ..WorkloadSettings::default()
        }
    }

    #[test]
    fn the_cuda_pod_is_pinned_tolerant_and_sees_all_gpus() {
        let workload = Workload {
            app: "nvidia-cuda-validator",
            container: "cuda-validation",
            image: "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.3.0".into(),
            resource: None,
        };
        let owner = OwnerReference {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: "nvidia-operator-validator-abcde".into(),
            uid: "uid-1".into(),
            ..OwnerReference::default()
        };
        let pod = build(
            &workload,
            "node-1",
            "gpu-operator",
            &settings(),
            Some(owner),
        );
        let value = serde_json::to_value(&pod).unwrap();
        assert_eq!(value["metadata"]["generateName"], "nvidia-cuda-validator-");
        assert_eq!(value["metadata"]["labels"]["app"], "nvidia-cuda-validator");
        assert_eq!(value["metadata"]["ownerReferences"][0]["uid"], "uid-1");
        let spec = &value["spec"];
        assert_eq!(spec["nodeName"], "node-1");
        assert_eq!(spec["restartPolicy"], "Never");
        assert_eq!(spec["runtimeClassName"], "nvidia");
        assert_eq!(spec["tolerations"][0]["operator"], "Exists");
        assert_eq!(spec["imagePullSecrets"][0]["name"], "regcred");
        let c = &spec["containers"][0];
        assert_eq!(c["command"][0], "vectorAdd");
        assert_eq!(c["imagePullPolicy"], "IfNotPresent");
        assert_eq!(
            c["env"],
            serde_json::json!([
                {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"}
            ])
        );
        assert_eq!(c["terminationMessagePolicy"], "FallbackToLogsOnError");
        assert!(c.get("resources").is_none());
    }

    #[test]
    fn the_plugin_pod_requests_one_of_the_resource() {
        let workload = Workload {
            app: "nvidia-device-plugin-validator",
            container: "plugin-validation",
            image: "v".into(),
            resource: Some("nvidia.com/mig-1g.10gb".into()),
        };
        let pod = build(&workload, "n", "ns", &WorkloadSettings::default(), None);
        let value = serde_json::to_value(&pod).unwrap();
        let c = &value["spec"]["containers"][0];
        assert_eq!(c["resources"]["limits"]["nvidia.com/mig-1g.10gb"], "1");
        assert_eq!(c["resources"]["requests"]["nvidia.com/mig-1g.10gb"], "1");
        assert_eq!(
            c["env"],
            serde_json::json!([{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"}]),
            "the plugin gives the pod its GPU"
        );
        assert!(value["metadata"].get("ownerReferences").is_none());
        assert!(value["spec"].get("imagePullSecrets").is_none());
    }

    #[test]
    fn describe_names_the_failure() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "status": {"phase": "Failed", "containerStatuses": [{
                "name": "cuda-validation", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": 1, "reason": "Error", "message": "CUDA error: no device"}}
            }]}
        }))
        .unwrap();
        assert_eq!(
            describe(&pod),
            "phase Failed, container cuda-validation exited 1 (Error): CUDA error: no device"
        );
        let pending: Pod = serde_json::from_value(serde_json::json!({
            "status": {"phase": "Pending", "containerStatuses": [{
                "name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": "ImagePullBackOff"}}
            }]}
        }))
        .unwrap();
        assert_eq!(
            describe(&pending),
            "phase Pending, container c waiting: ImagePullBackOff"
        );
        assert_eq!(describe(&Pod::default()), "no status yet");
    }

    #[test]
    fn owner_reference_needs_name_and_uid() {
        let mut pod = Pod::default();
        assert_eq!(owner_reference(&pod), None);
        pod.metadata.name = Some("p".into());
        pod.metadata.uid = Some("u".into());
        let owner = owner_reference(&pod).unwrap();
        assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("Pod", "p"));
    }
}
