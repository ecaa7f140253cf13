//! The chart lets the operator write every ClusterRole and ClusterRoleBinding an operand renders:
//! the names every registered operand renders, for every example ClusterPolicy on every node
//! profile (and with the node status exporter and the sandbox operands on), and those the
//! GPUCluster's operands render with every section on, are all in the chart's
//! `gpu-operator.operandClusterRoles` list, which the operator's ClusterRole grants by name.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::{any::Any, collections::BTreeSet, path::Path, sync::Arc};

use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec, GpuCluster};
use gpu_operator_core::{
    contract::{Cluster, Operand, Owner},
    fixtures,
};
use gpu_operator_operands::{Visit, VisitAny};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The names in the chart's `gpu-operator.operandClusterRoles` template.
fn chart_names() -> BTreeSet<String> {
    let helpers =
        std::fs::read_to_string(root().join("charts/gpu-operator/templates/_helpers.tpl")).unwrap();
    let start = helpers
        .find(r#"define "gpu-operator.operandClusterRoles""#)
        .expect("the chart's gpu-operator.operandClusterRoles template");
    let end = start + helpers[start..].find("{{- end -}}").unwrap();
    helpers[start..end]
        .lines()
        .filter_map(|line| line.trim().strip_prefix("- \""))
        .map(|name| name.trim_end_matches('"').to_owned())
        .collect()
}

/// The ClusterRole and ClusterRoleBinding names the registered operands render for `spec`.
struct Rendered<'a> {
    spec: &'a ClusterPolicySpec,
    cluster: Cluster<'a>,
    names: BTreeSet<String>,
}

impl Visit for Rendered<'_> {
    fn operand<O: Operand<Owner = ClusterPolicy>>(&mut self) {
        if let Ok(Some(input)) = O::validate(self.spec, &self.cluster) {
            let children = O::render(&input);
            self.names
                .extend(children.cluster_roles.iter().map(ResourceExt::name_any));
            self.names.extend(
                children
                    .cluster_role_bindings
                    .iter()
                    .map(ResourceExt::name_any),
            );
        }
    }
}

#[test]
fn the_chart_grants_every_cluster_role_an_operand_renders() {
    let config_maps: Vec<ConfigMap> = fixtures::example_config_maps(root()).unwrap();
    let lookup = |name: &str| {
        config_maps
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
            .map(|c| Arc::new(c.clone()))
    };
    let mut names = BTreeSet::new();
    for (_, spec) in fixtures::examples(root()).unwrap() {
        let mut exporter_on = spec.clone();
        exporter_on.node_status_exporter.enabled = Some(true);
        // No example turns sandbox workloads on: the ClusterRoles of the sandbox operands (the
        // device plugins one per mode, the CC manager in kata mode) come with them.
        exporter_on
            .sandbox_workloads
            .get_or_insert_with(Default::default)
            .enabled = Some(true);
        exporter_on
            .vfio_manager
            .get_or_insert_with(Default::default)
            .enabled = Some(true);
        exporter_on
            .vgpu_device_manager
            .get_or_insert_with(Default::default)
            .enabled = Some(true);
        exporter_on
            .vgpu_manager
            .get_or_insert_with(Default::default)
            .enabled = Some(true);
        exporter_on
            .cc_manager
            .get_or_insert_with(Default::default)
            .enabled = Some(true);
        exporter_on
            .sandbox_device_plugin
            .get_or_insert_with(Default::default)
            .enabled = Some(true);
        exporter_on
            .kata_sandbox_device_plugin
            .get_or_insert_with(Default::default)
            .enabled = Some(true);
        let mut kata = exporter_on.clone();
        if let Some(sandbox) = kata.sandbox_workloads.as_mut() {
            sandbox.mode = Some(gpu_operator_api::spec::SandboxMode::Kata);
        }
        for spec in [&spec, &exporter_on, &kata] {
            for profile in fixtures::profiles() {
                let mut rendered = Rendered {
                    spec,
                    cluster: Cluster {
                        namespace: "gpu-operator",
                        facts: &profile.facts,
                        image_env: &fixtures::image_env,
                        config_maps: &lookup,
                        policy: None,
                        server: gpu_operator_core::cache::server_facts::ServerFacts::unknown(),
                    },
                    names: BTreeSet::new(),
                };
                gpu_operator_operands::visit_all(&mut rendered);
                names.extend(rendered.names);
            }
        }
    }
    assert!(
        names.contains("nvidia-driver")
            && names.contains("nvidia-operator-validator")
            && names.contains("nvidia-sandbox-validator")
            && names.contains("nvidia-vfio-manager")
            && names.contains("nvidia-vgpu-device-manager")
            && names.contains("nvidia-vgpu-manager")
            && names.contains("nvidia-cc-manager")
            && names.contains("nvidia-sandbox-device-plugin")
            && names.contains("nvidia-kata-sandbox-device-plugin"),
        "too few ClusterRoles rendered: {names:?}"
    );
    let chart = chart_names();
    let missing: Vec<&String> = names.difference(&chart).collect();
    assert!(
        missing.is_empty(),
        "operands render ClusterRoles or ClusterRoleBindings the operator may not write: add \
         them to gpu-operator.operandClusterRoles in charts/gpu-operator/templates/_helpers.tpl: \
         {missing:?} (the chart has {chart:?})"
    );
}

/// The ClusterRole and ClusterRoleBinding names the GPUCluster's operands render for `cr`.
struct RenderedForGpuCluster<'a> {
    cr: &'a GpuCluster,
    names: BTreeSet<String>,
}

impl VisitAny for RenderedForGpuCluster<'_> {
    fn operand<O: Operand>(&mut self) {
        let spec = (self.cr as &dyn Any).downcast_ref::<<O::Owner as Owner>::Spec>();
        let input = spec.and_then(|spec| {
            fixtures::with_cluster(&fixtures::image_env, |cluster| O::validate(spec, cluster))
                .ok()
                .flatten()
        });
        if let Some(input) = input {
            let children = O::render(&input);
            self.names
                .extend(children.cluster_roles.iter().map(ResourceExt::name_any));
            self.names.extend(
                children
                    .cluster_role_bindings
                    .iter()
                    .map(ResourceExt::name_any),
            );
        }
    }
}

#[test]
fn the_chart_grants_every_cluster_role_a_gpu_cluster_operand_renders() {
    let spec = serde_json::from_value(serde_json::json!({
        "draDriver": {"computeDomains": {"enabled": true}},
        "dcgm": {"enabled": true},
        "dcgmExporter": {"enabled": true, "enablePodLabels": true},
    }))
    .unwrap();
    let cr = GpuCluster::new("gpu-cluster", spec);
    let mut rendered = RenderedForGpuCluster {
        cr: &cr,
        names: BTreeSet::new(),
    };
    gpu_operator_operands::visit_gpu_cluster(&mut rendered);
    assert!(
        rendered
            .names
            .contains("nvidia-dcgm-exporter-dra-read-pods")
            && rendered.names.contains("nvidia-dra-driver-kubeletplugin")
            && rendered.names.contains("compute-domain-daemon"),
        "too few ClusterRoles rendered: {:?}",
        rendered.names
    );
    let chart = chart_names();
    let missing: Vec<&String> = rendered.names.difference(&chart).collect();
    assert!(
        missing.is_empty(),
        "GPUCluster operands render ClusterRoles or ClusterRoleBindings the operator may not \
         write: add them to gpu-operator.operandClusterRoles in \
         charts/gpu-operator/templates/_helpers.tpl: {missing:?}"
    );
}
