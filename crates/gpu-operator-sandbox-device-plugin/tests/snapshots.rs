//! Both sandbox device plugins rendered for every example ClusterPolicy × node profile (no
//! example turns sandbox workloads on, so each renders `disabled`), and for each example with
//! sandbox workloads and the plugin switched on, in its mode.
#![allow(clippy::unwrap_used)]

use gpu_operator_api::spec::{
    KataSandboxDevicePluginSpec, SandboxDevicePluginSpec, SandboxMode, SandboxWorkloadsSpec,
};
use gpu_operator_core::{
    contract::{Cluster, Operand},
    fixtures,
};
use gpu_operator_sandbox_device_plugin::{KataSandboxDevicePlugin, SandboxDevicePlugin};

fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn every_example_on_every_profile() {
    for (name, rendered) in fixtures::snapshots::<SandboxDevicePlugin>(&root()).unwrap() {
        insta::assert_yaml_snapshot!(format!("kubevirt-{name}"), rendered);
    }
    for (name, rendered) in fixtures::snapshots::<KataSandboxDevicePlugin>(&root()).unwrap() {
        insta::assert_yaml_snapshot!(format!("kata-{name}"), rendered);
    }
}

/// `O` rendered for `spec`, every kind of object it writes.
fn render<O: Operand<Owner = gpu_operator_api::ClusterPolicy>>(
    spec: &gpu_operator_api::ClusterPolicySpec,
) -> serde_json::Value {
    fixtures::with_cluster(&fixtures::image_env, |cluster: &Cluster<'_>| {
        let children = O::render(&O::validate(spec, cluster).unwrap().unwrap());
        serde_json::json!({
            "serviceAccounts": children.service_accounts,
            "roles": children.roles,
            "roleBindings": children.role_bindings,
            "clusterRoles": children.cluster_roles,
            "clusterRoleBindings": children.cluster_role_bindings,
            "daemonSets": children.daemonsets,
        })
    })
}

#[test]
fn every_example_with_sandbox_workloads_on() {
    let mut seen: Vec<serde_json::Value> = Vec::new();
    for (example, mut spec) in fixtures::examples(&root()).unwrap() {
        spec.sandbox_workloads
            .get_or_insert_with(SandboxWorkloadsSpec::default)
            .enabled = Some(true);
        spec.sandbox_device_plugin
            .get_or_insert_with(SandboxDevicePluginSpec::default)
            .enabled = Some(true);
        spec.kata_sandbox_device_plugin
            .get_or_insert_with(KataSandboxDevicePluginSpec::default)
            .enabled = Some(true);
        let kubevirt = render::<SandboxDevicePlugin>(&spec);
        if let Some(sandbox) = spec.sandbox_workloads.as_mut() {
            sandbox.mode = Some(SandboxMode::Kata);
        }
        let kata = render::<KataSandboxDevicePlugin>(&spec);
        // One snapshot per distinct output.
        for (flavor, rendered) in [("kubevirt", kubevirt), ("kata", kata)] {
            if !seen.contains(&rendered) {
                insta::assert_yaml_snapshot!(format!("{flavor}-sandbox-{example}"), rendered);
                seen.push(rendered);
            }
        }
    }
}
