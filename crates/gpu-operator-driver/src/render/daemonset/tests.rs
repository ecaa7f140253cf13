//! Rules of the driver DaemonSet: never RollingUpdate, manager image and env, RDMA/GDS/GDRCopy
//! flags and sidecars, probes, config mounts, the digest.

use gpu_operator_api::{
    ClusterPolicySpec,
    spec::{
        ContainerProbeSpec, DaemonsetsSpec, DriverManagerSpec, EnvVar, GdsSpec, GpuDirectRdmaSpec,
        KernelModuleConfigSpec, RollingUpdateSpec, UpdateStrategy,
    },
};
use gpu_operator_core::{build::runtime_class::ContainerRuntime, cache::facts::OsRelease};
use k8s_openapi::api::core::v1::{Container, PodSpec};

use super::*;

fn pool() -> Pool {
    Pool {
        name: DAEMONSET.into(),
        os: OsRelease {
            id: "ubuntu".into(),
            version_id: "22.04".into(),
        },
        kernel: None,
        runtime: ContainerRuntime::Containerd,
        node_selector: BTreeMap::new(),
        driver_image: "nvcr.io/nvidia/driver:595.91.07-ubuntu22.04".into(),
        gds_image: None,
        gdrcopy_image: None,
    }
}

fn render_pool(spec: &ClusterPolicySpec, pool: &Pool) -> DaemonSet {
    let input = Input::new(
        spec,
        "gpu-operator".into(),
        "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0".into(),
        vec![pool.clone()],
        None,
    );
    build(&input, pool)
}

fn pod(spec: &ClusterPolicySpec) -> PodSpec {
    render_pool(spec, &pool())
        .spec
        .unwrap()
        .template
        .spec
        .unwrap()
}

fn container<'a>(pod: &'a PodSpec, name: &str) -> &'a Container {
    pod.init_containers
        .iter()
        .flatten()
        .chain(&pod.containers)
        .find(|c| c.name == name)
        .unwrap()
}

fn env(c: &Container, name: &str) -> Option<String> {
    c.env
        .iter()
        .flatten()
        .find(|e| e.name == name)
        .and_then(|e| e.value.clone())
}

#[test]
fn the_driver_is_never_rolling_update() {
    let spec = ClusterPolicySpec {
        daemonsets: DaemonsetsSpec {
            update_strategy: Some(UpdateStrategy::RollingUpdate),
            rolling_update: Some(RollingUpdateSpec {
                max_unavailable: Some("50%".into()),
            }),
            ..DaemonsetsSpec::default()
        },
        ..ClusterPolicySpec::default()
    };
    let ds = render_pool(&spec, &pool());
    let strategy = ds.spec.unwrap().update_strategy.unwrap();
    assert_eq!(strategy.type_.as_deref(), Some("OnDelete"));
    assert!(strategy.rolling_update.is_none());
}

#[test]
fn names_labels_and_placement_follow_nvidia() {
    let ds = render_pool(&ClusterPolicySpec::default(), &pool());
    assert_eq!(ds.metadata.name.as_deref(), Some(DAEMONSET));
    let labels = ds.metadata.labels.clone().unwrap();
    assert_eq!(labels["app"], DAEMONSET);
    assert_eq!(labels["app.kubernetes.io/component"], "nvidia-driver");
    assert_eq!(labels[PRECOMPILED_LABEL], "false");
    let pod = ds.spec.unwrap().template.spec.unwrap();
    assert_eq!(pod.service_account_name.as_deref(), Some("nvidia-driver"));
    assert_eq!(pod.host_pid, Some(true));
    assert_eq!(
        pod.node_selector.unwrap()["nvidia.com/gpu.deploy.driver"],
        "true"
    );
    assert!(
        pod.runtime_class_name.is_none(),
        "the driver runs before the NVIDIA runtime"
    );
    assert!(pod.affinity.unwrap().pod_anti_affinity.is_some());
    assert_eq!(
        pod.containers[0].image.as_deref(),
        Some("nvcr.io/nvidia/driver:595.91.07-ubuntu22.04")
    );
}

#[test]
fn a_precompiled_pool_keeps_the_app_label_and_selects_its_kernel() {
    let mut kernel_pool = pool();
    kernel_pool.name = format!("{DAEMONSET}-6.8.0-1021-aws-ubuntu22.04");
    kernel_pool.kernel = Some("6.8.0-1021-aws".into());
    kernel_pool.node_selector =
        crate::pools::node_selector(&kernel_pool.os, kernel_pool.kernel.as_deref());
    let ds = render_pool(&ClusterPolicySpec::default(), &kernel_pool);
    assert_eq!(ds.metadata.name, Some(kernel_pool.name.clone()));
    assert_eq!(
        ds.metadata.labels.as_ref().unwrap()[PRECOMPILED_LABEL],
        "true"
    );
    let spec = ds.spec.unwrap();
    assert_eq!(spec.selector.match_labels.unwrap()["app"], DAEMONSET);
    let selector = spec.template.spec.unwrap().node_selector.unwrap();
    assert_eq!(
        selector["feature.node.kubernetes.io/kernel-version.full"],
        "6.8.0-1021-aws"
    );
}

#[test]
fn the_manager_image_env_and_user_env_follow_nvidia() {
    let mut spec = ClusterPolicySpec::default();
    spec.driver.manager = Some(DriverManagerSpec {
        env: Some(vec![EnvVar::new("ENABLE_AUTO_DRAIN", "true")]),
        ..DriverManagerSpec::default()
    });
    spec.driver.rdma = Some(GpuDirectRdmaSpec {
        enabled: Some(true),
        use_host_mofed: Some(true),
    });
    let pod = pod(&spec);
    let manager = container(&pod, MANAGER_CONTAINER);
    assert_eq!(
        manager.image.as_deref(),
        Some("nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0")
    );
    assert_eq!(env(manager, "ENABLE_AUTO_DRAIN").as_deref(), Some("true"));
    assert_eq!(
        env(manager, "ENABLE_GPU_POD_EVICTION").as_deref(),
        Some("true")
    );
    assert_eq!(
        env(manager, "GPU_DIRECT_RDMA_ENABLED").as_deref(),
        Some("true")
    );
    assert_eq!(env(manager, "USE_HOST_MOFED").as_deref(), Some("true"));
    let peermem = container(&pod, "nvidia-peermem-ctr");
    assert_eq!(peermem.image, container(&pod, DRIVER_CONTAINER).image);
    let ofed = pod
        .volumes
        .unwrap()
        .into_iter()
        .find(|v| v.name == "mlnx-ofed-usr-src");
    assert_eq!(ofed.unwrap().host_path.unwrap().path, "/usr/src");
}

#[test]
fn kernel_module_type_and_module_flags_reach_the_driver_container() {
    let mut spec = ClusterPolicySpec::default();
    let driver = container(&pod(&spec), DRIVER_CONTAINER).clone();
    assert_eq!(env(&driver, "KERNEL_MODULE_TYPE").as_deref(), Some("auto"));
    assert_eq!(env(&driver, "GDS_ENABLED"), None);
    spec.driver.kernel_module_type = Some(gpu_operator_api::spec::KernelModuleType::Open);
    spec.gds = Some(GdsSpec {
        enabled: Some(true),
        ..GdsSpec::default()
    });
    let mut gds_pool = pool();
    gds_pool.gds_image = Some("nvcr.io/nvidia/cloud-native/nvidia-fs:2.20.5-ubuntu22.04".into());
    let pod = render_pool(&spec, &gds_pool)
        .spec
        .unwrap()
        .template
        .spec
        .unwrap();
    let driver = container(&pod, DRIVER_CONTAINER);
    assert_eq!(env(driver, "KERNEL_MODULE_TYPE").as_deref(), Some("open"));
    assert_eq!(
        env(driver, "OPEN_KERNEL_MODULES_ENABLED").as_deref(),
        Some("true")
    );
    assert_eq!(env(driver, "GDS_ENABLED").as_deref(), Some("true"));
    assert!(pod.containers.iter().any(|c| c.name == "nvidia-fs-ctr"));
}

#[test]
fn probe_settings_replace_the_defaults_they_name() {
    let mut spec = ClusterPolicySpec::default();
    spec.driver.startup_probe = Some(ContainerProbeSpec {
        failure_threshold: Some(300),
        ..ContainerProbeSpec::default()
    });
    spec.driver.liveness_probe = Some(ContainerProbeSpec {
        period_seconds: Some(30),
        ..ContainerProbeSpec::default()
    });
    let pod = pod(&spec);
    let driver = container(&pod, DRIVER_CONTAINER);
    let startup = driver.startup_probe.clone().unwrap();
    assert_eq!(startup.failure_threshold, Some(300));
    assert_eq!(startup.initial_delay_seconds, Some(60));
    assert_eq!(
        driver.liveness_probe.clone().unwrap().period_seconds,
        Some(30)
    );
    assert!(driver.readiness_probe.is_none());
}

#[test]
fn kernel_module_config_secret_env_and_entitlements_are_mounted() {
    let mut spec = ClusterPolicySpec::default();
    spec.driver.kernel_module_config = Some(KernelModuleConfigSpec {
        name: Some("kernel-module-params".into()),
    });
    spec.driver.secret_env = Some("driver-secrets".into());
    let mut rhel = pool();
    rhel.os = OsRelease {
        id: "rhel".into(),
        version_id: "9.4".into(),
    };
    let pod = render_pool(&spec, &rhel)
        .spec
        .unwrap()
        .template
        .spec
        .unwrap();
    let driver = container(&pod, DRIVER_CONTAINER);
    let mounts: Vec<String> = driver
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| m.mount_path.clone())
        .collect();
    assert!(mounts.contains(&"/drivers/nvidia.conf".to_owned()));
    assert!(
        mounts.contains(&"/run/secrets/rhsm".to_owned()),
        "RHEL on containerd"
    );
    assert_eq!(
        driver.env_from.clone().unwrap()[0]
            .secret_ref
            .clone()
            .unwrap()
            .name,
        "driver-secrets"
    );
}

#[test]
fn the_config_digest_is_shared_by_manager_and_driver_and_follows_the_install() {
    let a = pod(&ClusterPolicySpec::default());
    let digest = env(container(&a, DRIVER_CONTAINER), digest::ENV).unwrap();
    assert_eq!(
        env(container(&a, MANAGER_CONTAINER), digest::ENV),
        Some(digest.clone())
    );
    let mut labelled = ClusterPolicySpec::default();
    labelled.daemonsets.labels = Some(BTreeMap::from([("team".into(), "ml".into())]));
    assert_eq!(
        env(container(&pod(&labelled), DRIVER_CONTAINER), digest::ENV),
        Some(digest.clone())
    );
    let mut changed = ClusterPolicySpec::default();
    changed.driver.container.env = Some(vec![EnvVar::new("X", "1")]);
    assert_ne!(
        env(container(&pod(&changed), DRIVER_CONTAINER), digest::ENV),
        Some(digest)
    );
}
