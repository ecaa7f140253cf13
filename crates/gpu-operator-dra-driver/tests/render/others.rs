//! The DRA validator against NVIDIA's golden `gpucluster-dra-validation.yaml`, and the snapshots
//! of every case.

use serde_json::json;

use crate::*;

#[test]
fn the_validator_claims_a_gpu_with_admin_access_and_computes_on_it() {
    let children = validator(nvidia_sample());
    assert_eq!(names(&children.service_accounts), ["nvidia-dra-validator"]);
    let template = serde_json::to_value(&children.resource_claim_templates[0]).unwrap();
    assert_eq!(template["metadata"]["name"], "nvidia-dra-validator-gpu");
    assert_eq!(
        template["spec"]["spec"]["devices"]["requests"][0],
        json!({"name": "validation-gpu", "exactly": {
            "adminAccess": true, "allocationMode": "ExactCount", "count": 1,
            "deviceClassName": "gpu.nvidia.com"
        }})
    );
    let ds = &children.daemonsets[0];
    assert_eq!(ds.metadata.name.as_deref(), Some("nvidia-dra-validator"));
    let pod = pod(ds);
    assert_eq!(
        pod.node_selector.as_ref().unwrap()["nvidia.com/gpu.deploy.dra-validator"],
        "true"
    );
    assert_eq!(
        pod.service_account_name.as_deref(),
        Some("nvidia-dra-validator")
    );
    let claim = &pod.resource_claims.as_ref().unwrap()[0];
    assert_eq!(claim.name, "validation-gpu");
    assert_eq!(
        claim.resource_claim_template_name.as_deref(),
        Some("nvidia-dra-validator-gpu")
    );
    let init = container(pod, "gpu-validation");
    assert_eq!(
        init.image.as_deref(),
        Some("registry.example.com/validator:v1")
    );
    assert_eq!(init.command.as_deref().unwrap(), ["vectorAdd"]);
    assert_eq!(
        init.resources.as_ref().unwrap().claims.as_ref().unwrap()[0].name,
        "validation-gpu"
    );
    let main = container(pod, "nvidia-dra-validator");
    assert_eq!(main.command.as_ref().unwrap()[..2], ["sh", "-c"]);
    assert_eq!(
        pod.tolerations.as_ref().unwrap()[0].key.as_deref(),
        Some("nvidia.com/gpu")
    );
}

#[test]
fn snapshots() {
    let mut gpus_only = nvidia_sample();
    gpus_only["draDriver"]["computeDomains"] = json!({"enabled": false});
    let mut passthrough = nvidia_sample();
    passthrough["draDriver"]["featureGates"]["PassthroughSupport"] = json!(true);
    for (name, spec) in [
        ("default", json!({})),
        ("nvidia-sample", nvidia_sample()),
        ("gpus-only", gpus_only),
        ("passthrough-support", passthrough),
    ] {
        insta::assert_yaml_snapshot!(format!("driver-{name}"), children_value(&driver(spec)));
    }
    insta::assert_yaml_snapshot!("validator", children_value(&validator(nvidia_sample())));
}

fn children_value(children: &Children) -> serde_json::Value {
    json!({
        "serviceAccounts": children.service_accounts,
        "roles": children.roles,
        "roleBindings": children.role_bindings,
        "clusterRoles": children.cluster_roles,
        "clusterRoleBindings": children.cluster_role_bindings,
        "admissionPolicies": children.admission_policies,
        "admissionPolicyBindings": children.admission_policy_bindings,
        "deviceClasses": children.device_classes,
        "resourceClaimTemplates": children.resource_claim_templates,
        "daemonSets": children.daemonsets,
        "deployments": children.deployments,
    })
}
