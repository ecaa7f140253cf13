//! The sandbox validator rendered for every example ClusterPolicy × node profile (no example
//! turns sandbox workloads on, so each renders `disabled`), and for each example with sandbox
//! workloads and the CC manager switched on.
#![allow(clippy::unwrap_used)]

use gpu_operator_api::spec::{CcManagerSpec, SandboxWorkloadsSpec};
use gpu_operator_core::{
    contract::{Cluster, Operand},
    fixtures,
};
use gpu_operator_sandbox_validator::SandboxValidator;

fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn every_example_on_every_profile() {
    for (name, rendered) in fixtures::snapshots::<SandboxValidator>(&root()).unwrap() {
        insta::assert_yaml_snapshot!(name, rendered);
    }
}

#[test]
fn every_example_with_sandbox_workloads_on() {
    let mut seen: Vec<serde_json::Value> = Vec::new();
    for (example, mut spec) in fixtures::examples(&root()).unwrap() {
        spec.sandbox_workloads
            .get_or_insert_with(SandboxWorkloadsSpec::default)
            .enabled = Some(true);
        spec.cc_manager
            .get_or_insert_with(CcManagerSpec::default)
            .enabled = Some(true);
        let rendered = fixtures::with_cluster(&fixtures::image_env, |cluster: &Cluster<'_>| {
            let input = SandboxValidator::validate(&spec, cluster).unwrap().unwrap();
            let children = SandboxValidator::render(&input);
            serde_json::json!({
                "serviceAccounts": children.service_accounts,
                "clusterRoles": children.cluster_roles,
                "clusterRoleBindings": children.cluster_role_bindings,
                "daemonSets": children.daemonsets,
            })
        });
        // One snapshot per distinct output.
        if !seen.contains(&rendered) {
            insta::assert_yaml_snapshot!(format!("sandbox-{example}"), rendered);
            seen.push(rendered);
        }
    }
}
