//! The DRA driver's validation: NVIDIA's defaults, the images, the feature gates, and each
//! prerequisite refused or reported.

use gpu_operator_api::ClusterPolicySpec;
use gpu_operator_core::{
    cache::{facts::NodeSample, server_facts::ServerFacts},
    contract::Operand as _,
};
use serde_json::json;

use super::*;
use crate::{
    DraDriver, DraValidator, UNKNOWN_FEATURE_GATE,
    prerequisites::reason,
    testing::{View, gpu_cluster, input, validate_on},
};

#[test]
fn an_empty_spec_gets_nvidias_defaults() {
    let input = input(json!({}));
    assert_eq!(input.image, "registry.example.com/dra-driver:v1");
    assert_eq!(input.validator_image, "registry.example.com/validator:v1");
    assert_eq!(input.namespace, "gpu-operator");
    assert_eq!(input.component.pull_policy, "IfNotPresent");
    assert!(input.feature_gates.is_empty());
    assert_eq!(input.gpus.health_port, Some(GPUS_HEALTH_PORT));
    let cd = input.compute_domains.as_ref().unwrap();
    assert_eq!(cd.plugin.health_port, Some(COMPUTE_DOMAINS_HEALTH_PORT));
    assert_eq!(input.kubelet_root_dir, "/var/lib/kubelet");
    assert_eq!(input.driver_install_dir, "/run/nvidia/driver");
    assert!(input.unknown_gates.is_empty() && input.unserved.is_none());
}

#[test]
fn the_section_names_the_image_and_the_capabilities() {
    let input = input(json!({
        "draDriver": {
            "repository": "nvcr.io/nvidia", "image": "k8s-dra-driver-gpu", "version": "v0.1.0",
            "imagePullPolicy": "Always", "imagePullSecrets": ["pull"],
            "computeDomains": {"enabled": false},
            "gpus": {"kubeletPlugin": {"healthcheck": {"enabled": false}}}
        },
        "hostPaths": {"kubeletRootDir": "/var/lib/k0s/kubelet/", "driverInstallDir": "/"}
    }));
    assert_eq!(input.image, "nvcr.io/nvidia/k8s-dra-driver-gpu:v0.1.0");
    assert_eq!(input.component.pull_policy, "Always");
    assert_eq!(input.component.pull_secrets, ["pull"]);
    assert!(input.compute_domains.is_none());
    assert_eq!(input.gpus.health_port, None);
    assert_eq!(input.kubelet_root_dir, "/var/lib/k0s/kubelet");
    assert_eq!(input.driver_install_dir, "/");
}

#[test]
fn the_validator_image_comes_from_the_active_cluster_policy_when_there_is_one() {
    let policy = ClusterPolicySpec {
        validator: Some(
            serde_json::from_value(json!({
                "repository": "nvcr.io/nvidia/cloud-native", "image": "gpu-operator-validator",
                "version": "v26.7.0"
            }))
            .unwrap(),
        ),
        ..ClusterPolicySpec::default()
    };
    let view = View {
        policy: Some(policy),
        ..View::default()
    };
    let input = validate_on::<DraDriver>(&gpu_cluster(json!({})), &view)
        .unwrap()
        .unwrap();
    assert_eq!(
        input.validator_image,
        "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v26.7.0"
    );
    let validator = validate_on::<DraValidator>(&gpu_cluster(json!({})), &view)
        .unwrap()
        .unwrap();
    assert_eq!(validator.image, input.validator_image);
}

#[test]
fn an_image_nobody_names_is_an_error_naming_the_section() {
    let cluster = Cluster {
        namespace: "gpu-operator",
        facts: &gpu_operator_core::cache::facts::ClusterFacts::default(),
        image_env: &|_| None,
        config_maps: &|_| None,
        policy: None,
        server: ServerFacts::unknown(),
    };
    let error = validate(&gpu_cluster(json!({})), &cluster)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("spec.draDriver.repository") && error.contains(IMAGE_ENV),
        "{error}"
    );
}

#[test]
fn gates_the_driver_refuses_are_refused_naming_the_field_and_the_gates() {
    let cr = gpu_cluster(json!({"draDriver": {"featureGates": {
        "DynamicMIG": true, "PassthroughSupport": true
    }}}));
    let error = validate_on::<DraDriver>(&cr, &View::default()).unwrap_err();
    assert_eq!(error.category(), "InvalidSpec");
    let message = error.to_string();
    assert!(
        message.contains("spec.draDriver.featureGates")
            && message.contains("DynamicMIG and PassthroughSupport are mutually exclusive"),
        "{message}"
    );
}

#[test]
fn unknown_gates_are_passed_on_with_a_warning() {
    // NVIDIA's sample GPUCluster sets AdminAccess, which no driver release has.
    let input =
        input(json!({"draDriver": {"featureGates": {"MPSSupport": true, "AdminAccess": false}}}));
    assert_eq!(input.feature_gates.len(), 2);
    let warnings = DraDriver::warnings(&input);
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].reason, UNKNOWN_FEATURE_GATE);
    assert!(warnings[0].message.contains("AdminAccess"));
}

#[test]
fn a_server_without_dra_v1_refuses_both_operands_rendering_nothing() {
    let cases = [
        (
            Some((1, 33)),
            vec!["v1beta1"],
            reason::KUBERNETES_UNSUPPORTED,
        ),
        (Some((1, 34)), vec!["v1beta1"], reason::DRA_API_UNAVAILABLE),
        (Some((1, 34)), vec![], reason::DRA_API_UNAVAILABLE),
    ];
    for (version, served, expected) in cases {
        let view = View {
            server: ServerFacts {
                version,
                resource_api_versions: served.iter().map(|v| (*v).to_owned()).collect(),
            },
            ..View::default()
        };
        let cr = gpu_cluster(json!({}));
        let driver = validate_on::<DraDriver>(&cr, &view).unwrap_err();
        assert_eq!(driver.category(), expected, "{version:?} {served:?}");
        let validator = validate_on::<DraValidator>(&cr, &view).unwrap_err();
        assert_eq!(validator.category(), expected);
    }
    let served = View {
        server: ServerFacts {
            version: Some((1, 34)),
            resource_api_versions: vec!["v1".to_owned(), "v1beta2".to_owned()],
        },
        ..View::default()
    };
    let input = validate_on::<DraDriver>(&gpu_cluster(json!({})), &served)
        .unwrap()
        .unwrap();
    assert!(DraDriver::warnings(&input).is_empty());
}

#[test]
fn a_server_with_v1beta2_only_deploys_and_warns_once_on_the_driver() {
    let view = View {
        server: ServerFacts {
            version: Some((1, 36)),
            resource_api_versions: vec!["v1beta2".to_owned(), "v1beta1".to_owned()],
        },
        ..View::default()
    };
    let cr = gpu_cluster(json!({"draDriver": {"featureGates": {"AdminAccess": true}}}));
    let input = validate_on::<DraDriver>(&cr, &view).unwrap().unwrap();
    let warnings = DraDriver::warnings(&input);
    assert_eq!(warnings.len(), 2);
    assert_eq!(warnings[0].reason, reason::DRA_API_BETA);
    assert!(
        warnings[0]
            .message
            .contains("serving DRA through resource.k8s.io/v1beta2"),
        "{}",
        warnings[0].message
    );
    assert_eq!(warnings[1].reason, UNKNOWN_FEATURE_GATE);
    assert!(validate_on::<DraValidator>(&cr, &view).unwrap().is_some());
}

#[test]
fn nodes_without_cdi_or_with_an_old_driver_leave_the_condition_unready_naming_them() {
    let mut view = View::default();
    let mut old = NodeSample::default();
    old.add("gpu-1");
    view.facts
        .gpu_nodes_by_runtime_version
        .insert("containerd://1.6.9".to_owned(), old.clone());
    view.facts
        .gpu_nodes_by_driver_major
        .insert("570".to_owned(), old);
    let input = validate_on::<DraDriver>(&gpu_cluster(json!({})), &view)
        .unwrap()
        .unwrap();
    let unserved = DraDriver::unserved(&input).unwrap();
    assert!(
        unserved.contains("gpu-1")
            && unserved.contains("containerd 1.6.9")
            && unserved.contains("570"),
        "{unserved}"
    );
}
