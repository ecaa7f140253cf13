//! A driver DaemonSet's pod template depends only on the nodes it runs on. Its pods are replaced
//! only when deleted (`OnDelete`), so a template that changes after its pods started leaves them
//! on the old revision for good: GPU nodes of another OS or runtime joining the fleet (as the node
//! labeller marks them one by one after an install) must not change it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpu_operator_api::{ClusterPolicySpec, labels};
use gpu_operator_core::{
    cache::{
        facts::{ClusterFacts, LiveDaemonSet},
        node_meta::NodeMeta,
        node_runtime::NodeRuntime,
    },
    contract::{Children, Cluster, Operand as _},
};
use gpu_operator_driver::Driver;
use k8s_openapi::api::apps::v1::DaemonSet;

/// GPU nodes as (name, OS id, OS version, containerRuntimeVersion), with the live DaemonSets of
/// `live` (what the previous render created).
fn facts(nodes: &[(&str, &str, &str, &str)], live: &[DaemonSet]) -> ClusterFacts {
    let metas: Vec<NodeMeta> = nodes
        .iter()
        .map(|(name, id, version, _)| {
            NodeMeta::new(
                name,
                &[
                    (labels::GPU_PRESENT, "true"),
                    (labels::NFD_OS_RELEASE_ID, id),
                    (labels::NFD_OS_RELEASE_VERSION_ID, version),
                ],
            )
        })
        .collect();
    let runtimes: Vec<NodeRuntime> = nodes
        .iter()
        .map(|(name, _, _, runtime)| NodeRuntime::new(name, runtime))
        .collect();
    ClusterFacts {
        daemonsets: live
            .iter()
            .map(|ds| (ds.metadata.name.clone().unwrap(), LiveDaemonSet::of(ds)))
            .collect(),
        ..ClusterFacts::from_nodes(&metas, &runtimes)
    }
}

fn render(facts: &ClusterFacts) -> Children {
    let image_env = |name: &str| match name {
        "DRIVER_IMAGE" => Some("nvcr.io/nvidia/driver:595.91.07".to_owned()),
        "DRIVER_MANAGER_IMAGE" => {
            Some("nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0".to_owned())
        }
        _ => None,
    };
    let cluster = Cluster {
        namespace: "gpu-operator",
        facts,
        image_env: &image_env,
        config_maps: &|_| None,
        policy: None,
        server: gpu_operator_core::cache::server_facts::ServerFacts::unknown(),
    };
    Driver::validate(&ClusterPolicySpec::default(), &cluster)
        .unwrap()
        .map(|input| Driver::render(&input))
        .unwrap()
}

const RHEL_CRIO: (&str, &str, &str, &str) = ("a100-0", "rhel", "9.4", "cri-o://1.30.4");
const UBUNTU_CONTAINERD: (&str, &str, &str, &str) =
    ("h100-0", "ubuntu", "22.04", "containerd://1.7.27");

#[test]
fn a_node_of_another_os_and_runtime_joining_leaves_the_first_template_as_it_was() {
    let first = render(&facts(&[RHEL_CRIO], &[]));
    let [rhel] = first.daemonsets.as_slice() else {
        panic!("one OS, one DaemonSet: {:?}", first.daemonsets.len());
    };
    let then = render(&facts(&[RHEL_CRIO, UBUNTU_CONTAINERD], &first.daemonsets));
    assert_eq!(
        then.daemonsets.len(),
        2,
        "the new OS gets its own DaemonSet"
    );
    let still = then
        .daemonsets
        .iter()
        .find(|ds| ds.metadata.name == rhel.metadata.name)
        .expect("the first DaemonSet keeps its name");
    assert_eq!(
        serde_json::to_value(&still.spec.as_ref().unwrap().template).unwrap(),
        serde_json::to_value(&rhel.spec.as_ref().unwrap().template).unwrap(),
        "the RHEL pods' template changed because an Ubuntu containerd node joined"
    );
}

#[test]
fn rhel_gets_the_hosts_entitlements_outside_crio_only() {
    let mounts = |runtime: &str| {
        let children = render(&facts(&[("a100-0", "rhel", "9.4", runtime)], &[]));
        let pod = children.daemonsets[0]
            .spec
            .as_ref()
            .unwrap()
            .template
            .spec
            .clone()
            .unwrap();
        pod.volumes
            .unwrap_or_default()
            .into_iter()
            .filter_map(|v| v.host_path.map(|h| h.path))
            .filter(|path| path.contains("entitlement") || path.contains("rhsm"))
            .collect::<Vec<_>>()
    };
    assert_eq!(mounts("cri-o://1.30.4"), Vec::<String>::new());
    assert_eq!(
        mounts("containerd://1.7.27"),
        ["/etc/pki/entitlement", "/etc/rhsm"]
    );
}
