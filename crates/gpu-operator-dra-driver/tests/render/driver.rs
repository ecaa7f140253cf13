//! The DRA driver against NVIDIA's goldens `gpucluster-dra-driver-{gpus-only,
//! passthrough-support,full-spec}.yaml`.

use serde_json::json;

use crate::*;

const KUBELET_PLUGIN: &str = "nvidia-dra-driver-kubeletplugin";

/// NVIDIA's kubelet plugin env of `gpus`, in order, for the sample (port 51516).
fn nvidias_gpus_env(image: &str, port: &str, gates: &str) -> Vec<(String, String)> {
    [
        ("HTTP_ENDPOINT", ":8080"),
        ("METRICS_PATH", "/metrics"),
        ("LOG_VERBOSITY", "4"),
        ("MASK_NVIDIA_DRIVER_PARAMS", ""),
        ("NVIDIA_VISIBLE_DEVICES", "void"),
        ("CDI_ROOT", "/var/run/cdi"),
        ("HOST_ROOT", "/host"),
        ("NVIDIA_MIG_CONFIG_DEVICES", "all"),
        ("NODE_NAME", "<spec.nodeName>"),
        ("NAMESPACE", "<metadata.namespace>"),
        ("IMAGE_NAME", image),
        (
            "KUBELET_REGISTRAR_DIRECTORY_PATH",
            "/var/lib/kubelet/plugins_registry",
        ),
        ("KUBELET_PLUGINS_DIRECTORY_PATH", "/var/lib/kubelet/plugins"),
        ("HEALTHCHECK_PORT", port),
        ("FEATURE_GATES", gates),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect()
}

#[test]
fn the_sample_renders_nvidias_objects() {
    let children = driver(nvidia_sample());
    assert_eq!(
        names(&children.service_accounts),
        [
            KUBELET_PLUGIN,
            "nvidia-dra-driver-controller",
            "compute-domain-daemon-service-account"
        ]
    );
    assert_eq!(
        names(&children.cluster_roles),
        [
            KUBELET_PLUGIN,
            "nvidia-dra-driver-controller",
            "compute-domain-daemon"
        ]
    );
    assert_eq!(
        names(&children.cluster_role_bindings),
        names(&children.cluster_roles)
    );
    assert_eq!(
        names(&children.roles),
        [
            KUBELET_PLUGIN,
            "nvidia-dra-driver-kubeletplugin-mps",
            "nvidia-dra-driver-kubeletplugin-driver-validation",
            "nvidia-dra-driver-controller"
        ]
    );
    assert_eq!(names(&children.role_bindings), names(&children.roles));
    for binding in &children.role_bindings {
        let subject = &binding.subjects.as_ref().unwrap()[0];
        assert_eq!(subject.namespace.as_deref(), Some("test-operator"));
    }
    let daemon = &children.cluster_role_bindings[2];
    assert_eq!(
        daemon.subjects.as_ref().unwrap()[0].name,
        "compute-domain-daemon-service-account"
    );
    let classes: Vec<(String, String)> = children
        .device_classes
        .iter()
        .map(|c| {
            let selectors = c.spec.selectors.as_ref().unwrap();
            (
                c.metadata.name.clone().unwrap(),
                selectors[0].cel.as_ref().unwrap().expression.clone(),
            )
        })
        .collect();
    let gpu = |kind: &str| {
        format!(
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == '{kind}'"
        )
    };
    let cd = |kind: &str| {
        format!(
            "device.driver == 'compute-domain.nvidia.com' && device.attributes['compute-domain.nvidia.com'].type == '{kind}'"
        )
    };
    assert_eq!(
        classes,
        [
            ("gpu.nvidia.com".to_owned(), gpu("gpu")),
            ("mig.nvidia.com".to_owned(), gpu("mig")),
            ("vfio.gpu.nvidia.com".to_owned(), gpu("vfio")),
            ("compute-domain-daemon.nvidia.com".to_owned(), cd("daemon")),
            (
                "compute-domain-default-channel.nvidia.com".to_owned(),
                format!(
                    "{} && device.attributes['compute-domain.nvidia.com'].id == 0",
                    cd("channel")
                )
            ),
        ]
    );
    assert_eq!(
        names(&children.daemonsets),
        ["nvidia-dra-driver-kubelet-plugin"]
    );
    assert_eq!(
        names(&children.deployments),
        ["nvidia-dra-driver-controller"]
    );
    assert_eq!(
        names(&children.admission_policies),
        ["resourceslices-policy-nvidia-dra-driver"]
    );
}

#[test]
fn the_kubelet_plugin_pod_is_nvidias() {
    let children = driver(nvidia_sample());
    let ds = &children.daemonsets[0];
    let strategy = ds.spec.as_ref().unwrap().update_strategy.as_ref().unwrap();
    assert_eq!(strategy.type_.as_deref(), Some("RollingUpdate"));
    assert_eq!(
        serde_json::to_value(
            strategy
                .rolling_update
                .as_ref()
                .unwrap()
                .max_unavailable
                .as_ref()
        )
        .unwrap(),
        json!("100%")
    );
    let pod = pod(ds);
    assert_eq!(
        pod.node_selector.as_ref().unwrap()["nvidia.com/gpu.deploy.dra-driver"],
        "true"
    );
    assert_eq!(pod.service_account_name.as_deref(), Some(KUBELET_PLUGIN));
    assert_eq!(
        pod.priority_class_name.as_deref(),
        Some("system-node-critical")
    );
    let terms = &pod
        .affinity
        .as_ref()
        .unwrap()
        .node_affinity
        .as_ref()
        .unwrap()
        .required_during_scheduling_ignored_during_execution
        .as_ref()
        .unwrap()
        .node_selector_terms;
    assert_eq!(terms.len(), 3);
    let init = container(pod, "driver-validation");
    assert_eq!(
        init.command.as_deref(),
        Some(&["nvidia-validator".to_owned()][..])
    );
    assert_eq!(
        init.image.as_deref(),
        Some("registry.example.com/validator:v1")
    );
    assert_eq!(
        env(init),
        [
            ("COMPONENT", "driver"),
            ("WITH_WAIT", "true"),
            ("DRIVER_VALIDATION_SKIP_GPU_INIT", "true"),
            ("DISABLE_DEV_CHAR_SYMLINK_CREATION", "true"),
            ("OPERATOR_NAMESPACE", "<metadata.namespace>"),
            ("HOST_ROOT", "/"),
            ("DRIVER_INSTALL_DIR", "/run/nvidia/driver"),
            ("DRIVER_INSTALL_DIR_CTR_PATH", "/driver-root"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
    );
    let security = init.security_context.as_ref().unwrap();
    assert_eq!(
        (security.privileged, security.run_as_user),
        (Some(true), Some(0))
    );
    assert_eq!(init.resources, None, "no plugin sets resources");
    let names: Vec<&str> = pod.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["gpus", "compute-domains"]);
    let gpus = container(pod, "gpus");
    assert_eq!(
        gpus.image.as_deref(),
        Some("nvcr.io/nvidia/k8s-dra-driver-gpu:v0.1.0")
    );
    assert_eq!(gpus.image_pull_policy.as_deref(), Some("IfNotPresent"));
    assert_eq!(
        env(gpus),
        nvidias_gpus_env(
            "nvcr.io/nvidia/k8s-dra-driver-gpu:v0.1.0",
            "51516",
            "AdminAccess=false,MPSSupport=true"
        )
    );
    let script = &gpus.args.as_ref().unwrap()[0];
    assert!(script.contains("/run/nvidia/validations/driver-ready"));
    assert!(script.ends_with("exec gpu-kubelet-plugin -v \"${LOG_VERBOSITY}\""));
    let startup = gpus.startup_probe.as_ref().unwrap();
    assert_eq!(startup.grpc.as_ref().unwrap().port, 51516);
    assert_eq!(
        (startup.failure_threshold, startup.period_seconds),
        (Some(600), Some(1))
    );
    let liveness = gpus.liveness_probe.as_ref().unwrap();
    assert_eq!(
        liveness.grpc.as_ref().unwrap().service.as_deref(),
        Some("liveness")
    );
    assert_eq!(
        (liveness.failure_threshold, liveness.period_seconds),
        (Some(3), Some(30))
    );
    let some = |s: &str| Some(s.to_owned());
    assert_eq!(
        mounts(gpus),
        [
            (
                "plugins-registry".to_owned(),
                "/var/lib/kubelet/plugins_registry".to_owned(),
                None,
                false
            ),
            (
                "plugins".to_owned(),
                "/var/lib/kubelet/plugins".to_owned(),
                some("Bidirectional"),
                false
            ),
            ("cdi".to_owned(), "/var/run/cdi".to_owned(), None, false),
            (
                "validations".to_owned(),
                "/run/nvidia/validations".to_owned(),
                None,
                true
            ),
            (
                "host-root".to_owned(),
                "/host".to_owned(),
                some("HostToContainer"),
                true
            ),
            (
                "driver-install-dir".to_owned(),
                "/driver-root".to_owned(),
                some("HostToContainer"),
                false
            ),
        ]
    );
    let cd = container(pod, "compute-domains");
    assert_eq!(env_value(cd, "HTTP_ENDPOINT").as_deref(), Some(":8081"));
    assert_eq!(env_value(cd, "HEALTHCHECK_PORT").as_deref(), Some("51515"));
    assert_eq!(
        env_value(cd, "GPU_CLIQUE_LABEL_ENABLED").as_deref(),
        Some("true")
    );
    assert_eq!(env_value(cd, "HOST_ROOT"), None);
    assert_eq!(env_value(cd, "IMAGE_NAME"), None);
    assert_eq!(cd.liveness_probe.as_ref().unwrap().period_seconds, Some(10));
    assert!(cd.args.as_ref().unwrap()[0].contains("exec compute-domain-kubelet-plugin"));
    assert_eq!(
        volumes(pod),
        [
            (
                "plugins-registry",
                "/var/lib/kubelet/plugins_registry",
                None
            ),
            ("plugins", "/var/lib/kubelet/plugins", None),
            ("cdi", "/var/run/cdi", None),
            ("host-root", "/", None),
            (
                "driver-install-dir",
                "/run/nvidia/driver",
                Some("DirectoryOrCreate")
            ),
            (
                "validations",
                "/run/nvidia/validations",
                Some("DirectoryOrCreate")
            ),
        ]
        .map(|(n, p, t)| (n.to_owned(), p.to_owned(), t.map(str::to_owned)))
    );
}

#[test]
fn gpus_only_renders_no_compute_domain_objects() {
    let mut spec = nvidia_sample();
    spec["draDriver"]["computeDomains"] = json!({"enabled": false});
    let children = driver(spec);
    assert_eq!(names(&children.service_accounts), [KUBELET_PLUGIN]);
    assert_eq!(names(&children.cluster_roles), [KUBELET_PLUGIN]);
    assert_eq!(
        names(&children.roles),
        [
            "nvidia-dra-driver-kubeletplugin-mps",
            "nvidia-dra-driver-kubeletplugin-driver-validation"
        ]
    );
    assert_eq!(
        names(&children.device_classes),
        ["gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com"]
    );
    assert!(children.deployments.is_empty());
    let pod = pod(&children.daemonsets[0]);
    let names: Vec<&str> = pod.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["gpus"]);
    // Without MPSSupport, no MPS role.
    let mut plain = json!({"draDriver": {"computeDomains": {"enabled": false}}});
    plain["draDriver"]["featureGates"] = json!({});
    let plain = driver(plain);
    assert_eq!(
        names_of_roles(&plain),
        ["nvidia-dra-driver-kubeletplugin-driver-validation"]
    );
    assert_eq!(
        env_value(container(pod_of(&plain), "gpus"), "FEATURE_GATES"),
        None
    );
}

fn names_of_roles(children: &Children) -> Vec<String> {
    crate::names(&children.roles)
}

fn pod_of(children: &Children) -> &k8s_openapi::api::core::v1::PodSpec {
    pod(&children.daemonsets[0])
}

#[test]
fn passthrough_support_mounts_modules_sysfs_and_procfs() {
    let mut spec = nvidia_sample();
    spec["draDriver"]["featureGates"]["PassthroughSupport"] = json!(true);
    let children = driver(spec);
    let pod = pod_of(&children);
    let gpus = container(pod, "gpus");
    assert_eq!(
        env_value(gpus, "FEATURE_GATES").as_deref(),
        Some("AdminAccess=false,MPSSupport=true,PassthroughSupport=true")
    );
    let extra: Vec<_> = mounts(gpus).into_iter().skip(6).collect();
    let some = |s: &str| Some(s.to_owned());
    assert_eq!(
        extra,
        [
            (
                "lib-modules".to_owned(),
                "/lib/modules/".to_owned(),
                some("HostToContainer"),
                true
            ),
            (
                "sysfs".to_owned(),
                "/sys/".to_owned(),
                some("Bidirectional"),
                false
            ),
            (
                "procfs".to_owned(),
                "/proc/".to_owned(),
                some("Bidirectional"),
                false
            ),
        ]
    );
    assert_eq!(mounts(container(pod, "compute-domains")).len(), 6);
    let extra: Vec<_> = volumes(pod).into_iter().skip(6).collect();
    assert_eq!(
        extra,
        [
            ("lib-modules", "/lib/modules/"),
            ("sysfs", "/sys/"),
            ("procfs", "/proc/")
        ]
        .map(|(n, p)| (n.to_owned(), p.to_owned(), Some("Directory".to_owned())))
    );
}

/// NVIDIA's full spec, with our host paths and `daemonsets` settings on top.
fn full_spec() -> serde_json::Value {
    let mut spec = nvidia_sample();
    spec["draDriver"]["gpus"] = json!({"kubeletPlugin": {
        "env": [{"name": "GPUS_EXTRA", "value": "1"}, {"name": "LOG_VERBOSITY", "value": "6"}],
        "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}},
        "healthcheck": {"port": 52000}
    }});
    spec["draDriver"]["computeDomains"] = json!({
        "enabled": true,
        "controller": {"env": [{"name": "CD_CONTROLLER_EXTRA", "value": "1"}],
            "resources": {"requests": {"cpu": "50m"}}},
        "kubeletPlugin": {
            "env": [{"name": "CD_PLUGIN_EXTRA", "value": "1"}],
            "resources": {"limits": {"cpu": "300m", "memory": "512Mi"}, "requests": {"cpu": "200m", "memory": "64Mi"}}
        }
    });
    spec["hostPaths"] = json!({"kubeletRootDir": "/var/lib/k0s/kubelet", "driverInstallDir": "/"});
    spec["daemonsets"] = json!({
        "labels": {"team": "gpu", "app": "ignored"},
        "annotations": {"owner": "ops"},
        "tolerations": [{"key": "dedicated", "operator": "Exists"}],
        "priorityClassName": "gpu-critical",
        "updateStrategy": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": "2"}
    });
    spec
}

#[test]
fn the_full_spec_reaches_every_container() {
    let children = driver(full_spec());
    let ds = &children.daemonsets[0];
    let pod = pod(ds);
    let gpus = container(pod, "gpus");
    let env = env(gpus);
    assert_eq!(
        env.last().unwrap(),
        &("GPUS_EXTRA".to_owned(), "1".to_owned())
    );
    assert_eq!(
        env_value(gpus, "LOG_VERBOSITY").as_deref(),
        Some("6"),
        "user env overrides"
    );
    assert_eq!(
        env_value(gpus, "HEALTHCHECK_PORT").as_deref(),
        Some("52000")
    );
    assert_eq!(
        gpus.startup_probe
            .as_ref()
            .unwrap()
            .grpc
            .as_ref()
            .unwrap()
            .port,
        52000
    );
    assert_eq!(
        env_value(gpus, "KUBELET_REGISTRAR_DIRECTORY_PATH").as_deref(),
        Some("/var/lib/k0s/kubelet/plugins_registry")
    );
    assert_eq!(mounts(gpus)[1].1, "/var/lib/k0s/kubelet/plugins");
    let limits = gpus.resources.as_ref().unwrap().limits.as_ref().unwrap();
    assert_eq!(limits["memory"].0, "256Mi");
    let cd = container(pod, "compute-domains");
    assert_eq!(env_value(cd, "CD_PLUGIN_EXTRA").as_deref(), Some("1"));
    assert_eq!(
        cd.resources.as_ref().unwrap().requests.as_ref().unwrap()["memory"].0,
        "64Mi"
    );
    // NVIDIA's golden: the init container takes the largest of both plugins.
    let init = container(pod, "driver-validation");
    let resources = init.resources.as_ref().unwrap();
    let q = |map: &Option<
        std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >,
             k: &str| { map.as_ref().unwrap()[k].0.clone() };
    assert_eq!(
        [q(&resources.limits, "cpu"), q(&resources.limits, "memory")],
        ["500m", "512Mi"]
    );
    assert_eq!(
        [
            q(&resources.requests, "cpu"),
            q(&resources.requests, "memory")
        ],
        ["200m", "128Mi"]
    );
    assert_eq!(env_value(init, "DRIVER_INSTALL_DIR").as_deref(), Some("/"));
    assert_eq!(volumes(pod)[4].1, "/");
    // The daemonsets settings.
    let labels = ds.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["team"], "gpu");
    assert_eq!(labels["app"], "nvidia-dra-driver-kubelet-plugin");
    assert_eq!(
        ds.spec
            .as_ref()
            .unwrap()
            .template
            .metadata
            .as_ref()
            .unwrap()
            .annotations
            .as_ref()
            .unwrap()["owner"],
        "ops"
    );
    assert_eq!(pod.priority_class_name.as_deref(), Some("gpu-critical"));
    assert_eq!(
        pod.tolerations.as_ref().unwrap()[0].key.as_deref(),
        Some("dedicated")
    );
    let rolling = ds.spec.as_ref().unwrap().update_strategy.as_ref().unwrap();
    assert_eq!(
        serde_json::to_value(
            rolling
                .rolling_update
                .as_ref()
                .unwrap()
                .max_unavailable
                .as_ref()
        )
        .unwrap(),
        json!(2),
        "the user's maxUnavailable wins over NVIDIA's 100%"
    );
    // The controller.
    let deployment = &children.deployments[0];
    let controller_pod = deployment
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap();
    let controller = container(controller_pod, "compute-domain");
    assert_eq!(
        env_value(controller, "CD_CONTROLLER_EXTRA").as_deref(),
        Some("1")
    );
    assert_eq!(
        env_value(controller, "FEATURE_GATES").as_deref(),
        Some("AdminAccess=false,MPSSupport=true")
    );
    assert_eq!(
        env_value(controller, "LEADER_ELECTION_LEASE_LOCK_NAMESPACE").as_deref(),
        Some("test-operator")
    );
    assert_eq!(
        controller
            .resources
            .as_ref()
            .unwrap()
            .requests
            .as_ref()
            .unwrap()["cpu"]
            .0,
        "50m"
    );
    let tolerations: Vec<&str> = controller_pod
        .tolerations
        .iter()
        .flatten()
        .filter_map(|t| t.key.as_deref())
        .collect();
    assert_eq!(
        tolerations,
        [
            "node-role.kubernetes.io/control-plane",
            "node-role.kubernetes.io/master",
            "CriticalAddonsOnly",
            "dedicated"
        ]
    );
    assert_eq!(
        controller_pod.priority_class_name.as_deref(),
        Some("gpu-critical")
    );
    assert_eq!(deployment.metadata.labels.as_ref().unwrap()["team"], "gpu");
    assert_eq!(
        controller.command.as_deref().unwrap(),
        ["compute-domain-controller", "-v", "$(LOG_VERBOSITY)"]
    );
}

#[test]
fn a_disabled_health_check_drops_the_probes_and_the_port() {
    let mut spec = nvidia_sample();
    spec["draDriver"]["gpus"] = json!({"kubeletPlugin": {"healthcheck": {"enabled": false}}});
    let children = driver(spec);
    let pod = pod_of(&children);
    let gpus = container(pod, "gpus");
    assert!(gpus.startup_probe.is_none() && gpus.liveness_probe.is_none());
    assert_eq!(env_value(gpus, "HEALTHCHECK_PORT"), None);
    let cd = container(pod, "compute-domains");
    assert!(
        cd.startup_probe.is_some(),
        "each container has its own switch"
    );
}

#[test]
fn the_admission_policy_confines_the_kubelet_plugin_of_our_namespace() {
    let children = driver(nvidia_sample());
    let policy = serde_json::to_value(&children.admission_policies[0]).unwrap();
    let spec = &policy["spec"];
    assert_eq!(spec["failurePolicy"], "Fail");
    assert_eq!(
        spec["matchConditions"][0]["expression"],
        "request.userInfo.username == 'system:serviceaccount:test-operator:nvidia-dra-driver-kubeletplugin'"
    );
    let rule = &spec["matchConstraints"]["resourceRules"][0];
    assert_eq!(rule["resources"], json!(["resourceslices"]));
    assert_eq!(rule["operations"], json!(["CREATE", "UPDATE", "DELETE"]));
    assert_eq!(spec["validations"].as_array().unwrap().len(), 2);
    let binding = serde_json::to_value(&children.admission_policy_bindings[0]).unwrap();
    assert_eq!(
        binding["spec"]["policyName"],
        "resourceslices-policy-nvidia-dra-driver"
    );
    assert_eq!(binding["spec"]["validationActions"], json!(["Deny"]));
}

#[test]
fn every_object_carries_the_operands_component_label() {
    let children = driver(full_spec());
    let value = serde_json::to_value(serde_json::json!({
        "sa": children.service_accounts, "r": children.roles, "rb": children.role_bindings,
        "cr": children.cluster_roles, "crb": children.cluster_role_bindings,
        "dc": children.device_classes, "vap": children.admission_policies,
        "vapb": children.admission_policy_bindings, "ds": children.daemonsets,
        "d": children.deployments,
    }))
    .unwrap();
    for (kind, objects) in value.as_object().unwrap() {
        for object in objects.as_array().unwrap() {
            assert_eq!(
                object["metadata"]["labels"]["app.kubernetes.io/component"], "dra-driver",
                "{kind} {}",
                object["metadata"]["name"]
            );
        }
    }
}
