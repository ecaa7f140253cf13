//! Both plugins' pods: NVIDIA's names, barrier, env, mounts and privileges, and every setting of
//! the section and of `spec.validator` reaching its container.

use gpu_operator_api::{
    ClusterPolicySpec,
    spec::{
        KataSandboxDevicePluginSpec, SandboxDevicePluginSpec, SandboxMode, SandboxWorkloadsSpec,
    },
};
use gpu_operator_core::fixtures;
use serde_json::json;

use super::*;
use crate::{
    Flavor,
    flavor::{KATA, KUBEVIRT},
    validate,
};

/// The DaemonSet of `flavor` for `section` (enabled) and `validator`.
fn daemonset(
    flavor: &'static Flavor,
    section: &serde_json::Value,
    validator: &serde_json::Value,
) -> DaemonSet {
    let mut spec = ClusterPolicySpec {
        sandbox_workloads: Some(SandboxWorkloadsSpec {
            enabled: Some(true),
            mode: Some(flavor.mode),
            ..SandboxWorkloadsSpec::default()
        }),
        validator: Some(serde_json::from_value(validator.clone()).unwrap()),
        ..ClusterPolicySpec::default()
    };
    let mut section = section.clone();
    section["enabled"] = json!(true);
    match flavor.mode {
        SandboxMode::Kubevirt => {
            spec.sandbox_device_plugin =
                Some(serde_json::from_value::<SandboxDevicePluginSpec>(section).unwrap());
        }
        SandboxMode::Kata => {
            spec.kata_sandbox_device_plugin =
                Some(serde_json::from_value::<KataSandboxDevicePluginSpec>(section).unwrap());
        }
    }
    let input = fixtures::with_cluster(&fixtures::image_env, |cluster| {
        validate::validate(flavor, &spec, cluster)
    })
    .unwrap()
    .unwrap();
    build(&input)
}

fn pod(ds: DaemonSet) -> PodSpec {
    ds.spec.unwrap().template.spec.unwrap()
}

fn names<T>(items: Option<&Vec<T>>, name: impl Fn(&T) -> &str) -> Vec<String> {
    items
        .into_iter()
        .flatten()
        .map(|i| name(i).to_owned())
        .collect()
}

fn env<'a>(container: &'a Container, name: &str) -> Option<&'a EnvVar> {
    container.env.iter().flatten().find(|e| e.name == name)
}

#[test]
fn the_kubevirt_plugin_as_nvidia_builds_it() {
    let ds = daemonset(&KUBEVIRT, &json!({}), &json!({}));
    assert_eq!(
        ds.metadata.name.as_deref(),
        Some("nvidia-sandbox-device-plugin-daemonset")
    );
    let pod = pod(ds);
    assert_eq!(
        pod.node_selector.as_ref().unwrap()["nvidia.com/gpu.deploy.sandbox-device-plugin"],
        "true"
    );
    assert_eq!(
        pod.service_account_name.as_deref(),
        Some("nvidia-sandbox-device-plugin")
    );
    let inits = pod.init_containers.as_ref().unwrap();
    assert_eq!(
        names(Some(inits), |c| &c.name),
        ["vfio-pci-validation", "vgpu-devices-validation"]
    );
    for (init, (kind, file)) in inits.iter().zip([
        ("vm-passthrough", "vfio-pci-ready"),
        ("vm-vgpu", "vgpu-devices-ready"),
    ]) {
        assert_eq!(
            init.image.as_deref(),
            Some("registry.example.com/validator:v1")
        );
        let script = &init.args.as_ref().unwrap()[0];
        assert!(
            script.contains("/run/nvidia/validations/workload-type"),
            "{script}"
        );
        assert!(script.contains(&format!("!= \"{kind}\"")), "{script}");
        assert!(
            script.contains(&format!("/run/nvidia/validations/{file} ]")),
            "{script}"
        );
        assert_eq!(
            env(init, "NVIDIA_VISIBLE_DEVICES")
                .unwrap()
                .value
                .as_deref(),
            Some("void")
        );
        let context = init.security_context.as_ref().unwrap();
        assert_eq!(
            (context.privileged, context.run_as_user),
            (Some(true), Some(0))
        );
        assert_eq!(init.image_pull_policy.as_deref(), Some("IfNotPresent"));
    }
    let main = &pod.containers[0];
    assert_eq!(main.name, "nvidia-sandbox-device-plugin-ctr");
    assert_eq!(
        main.image.as_deref(),
        Some("registry.example.com/sandbox-device-plugin:v1")
    );
    assert_eq!(main.args, None);
    assert!(env(main, "NODE_NAME").is_some() && env(main, "POD_NAMESPACE").is_some());
    assert!(env(main, "POD_SERVICE_ACCOUNT").is_none());
    assert_eq!(
        main.security_context.as_ref().unwrap().privileged,
        Some(true)
    );
    assert_eq!(
        names(main.volume_mounts.as_ref(), |m| &m.mount_path),
        [
            "/var/lib/kubelet/device-plugins",
            "/dev/vfio",
            "/var/run/cdi"
        ]
    );
    assert_eq!(
        names(pod.volumes.as_ref(), |v| &v.name),
        [
            "device-plugin",
            "run-nvidia-validations",
            "vfio",
            "cdi-root"
        ]
    );
    assert_eq!(pod.host_network, None);
    assert_eq!(pod.image_pull_secrets, None);
}

#[test]
fn the_kata_plugin_waits_for_vfio_pci_only_and_knows_its_service_account() {
    let ds = daemonset(&KATA, &json!({}), &json!({}));
    assert_eq!(
        ds.metadata.name.as_deref(),
        Some("nvidia-kata-sandbox-device-plugin-daemonset")
    );
    let pod = pod(ds);
    assert_eq!(
        pod.node_selector.as_ref().unwrap()["nvidia.com/gpu.deploy.kata-sandbox-device-plugin"],
        "true"
    );
    assert_eq!(
        pod.service_account_name.as_deref(),
        Some("nvidia-kata-sandbox-device-plugin")
    );
    assert_eq!(
        names(pod.init_containers.as_ref(), |c| &c.name),
        ["vfio-pci-validation"]
    );
    let main = &pod.containers[0];
    assert_eq!(main.name, "nvidia-kata-sandbox-device-plugin-ctr");
    let account = env(main, "POD_SERVICE_ACCOUNT").unwrap();
    assert_eq!(
        account
            .value_from
            .as_ref()
            .unwrap()
            .field_ref
            .as_ref()
            .unwrap()
            .field_path,
        "spec.serviceAccountName"
    );
    assert_eq!(
        names(main.volume_mounts.as_ref(), |m| &m.mount_path),
        ["/var/lib/kubelet/device-plugins", "/var/run/cdi"]
    );
    assert_eq!(
        names(pod.volumes.as_ref(), |v| &v.name),
        ["device-plugin", "run-nvidia-validations", "cdi-root"]
    );
}

#[test]
fn every_setting_of_the_section_reaches_the_plugin_and_the_validators_the_barrier() {
    let section = json!({
        "imagePullPolicy": "Always", "imagePullSecrets": ["plugin-secret"],
        "resources": {"requests": {"cpu": "1"}},
        "args": ["--verbose"],
        "env": [{"name": "NODE_NAME", "value": "fixed"}, {"name": "B", "value": "2"}],
        "hostNetwork": true
    });
    let validator = json!({
        "imagePullPolicy": "Never", "imagePullSecrets": ["validator-secret"],
        "resources": {"limits": {"memory": "50Mi"}}
    });
    for flavor in [&KUBEVIRT, &KATA] {
        let pod = pod(daemonset(flavor, &section, &validator));
        let main = &pod.containers[0];
        assert_eq!(main.image_pull_policy.as_deref(), Some("Always"));
        assert_eq!(
            main.resources.as_ref().unwrap().requests.as_ref().unwrap()["cpu"].0,
            "1"
        );
        assert_eq!(main.args.as_deref(), Some(&["--verbose".to_owned()][..]));
        assert_eq!(
            env(main, "NODE_NAME").unwrap().value.as_deref(),
            Some("fixed")
        );
        assert_eq!(env(main, "B").unwrap().value.as_deref(), Some("2"));
        for init in pod.init_containers.iter().flatten() {
            assert_eq!(init.image_pull_policy.as_deref(), Some("Never"));
            let resources = init.resources.as_ref().unwrap();
            assert_eq!(resources.limits.as_ref().unwrap()["memory"].0, "50Mi");
            assert_eq!(resources.requests, None);
            assert!(env(init, "B").is_none());
            assert_eq!(init.args.as_ref().unwrap().len(), 1);
        }
        assert_eq!(
            names(pod.image_pull_secrets.as_ref(), |s| &s.name),
            ["plugin-secret", "validator-secret"]
        );
        assert_eq!(pod.host_network, Some(true));
        assert_eq!(pod.dns_policy.as_deref(), Some("ClusterFirstWithHostNet"));
    }
}
