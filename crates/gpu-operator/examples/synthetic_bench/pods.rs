//! The operand pods of a GPU node as the API server sends them to the driver upgrade's pod watch:
//! one driver pod and one validator pod per GPU node, made from the DaemonSets the driver and
//! validator operands render (the template's labels, annotations and spec, plus what the
//! DaemonSet controller, the scheduler, admission and the kubelet add: owner reference,
//! `controller-revision-hash`, node affinity, tolerations, the service account token volume,
//! status with conditions and container statuses).

use std::collections::BTreeMap;

use gpu_operator_driver::in_sync::TEMPLATE_GENERATION_LABEL;
use k8s_openapi::{
    api::{
        apps::v1::DaemonSet,
        core::v1::{
            Affinity, Container, ContainerState, ContainerStateRunning, ContainerStatus, KeyToPath,
            NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
            PodCondition, PodIP, PodSpec, PodStatus, ProjectedVolumeSource,
            ServiceAccountTokenProjection, Toleration, Volume, VolumeMount, VolumeProjection,
        },
    },
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference},
};
use serde_json::Value;

use crate::fleet::{CREATED, time};

/// The DaemonSets among rendered objects `objects` whose `app` label is `app`.
pub fn daemonsets(objects: &[Value], app: &str) -> Vec<DaemonSet> {
    objects
        .iter()
        .filter(|o| o["kind"] == "DaemonSet")
        .filter_map(|o| serde_json::from_value::<DaemonSet>(o.clone()).ok())
        .filter(|ds| {
            ds.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("app"))
                .is_some_and(|a| a == app)
        })
        .map(|mut ds| {
            ds.metadata.uid = Some(format!(
                "ds-{}",
                ds.metadata.name.clone().unwrap_or_default()
            ));
            ds.metadata.generation = Some(1);
            ds
        })
        .collect()
}

/// The DaemonSet of `daemonsets` that runs on a node with `labels` (its template's node selector
/// matches), if any.
pub fn for_node<'a>(
    daemonsets: &'a [DaemonSet],
    labels: &BTreeMap<String, String>,
) -> Option<&'a DaemonSet> {
    daemonsets.iter().find(|ds| {
        ds.spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .and_then(|s| s.node_selector.as_ref())
            .is_none_or(|selector| selector.iter().all(|(k, v)| labels.get(k) == Some(v)))
    })
}

/// The pod `ds` runs on node `node`, the `index`th pod of the fleet.
pub fn pod(ds: &DaemonSet, node: &str, index: u64) -> Pod {
    let ds_name = ds.metadata.name.clone().unwrap_or_default();
    let template = ds
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let mut labels = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    labels.insert(
        "controller-revision-hash".to_owned(),
        "6d8f7c9b54".to_owned(),
    );
    labels.insert(TEMPLATE_GENERATION_LABEL.to_owned(), "1".to_owned());
    // Five letters, as the DaemonSet controller's random suffix (hex digits shifted past `f`).
    let suffix: String = format!("{index:05x}")
        .chars()
        .map(|c| match c.to_digit(10) {
            Some(d) => char::from(b'g' + u8::try_from(d).unwrap_or_default()),
            None => c,
        })
        .collect();
    let mut spec = template.spec.unwrap_or_default();
    spec.node_name = Some(node.to_owned());
    spec.affinity = Some(Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_fields: Some(vec![NodeSelectorRequirement {
                        key: "metadata.name".to_owned(),
                        operator: "In".to_owned(),
                        values: Some(vec![node.to_owned()]),
                    }]),
                    ..NodeSelectorTerm::default()
                }],
            }),
            ..NodeAffinity::default()
        }),
        ..Affinity::default()
    });
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/disk-pressure",
        "node.kubernetes.io/memory-pressure",
        "node.kubernetes.io/pid-pressure",
        "node.kubernetes.io/unschedulable",
    ] {
        tolerations.push(Toleration {
            key: Some(key.to_owned()),
            operator: Some("Exists".to_owned()),
            effect: Some("NoSchedule".to_owned()),
            ..Toleration::default()
        });
    }
    admitted(&mut spec);
    let status = status(&spec, index);
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("{ds_name}-{suffix}")),
            generate_name: Some(format!("{ds_name}-")),
            namespace: Some("gpu-operator".to_owned()),
            uid: Some(format!("11111111-0000-0000-0000-{index:012}")),
            resource_version: Some((1_000_000 + index).to_string()),
            creation_timestamp: time(CREATED),
            labels: Some(labels),
            annotations: template.metadata.and_then(|m| m.annotations),
            owner_references: Some(vec![OwnerReference {
                api_version: "apps/v1".to_owned(),
                kind: "DaemonSet".to_owned(),
                name: ds_name,
                uid: ds.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: Some(status),
    }
}

/// What admission adds: the service account token volume, mounted in every container.
fn admitted(spec: &mut PodSpec) {
    const TOKEN: &str = "kube-api-access-x7k2p";
    spec.volumes.get_or_insert_with(Vec::new).push(Volume {
        name: TOKEN.to_owned(),
        projected: Some(ProjectedVolumeSource {
            default_mode: Some(420),
            sources: Some(vec![
                VolumeProjection {
                    service_account_token: Some(ServiceAccountTokenProjection {
                        expiration_seconds: Some(3607),
                        path: "token".to_owned(),
                        ..ServiceAccountTokenProjection::default()
                    }),
                    ..VolumeProjection::default()
                },
                VolumeProjection {
                    config_map: Some(k8s_openapi::api::core::v1::ConfigMapProjection {
                        name: "kube-root-ca.crt".to_owned(),
                        items: Some(vec![KeyToPath {
                            key: "ca.crt".to_owned(),
                            path: "ca.crt".to_owned(),
                            mode: None,
                        }]),
                        optional: None,
                    }),
                    ..VolumeProjection::default()
                },
            ]),
        }),
        ..Volume::default()
    });
    let mount = |c: &mut Container| {
        c.volume_mounts
            .get_or_insert_with(Vec::new)
            .push(VolumeMount {
                name: TOKEN.to_owned(),
                mount_path: "/var/run/secrets/kubernetes.io/serviceaccount".to_owned(),
                read_only: Some(true),
                ..VolumeMount::default()
            });
        c.termination_message_path = Some("/dev/termination-log".to_owned());
        c.termination_message_policy = Some("File".to_owned());
        c.image_pull_policy
            .get_or_insert_with(|| "IfNotPresent".to_owned());
    };
    spec.containers.iter_mut().for_each(mount);
    spec.init_containers.iter_mut().flatten().for_each(mount);
    spec.dns_policy
        .get_or_insert_with(|| "ClusterFirst".to_owned());
    spec.scheduler_name = Some("default-scheduler".to_owned());
    spec.enable_service_links = Some(true);
    spec.preemption_policy = Some("PreemptLowerPriority".to_owned());
    spec.priority = Some(2_000_001_000);
    spec.termination_grace_period_seconds.get_or_insert(30);
}

/// A running, Ready pod's status: conditions, IPs and one status per container.
fn status(spec: &PodSpec, index: u64) -> PodStatus {
    let condition = |type_: &str| PodCondition {
        type_: type_.to_owned(),
        status: "True".to_owned(),
        last_transition_time: time("2026-11-21T09:31:00Z"),
        ..PodCondition::default()
    };
    let container = |c: &Container| ContainerStatus {
        name: c.name.clone(),
        image: c.image.clone().unwrap_or_default(),
        image_id: format!(
            "{}@sha256:{index:064x}",
            c.image.as_deref().unwrap_or_default()
        ),
        container_id: Some(format!("containerd://{index:064x}")),
        ready: true,
        started: Some(true),
        restart_count: 0,
        state: Some(ContainerState {
            running: Some(ContainerStateRunning {
                started_at: time("2026-11-21T09:30:30Z"),
            }),
            ..ContainerState::default()
        }),
        ..ContainerStatus::default()
    };
    let ip = format!("10.244.{}.{}", index / 250 % 250, index % 250);
    PodStatus {
        phase: Some("Running".to_owned()),
        conditions: Some(
            [
                "PodReadyToStartContainers",
                "Initialized",
                "Ready",
                "ContainersReady",
                "PodScheduled",
            ]
            .into_iter()
            .map(condition)
            .collect(),
        ),
        host_ip: Some(ip.clone()),
        pod_ip: Some(ip.clone()),
        pod_ips: Some(vec![PodIP { ip }]),
        start_time: time("2026-11-21T09:30:00Z"),
        qos_class: Some("BestEffort".to_owned()),
        container_statuses: Some(spec.containers.iter().map(container).collect()),
        init_container_statuses: spec
            .init_containers
            .as_ref()
            .map(|cs| cs.iter().map(container).collect()),
        ..PodStatus::default()
    }
}
