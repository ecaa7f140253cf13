//! The CC manager rendered for every example ClusterPolicy × node profile (no example turns
//! sandbox workloads on, so each renders `disabled`), and for each example with sandbox workloads
//! in `kata` mode and the CC manager switched on (no profile changes what it renders).
#![allow(clippy::unwrap_used)]

use gpu_operator_api::spec::{CcManagerSpec, SandboxMode, SandboxWorkloadsSpec};
use gpu_operator_cc_manager::CcManager;
use gpu_operator_core::{
    contract::{Cluster, Operand},
    fixtures,
};

fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn every_example_on_every_profile() {
    for (name, rendered) in fixtures::snapshots::<CcManager>(&root()).unwrap() {
        insta::assert_yaml_snapshot!(name, rendered);
    }
}

#[test]
fn every_example_with_sandbox_workloads_on() {
    let mut seen: Vec<serde_json::Value> = Vec::new();
    for (example, mut spec) in fixtures::examples(&root()).unwrap() {
        let sandbox = spec
            .sandbox_workloads
            .get_or_insert_with(SandboxWorkloadsSpec::default);
        sandbox.enabled = Some(true);
        sandbox.mode = Some(SandboxMode::Kata);
        spec.cc_manager
            .get_or_insert_with(CcManagerSpec::default)
            .enabled = Some(true);
        for profile in fixtures::profiles() {
            let cluster = Cluster {
                namespace: "gpu-operator",
                facts: &profile.facts,
                image_env: &fixtures::image_env,
                config_maps: &fixtures::plugin_configs,
                policy: None,
                server: gpu_operator_core::cache::server_facts::ServerFacts::unknown(),
            };
            let input = CcManager::validate(&spec, &cluster).unwrap().unwrap();
            let children = CcManager::render(&input);
            let rendered = serde_json::json!({
                "serviceAccounts": children.service_accounts,
                "roles": children.roles,
                "roleBindings": children.role_bindings,
                "clusterRoles": children.cluster_roles,
                "clusterRoleBindings": children.cluster_role_bindings,
                "daemonSets": children.daemonsets,
            });
            // One snapshot per distinct output.
            if !seen.contains(&rendered) {
                insta::assert_yaml_snapshot!(format!("sandbox-{example}"), rendered);
                seen.push(rendered);
            }
        }
    }
}
