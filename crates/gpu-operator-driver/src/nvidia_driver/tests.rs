//! The NVIDIADriver's driver: disabled unless the ClusterPolicy opts in, NVIDIA's per-CR names and
//! labels, the CR's nodes and pod settings over the ClusterPolicy's shared ones, and what each
//! driver type changes.

use gpu_operator_api::{ClusterPolicySpec, labels};
use gpu_operator_core::{cache::facts::ClusterFacts, fixtures};

use super::*;

fn profile(name: &str) -> ClusterFacts {
    fixtures::profiles()
        .into_iter()
        .find(|p| p.name == name)
        .unwrap()
        .facts
}

fn opted_in() -> ClusterPolicySpec {
    let mut policy = ClusterPolicySpec::default();
    policy.driver.use_nvidia_driver_crd = Some(true);
    policy
}

fn cr(name: &str, uid: &str, spec: serde_json::Value) -> NvidiaDriver {
    let mut spec = spec;
    if spec.get("image").is_none() {
        spec["image"] = "nvcr.io/nvidia/driver:595.91.07".into();
    }
    let mut cr = NvidiaDriver::new(name, serde_json::from_value(spec).unwrap());
    cr.metadata.uid = Some(uid.to_owned());
    cr
}

/// Validates `cr` on `facts` whose GPU nodes are all `cr`'s (the owner label on each).
fn run(
    cr: &NvidiaDriver,
    policy: Option<&ClusterPolicySpec>,
    facts: &ClusterFacts,
) -> Result<Option<Input>, Error> {
    let name = cr.metadata.name.clone().unwrap_or_default();
    let facts = &fixtures::served_by(facts.clone(), &name);
    let image_env = |name: &str| {
        (name == "DRIVER_MANAGER_IMAGE")
            .then(|| "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0".to_owned())
    };
    let cluster = Cluster {
        namespace: "gpu-operator",
        facts,
        image_env: &image_env,
        config_maps: &|_| None,
        policy,
        server: gpu_operator_core::cache::server_facts::ServerFacts::unknown(),
    };
    NvidiaDriverOperand::validate(cr, &cluster)
}

fn disabled_because(policy: Option<&ClusterPolicySpec>) -> String {
    let facts = ClusterFacts::default();
    let cluster = Cluster {
        namespace: "gpu-operator",
        facts: &facts,
        image_env: &|_| None,
        config_maps: &|_| None,
        policy,
        server: gpu_operator_core::cache::server_facts::ServerFacts::unknown(),
    };
    NvidiaDriverOperand::disabled_because(&cr("a", "u1", serde_json::json!({})), &cluster).unwrap()
}

fn render(cr: &NvidiaDriver, policy: &ClusterPolicySpec, facts: &ClusterFacts) -> Children {
    NvidiaDriverOperand::render(&run(cr, Some(policy), facts).unwrap().unwrap())
}

#[test]
fn daemonsets_only_for_the_oses_of_its_own_nodes() {
    let facts = profile("ubuntu22.04-two-kernels");
    let a = cr("a", "u1", serde_json::json!({}));
    let image_env =
        |_: &str| Some("nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0".to_owned());
    let validate = |facts: &ClusterFacts| {
        let cluster = Cluster {
            namespace: "gpu-operator",
            facts,
            image_env: &image_env,
            config_maps: &|_| None,
            policy: Some(&opted_in()),
            server: gpu_operator_core::cache::server_facts::ServerFacts::unknown(),
        };
        NvidiaDriverOperand::validate(&a, &cluster)
            .unwrap()
            .unwrap()
    };
    assert!(
        validate(&facts).pools.is_empty(),
        "no node is its yet: no DaemonSet"
    );
    let other = fixtures::served_by(facts.clone(), "b");
    assert!(validate(&other).pools.is_empty(), "the nodes are b's");
    assert_eq!(validate(&fixtures::served_by(facts, "a")).pools.len(), 1);
}

fn pod(ds: &DaemonSet) -> &k8s_openapi::api::core::v1::PodSpec {
    ds.spec.as_ref().unwrap().template.spec.as_ref().unwrap()
}

#[test]
fn nothing_is_deployed_unless_the_cluster_policy_opts_in() {
    let facts = profile("h100-ubuntu22.04-containerd");
    let a = cr("a", "u1", serde_json::json!({}));
    assert!(run(&a, None, &facts).unwrap().is_none());
    assert!(disabled_because(None).contains("no ClusterPolicy"));
    let plain = ClusterPolicySpec::default();
    assert!(run(&a, Some(&plain), &facts).unwrap().is_none());
    assert!(disabled_because(Some(&plain)).contains("driver.useNvidiaDriverCRD: true"));
    let mut off = opted_in();
    off.driver.enabled = Some(false);
    assert!(run(&a, Some(&off), &facts).unwrap().is_none());
    assert!(disabled_because(Some(&off)).contains("driver.enabled: false"));
    assert!(run(&a, Some(&opted_in()), &facts).unwrap().is_some());
}

#[test]
fn the_cluster_policys_driver_says_nvidia_drivers_manage_the_drivers() {
    let facts = ClusterFacts::default();
    let cluster = Cluster {
        namespace: "gpu-operator",
        facts: &facts,
        image_env: &|_| None,
        config_maps: &|_| None,
        policy: None,
        server: gpu_operator_core::cache::server_facts::ServerFacts::unknown(),
    };
    let because = Driver::disabled_because(&opted_in(), &cluster).unwrap();
    assert!(
        because.contains("managed by NVIDIADriver objects"),
        "{because}"
    );
    assert!(Driver::validate(&opted_in(), &cluster).unwrap().is_none());
    assert!(Driver::disabled_because(&ClusterPolicySpec::default(), &cluster).is_none());
    // It keeps what the NVIDIADrivers' DaemonSets use, and renders no DaemonSet.
    let kept = Driver::render_disabled(&opted_in(), &cluster);
    assert!(kept.daemonsets.is_empty());
    assert_eq!(
        kept.service_accounts[0].metadata.name.as_deref(),
        Some(crate::SERVICE_ACCOUNT)
    );
    assert_eq!(
        kept.config_maps[0].metadata.name.as_deref(),
        Some(crate::STARTUP_PROBE_CONFIG_MAP)
    );
    assert_eq!(kept.cluster_role_bindings.len(), 1);
    let mut off = opted_in();
    off.driver.enabled = Some(false);
    assert_eq!(Driver::render_disabled(&off, &cluster).len(), 0);
}

#[test]
fn the_driver_changes_hands_leaving_the_running_pods_only_between_the_two_owners() {
    let facts = ClusterFacts::default();
    let a = cr("a", "u1", serde_json::json!({}));
    let mut off = opted_in();
    off.driver.enabled = Some(false);
    let plain = ClusterPolicySpec::default();
    // (ClusterPolicy, whether its driver hands over, whether an NVIDIADriver's does): by hand.
    let table = [
        (Some(&plain), false, true),
        (Some(&opted_in()), true, false),
        (Some(&off), false, false),
        (None, false, false),
    ];
    for (policy, by_policy, by_cr) in table {
        let cluster = Cluster {
            namespace: "gpu-operator",
            facts: &facts,
            image_env: &|_| None,
            config_maps: &|_| None,
            policy,
            server: gpu_operator_core::cache::server_facts::ServerFacts::unknown(),
        };
        let spec = policy.cloned().unwrap_or_default();
        assert_eq!(
            Driver::hands_over(&spec, &cluster),
            by_policy,
            "ClusterPolicy's driver, {policy:?}"
        );
        assert_eq!(
            NvidiaDriverOperand::hands_over(&a, &cluster),
            by_cr,
            "NVIDIADriver's, {policy:?}"
        );
    }
}

#[test]
fn daemonsets_are_named_after_the_cr_and_select_its_nodes() {
    let facts = profile("h100-ubuntu22.04-containerd");
    let a = cr(
        "a",
        "u1",
        serde_json::json!({ "nodeSelector": { "pool": "a" } }),
    );
    let children = render(&a, &opted_in(), &facts);
    let [ds] = children.daemonsets.as_slice() else {
        panic!("one DaemonSet per OS: {:?}", children.daemonsets.len())
    };
    assert_eq!(
        ds.metadata.name.as_deref(),
        Some("nvidia-gpu-driver-a-ubuntu22.04")
    );
    let selector = pod(ds).node_selector.as_ref().unwrap();
    assert_eq!(selector["nvidia.com/gpu-operator.driver.owner"], "a");
    assert!(
        !selector.contains_key("pool"),
        "its nodes are those labelled its own"
    );
    assert_eq!(selector["nvidia.com/gpu.deploy.driver"], "true");
    assert_eq!(selector[labels::NFD_OS_RELEASE_ID], "ubuntu");
    let app = &ds
        .spec
        .as_ref()
        .unwrap()
        .selector
        .match_labels
        .as_ref()
        .unwrap()["app"];
    assert!(app.starts_with("nvidia-gpu-driver-ubuntu22.04-"), "{app}");
    assert!(app.len() <= LABEL_MAX);
    let template = ds
        .spec
        .as_ref()
        .unwrap()
        .template
        .metadata
        .as_ref()
        .unwrap();
    assert_eq!(&template.labels.as_ref().unwrap()["app"], app);
    assert_eq!(
        template.labels.as_ref().unwrap()[labels::APP_COMPONENT],
        "nvidia-driver"
    );
    // Only DaemonSets: the ServiceAccount, RBAC and ConfigMap they use are the ClusterPolicy's.
    assert_eq!(
        pod(ds).service_account_name.as_deref(),
        Some(crate::SERVICE_ACCOUNT)
    );
    assert_eq!(
        (children.len(), children.daemonsets.len()),
        (1, 1),
        "{children:?}"
    );

    // Another CR: other names, another app label, no object in common.
    let b = cr(
        "b",
        "u2",
        serde_json::json!({ "nodeSelector": { "pool": "b" } }),
    );
    let other = render(&b, &opted_in(), &facts);
    let ds_b = &other.daemonsets[0];
    assert_eq!(
        ds_b.metadata.name.as_deref(),
        Some("nvidia-gpu-driver-b-ubuntu22.04")
    );
    assert_ne!(
        &ds_b
            .spec
            .as_ref()
            .unwrap()
            .selector
            .match_labels
            .as_ref()
            .unwrap()["app"],
        app
    );
    assert_eq!(
        pod(ds_b).node_selector.as_ref().unwrap()["nvidia.com/gpu-operator.driver.owner"],
        "b"
    );
}

#[test]
fn the_driver_is_the_cluster_policys_driver_with_the_crs_sections() {
    let facts = profile("a100-rhel9.4-crio");
    let mut policy = opted_in();
    policy.daemonsets.priority_class_name = Some("shared-class".into());
    let a = cr(
        "a",
        "u1",
        serde_json::json!({ "repository": "registry.local", "image": "driver", "version": "580.1" }),
    );
    let children = render(&a, &policy, &facts);
    let ds = &children.daemonsets[0];
    assert_eq!(
        ds.metadata.name.as_deref(),
        Some("nvidia-gpu-driver-a-rhel9")
    );
    let driver = pod(ds)
        .containers
        .iter()
        .find(|c| c.name == "nvidia-driver-ctr")
        .unwrap();
    assert_eq!(
        driver.image.as_deref(),
        Some("registry.local/driver:580.1-rhel9")
    );
    assert!(driver.startup_probe.is_some());
    assert_eq!(pod(ds).priority_class_name.as_deref(), Some("shared-class"));

    let own = cr(
        "b",
        "u2",
        serde_json::json!({
            "priorityClassName": "own-class",
            "tolerations": [{ "key": "pool", "operator": "Exists" }],
            "labels": { "team": "ml" },
            "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{ "matchExpressions": [
                    { "key": "zone", "operator": "In", "values": ["z1"] }
                ] }]
            } },
        }),
    );
    let children = render(&own, &policy, &facts);
    let pod = pod(&children.daemonsets[0]);
    assert_eq!(pod.priority_class_name.as_deref(), Some("own-class"));
    let tolerations = pod.tolerations.as_ref().unwrap();
    assert_eq!(tolerations[0].key.as_deref(), Some("nvidia.com/gpu"));
    assert_eq!(tolerations.last().unwrap().key.as_deref(), Some("pool"));
    assert!(pod.affinity.as_ref().unwrap().node_affinity.is_some());
    assert!(pod.affinity.as_ref().unwrap().pod_anti_affinity.is_some());
    let template = children.daemonsets[0]
        .spec
        .as_ref()
        .unwrap()
        .template
        .clone();
    assert_eq!(template.metadata.unwrap().labels.unwrap()["team"], "ml");
}

#[test]
fn driver_types_name_and_shape_the_daemonset_as_nvidias() {
    let facts = profile("h100-ubuntu22.04-containerd");
    let vgpu = cr("v", "u1", serde_json::json!({ "driverType": "vgpu" }));
    let children = render(&vgpu, &opted_in(), &facts);
    assert_eq!(
        children.daemonsets[0].metadata.name.as_deref(),
        Some("nvidia-vgpu-driver-v-ubuntu22.04")
    );

    let host = cr(
        "h",
        "u2",
        serde_json::json!({ "driverType": "vgpu-host-manager" }),
    );
    let children = render(&host, &opted_in(), &facts);
    let ds = &children.daemonsets[0];
    assert_eq!(
        ds.metadata.name.as_deref(),
        Some("nvidia-vgpu-manager-h-ubuntu22.04")
    );
    let app = &ds
        .spec
        .as_ref()
        .unwrap()
        .selector
        .match_labels
        .as_ref()
        .unwrap()["app"];
    assert!(
        app.starts_with("nvidia-vgpu-host-manager-driver-ubuntu22.04-"),
        "{app}"
    );
    let pod = pod(ds);
    let selector = pod.node_selector.as_ref().unwrap();
    assert_eq!(selector["nvidia.com/gpu.deploy.vgpu-manager"], "true");
    assert!(!selector.contains_key("nvidia.com/gpu.deploy.driver"));
    assert_eq!(pod.termination_grace_period_seconds, Some(120));
    let driver = pod
        .containers
        .iter()
        .find(|c| c.name == "nvidia-driver-ctr")
        .unwrap();
    assert!(driver.startup_probe.is_none());
    let mounts: Vec<&str> = driver
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| m.mount_path.as_str())
        .collect();
    assert!(mounts.contains(&"/sys/fs/cgroup") && mounts.contains(&"/dev/vfio"));
}

#[test]
fn precompiled_pools_are_per_kernel_with_the_crs_kernel_module_type() {
    let facts = profile("ubuntu22.04-two-kernels");
    let a = cr(
        "a",
        "u1",
        serde_json::json!({
            "usePrecompiled": true,
            "repository": "nvcr.io/nvidia",
            "image": "driver",
            "version": "570",
            "kernelModuleType": "open",
        }),
    );
    let input = run(&a, Some(&opted_in()), &facts).unwrap().unwrap();
    let names: Vec<&str> = input.pools.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "nvidia-gpu-driver-a-ubuntu22.04-6.8.0-1021-aws",
            "nvidia-gpu-driver-a-ubuntu22.04-6.8.0-1024-aws"
        ]
    );
    let apps = &input.nvidia_driver.as_ref().unwrap().apps;
    assert_ne!(apps[names[0]], apps[names[1]], "the kernel is in the hash");
    assert_eq!(
        input.pools[0].driver_image,
        "nvcr.io/nvidia/driver:570-6.8.0-1021-aws-ubuntu22.04"
    );
    assert_eq!(
        input.kernel_module_type,
        gpu_operator_api::spec::KernelModuleType::Open
    );
    assert!(input.config.precompiled);
}

#[test]
fn the_app_hash_is_fnv1a_in_the_safe_alphabet() {
    // FNV-1a 32 of "" is 2166136261: each digit spelled by its byte modulo the alphabet.
    assert_eq!(safe_hash(""), "65bb57b6b5");
    let long = app_label(
        DriverType::VgpuHostManager,
        "u",
        &Pool {
            name: String::new(),
            os: gpu_operator_core::cache::facts::OsRelease {
                id: "averyveryverylongosname".into(),
                version_id: "1234567890.1234567890".into(),
            },
            kernel: None,
            runtime: gpu_operator_core::build::runtime_class::ContainerRuntime::Containerd,
            node_selector: BTreeMap::new(),
            driver_image: String::new(),
            gds_image: None,
            gdrcopy_image: None,
        },
    );
    assert!(long.len() <= LABEL_MAX, "{long}");
}
