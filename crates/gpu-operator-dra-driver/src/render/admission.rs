//! The ValidatingAdmissionPolicy `resourceslices-policy-nvidia-dra-driver` and its binding: the
//! kubelet plugin's ServiceAccount (of the operator namespace) may create, update and delete
//! ResourceSlices only from a pod bound to a node (its token names the node) and only the slices
//! of that node, or slices that are not tied to one node (`allNodes`, a `nodeSelector`), as
//! NVIDIA's policy allows. Every other user is left alone. Our own CEL, with NVIDIA's rules.

use k8s_openapi::{
    api::admissionregistration::v1::{
        MatchCondition, MatchResources, NamedRuleWithOperations, ValidatingAdmissionPolicy,
        ValidatingAdmissionPolicyBinding, ValidatingAdmissionPolicyBindingSpec,
        ValidatingAdmissionPolicySpec, Validation, Variable,
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};

use super::rbac::{KUBELET_PLUGIN, labels};

/// Name of the policy and of its binding.
pub const NAME: &str = "resourceslices-policy-nvidia-dra-driver";

/// The policy for the kubelet plugin's ServiceAccount in `namespace`.
pub fn policy(namespace: &str) -> ValidatingAdmissionPolicy {
    let variable = |name: &str, expression: &str| Variable {
        name: name.to_owned(),
        expression: expression.to_owned(),
    };
    ValidatingAdmissionPolicy {
        metadata: metadata(),
        spec: Some(ValidatingAdmissionPolicySpec {
            failure_policy: Some("Fail".to_owned()),
            match_constraints: Some(MatchResources {
                resource_rules: Some(vec![NamedRuleWithOperations {
                    api_groups: Some(vec!["resource.k8s.io".to_owned()]),
                    // Every version, so no older one bypasses the policy.
                    api_versions: Some(["v1", "v1beta1", "v1beta2"].map(str::to_owned).to_vec()),
                    operations: Some(["CREATE", "UPDATE", "DELETE"].map(str::to_owned).to_vec()),
                    resources: Some(vec!["resourceslices".to_owned()]),
                    ..NamedRuleWithOperations::default()
                }]),
                ..MatchResources::default()
            }),
            match_conditions: Some(vec![MatchCondition {
                name: "isKubeletPlugin".to_owned(),
                expression: format!(
                    "request.userInfo.username == 'system:serviceaccount:{namespace}:{KUBELET_PLUGIN}'"
                ),
            }]),
            variables: Some(vec![
                variable(
                    "callerNode",
                    "request.userInfo.extra[?'authentication.kubernetes.io/node-name'].orValue([''])[0]",
                ),
                variable(
                    "slice",
                    "request.operation == 'DELETE' ? oldObject : object",
                ),
                variable("sliceNode", "variables.slice.spec.?nodeName.orValue('')"),
                variable(
                    "notTiedToANode",
                    "variables.slice.spec.?allNodes.orValue(false) || variables.slice.spec.?nodeSelector.hasValue()",
                ),
            ]),
            validations: Some(vec![
                Validation {
                    expression: "variables.callerNode != ''".to_owned(),
                    message: Some(
                        "the DRA kubelet plugin may write ResourceSlices only from a pod bound to \
                         a node (its ServiceAccount token must name the node: \
                         ServiceAccountTokenPodNodeInfo)"
                            .to_owned(),
                    ),
                    ..Validation::default()
                },
                Validation {
                    expression:
                        "variables.sliceNode == variables.callerNode || variables.notTiedToANode"
                            .to_owned(),
                    message_expression: Some(
                        "'the DRA kubelet plugin on node ' + variables.callerNode + \
                         ' may not write the ResourceSlices of node ' + variables.sliceNode"
                            .to_owned(),
                    ),
                    ..Validation::default()
                },
            ]),
            ..ValidatingAdmissionPolicySpec::default()
        }),
        status: None,
    }
}

/// The binding that enforces the policy (deny) on every namespace.
pub fn binding() -> ValidatingAdmissionPolicyBinding {
    ValidatingAdmissionPolicyBinding {
        metadata: metadata(),
        spec: Some(ValidatingAdmissionPolicyBindingSpec {
            policy_name: Some(NAME.to_owned()),
            validation_actions: Some(vec!["Deny".to_owned()]),
            ..ValidatingAdmissionPolicyBindingSpec::default()
        }),
    }
}

fn metadata() -> ObjectMeta {
    ObjectMeta {
        name: Some(NAME.to_owned()),
        labels: Some(labels(NAME)),
        ..ObjectMeta::default()
    }
}
