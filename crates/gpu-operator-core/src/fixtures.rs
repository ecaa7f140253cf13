//! Cluster views for render tests and snapshots: the node profiles of the local cluster (H100 on
//! Ubuntu 22.04 with containerd, A100 on RHEL 9.4 with CRI-O, T4 on Ubuntu 24.04 with containerd),
//! a Docker node, and a fleet with two kernels for precompiled drivers. Pure data, no cluster.

use gpu_operator_api::labels;
use k8s_openapi::api::core::v1::ConfigMap;

use crate::{
    cache::{facts::ClusterFacts, node_meta::NodeMeta, node_runtime::NodeRuntime},
    contract::Children,
};

/// A named set of GPU-node facts.
#[derive(Clone, Debug)]
pub struct Profile {
    /// Short name, used in snapshot names.
    pub name: &'static str,
    /// The facts.
    pub facts: ClusterFacts,
}

/// The facts of GPU nodes given as (OS id, OS version, kernel, runtime), computed the way the
/// operator computes them from its node caches.
fn facts(nodes: &[(&str, &str, &str, &str)]) -> ClusterFacts {
    let names: Vec<String> = (0..nodes.len()).map(|i| format!("gpu-{i}")).collect();
    let metas: Vec<NodeMeta> = nodes
        .iter()
        .zip(&names)
        .map(|((id, version, kernel, _), name)| {
            NodeMeta::new(
                name,
                &[
                    (labels::GPU_PRESENT, "true"),
                    (labels::NFD_OS_RELEASE_ID, id),
                    (labels::NFD_OS_RELEASE_VERSION_ID, version),
                    (labels::NFD_KERNEL_VERSION, kernel),
                ],
            )
        })
        .collect();
    let runtimes: Vec<NodeRuntime> = nodes
        .iter()
        .zip(&names)
        .map(|((_, _, _, runtime), name)| NodeRuntime::new(name, &format!("{runtime}://1.0")))
        .collect();
    ClusterFacts::from_nodes(&metas, &runtimes)
}

/// `facts` with every GPU node's OS (and kernel) served by NVIDIADriver `owner`, as when the node
/// labeller has labelled them all its.
pub fn served_by(mut facts: ClusterFacts, owner: &str) -> ClusterFacts {
    let pools = facts.owner_pools.entry(owner.to_owned()).or_default();
    pools.extend(facts.os_releases.iter().map(|os| (os.clone(), None)));
    pools.extend(
        facts
            .os_kernels
            .iter()
            .map(|(os, kernel)| (os.clone(), Some(kernel.clone()))),
    );
    facts
}

/// Every profile render tests cover.
pub fn profiles() -> Vec<Profile> {
    vec![
        Profile {
            name: "h100-ubuntu22.04-containerd",
            facts: facts(&[("ubuntu", "22.04", "6.8.0-1021-aws", "containerd")]),
        },
        Profile {
            name: "a100-rhel9.4-crio",
            facts: facts(&[("rhel", "9.4", "5.14.0-427.13.1.el9_4.x86_64", "cri-o")]),
        },
        Profile {
            name: "t4-ubuntu24.04-containerd",
            facts: facts(&[("ubuntu", "24.04", "6.8.0-1024-aws", "containerd")]),
        },
        Profile {
            name: "t4-ubuntu22.04-docker",
            facts: facts(&[("ubuntu", "22.04", "5.15.0-1045-aws", "docker")]),
        },
        Profile {
            name: "ubuntu22.04-two-kernels",
            facts: facts(&[
                ("ubuntu", "22.04", "6.8.0-1021-aws", "containerd"),
                ("ubuntu", "22.04", "6.8.0-1024-aws", "containerd"),
            ]),
        },
    ]
}

/// The ClusterPolicies of `manifests/examples/` as (file stem, spec); other documents (such as a
/// ConfigMap next to the policy) are skipped. `root` is the repository root.
pub fn examples(
    root: &std::path::Path,
) -> Result<Vec<(String, gpu_operator_api::ClusterPolicySpec)>, Box<dyn std::error::Error>> {
    let mut examples = Vec::new();
    for (stem, value) in example_documents(root)? {
        if value.get("kind").and_then(serde_yaml::Value::as_str) == Some("ClusterPolicy") {
            let policy: gpu_operator_api::ClusterPolicy = serde_yaml::from_value(value)?;
            examples.push((stem, policy.spec));
        }
    }
    Ok(examples)
}

/// The ConfigMaps of `manifests/examples/` (those the example ClusterPolicies name).
pub fn example_config_maps(
    root: &std::path::Path,
) -> Result<Vec<ConfigMap>, Box<dyn std::error::Error>> {
    let mut config_maps = Vec::new();
    for (_, value) in example_documents(root)? {
        if value.get("kind").and_then(serde_yaml::Value::as_str) == Some("ConfigMap") {
            config_maps.push(serde_yaml::from_value(value)?);
        }
    }
    Ok(config_maps)
}

/// Every YAML document of `manifests/examples/`, with its file stem, in file order.
fn example_documents(
    root: &std::path::Path,
) -> Result<Vec<(String, serde_yaml::Value)>, Box<dyn std::error::Error>> {
    let mut paths: Vec<_> = std::fs::read_dir(root.join("manifests/examples"))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    paths.sort();
    let mut documents = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(&path)?;
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        for document in serde_yaml::Deserializer::from_str(&text) {
            let value: serde_yaml::Value = serde::Deserialize::deserialize(document)?;
            documents.push((stem.clone(), value));
        }
    }
    Ok(documents)
}

/// A ConfigMap of device plugin configurations under any name, with keys `default` and `any`
/// (for render tests of operands that check `devicePlugin.config`).
#[allow(clippy::unnecessary_wraps)] // the signature of `Cluster::config_maps`
pub fn plugin_configs(_name: &str) -> Option<std::sync::Arc<ConfigMap>> {
    let data = ["default", "any"].map(|key| (key.to_owned(), "version: v1\n".to_owned()));
    Some(std::sync::Arc::new(ConfigMap {
        data: Some(data.into()),
        ..ConfigMap::default()
    }))
}

/// Runs `f` (an operand's validation, say) on a cluster of default facts in namespace
/// `gpu-operator`, with `image_env` and the [`plugin_configs`].
pub fn with_cluster<T>(
    image_env: &(dyn Fn(&str) -> Option<String> + Sync),
    f: impl FnOnce(&crate::contract::Cluster<'_>) -> T,
) -> T {
    let facts = ClusterFacts::default();
    f(&crate::contract::Cluster {
        namespace: "gpu-operator",
        facts: &facts,
        image_env,
        config_maps: &plugin_configs,
        policy: None,
        server: crate::cache::server_facts::ServerFacts::unknown(),
    })
}

/// The image the fixtures' operator environment gives for variable `env` (such as
/// `DEVICE_PLUGIN_IMAGE` → `registry.example.com/device-plugin:v1`).
pub fn image_env(env: &str) -> Option<String> {
    let name = env
        .trim_end_matches("_IMAGE")
        .to_lowercase()
        .replace('_', "-");
    Some(format!("registry.example.com/{name}:v1"))
}

/// Operand `O` rendered for every example ClusterPolicy × every profile, for snapshots: one entry
/// per distinct output (the rendered objects in apply order, `disabled`, or the validation error),
/// so the snapshot count is the number of distinct cases. An entry is named after the first case
/// with that output: `<example>` when no profile changes the example's output (the node facts do
/// not reach this operand's rendering there), else `<example>-<profile>`, and `disabled` for every
/// example that disables the operand. A last entry, `matrix`, says which snapshot each
/// example × profile renders, so a profile that starts to matter shows up as a change there.
/// `root` is the repository root.
pub fn snapshots<O: crate::contract::Operand<Owner = gpu_operator_api::ClusterPolicy>>(
    root: &std::path::Path,
) -> Result<Vec<(String, serde_json::Value)>, Box<dyn std::error::Error>> {
    let config_maps = example_config_maps(root)?;
    let lookup = |name: &str| {
        config_maps
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
            .map(|c| std::sync::Arc::new(c.clone()))
    };
    let distinct = distinct_snapshots(root, |spec, facts| {
        let cluster = crate::contract::Cluster {
            namespace: "gpu-operator",
            facts,
            image_env: &image_env,
            config_maps: &lookup,
            policy: None,
            server: crate::cache::server_facts::ServerFacts::unknown(),
        };
        Ok(match O::validate(spec, &cluster) {
            Ok(Some(input)) => children_values(&O::render(&input))?,
            Ok(None) => serde_json::json!(DISABLED),
            Err(error) => serde_json::json!({ "error": error.to_string() }),
        })
    })?;
    let mut out = distinct.cases;
    out.push(("matrix".to_owned(), distinct.matrix));
    Ok(out)
}

/// What an operand renders where an example disables it.
const DISABLED: &str = "disabled";

/// The distinct outputs of a render over every example × profile, and which one each case renders.
#[derive(Clone, Debug)]
pub struct DistinctSnapshots<V> {
    /// One entry per distinct output, named as [`snapshots`] describes.
    pub cases: Vec<(String, V)>,
    /// Example → its snapshot's name, or profile → snapshot name where profiles differ.
    pub matrix: serde_json::Value,
}

/// The snapshots of `render` (one example's spec on one profile's facts) over every example ×
/// profile, one per distinct output, named as [`snapshots`] describes, and the matrix. An output
/// equal to `"disabled"` is named `disabled`.
pub fn distinct_snapshots<V: PartialEq + From<&'static str>>(
    root: &std::path::Path,
    render: impl Fn(
        &gpu_operator_api::ClusterPolicySpec,
        &ClusterFacts,
    ) -> Result<V, Box<dyn std::error::Error>>,
) -> Result<DistinctSnapshots<V>, Box<dyn std::error::Error>> {
    let disabled = V::from(DISABLED);
    let mut out: Vec<(String, V)> = Vec::new();
    let mut matrix = serde_json::Map::new();
    for (example, spec) in examples(root)? {
        let mut rendered = Vec::new();
        for profile in profiles() {
            rendered.push((profile.name, render(&spec, &profile.facts)?));
        }
        let same_everywhere = rendered.iter().all(|(_, v)| *v == rendered[0].1);
        let mut row = serde_json::Map::new();
        for (profile, value) in rendered {
            let name = if let Some((name, _)) = out.iter().find(|(_, v)| *v == value) {
                name.clone()
            } else {
                let name = if value == disabled {
                    DISABLED.to_owned()
                } else if same_everywhere {
                    example.clone()
                } else {
                    format!("{example}-{profile}")
                };
                out.push((name.clone(), value));
                name
            };
            row.insert(profile.to_owned(), serde_json::Value::String(name));
        }
        let row = if same_everywhere {
            row.into_iter()
                .next()
                .map_or(serde_json::Value::Null, |(_, name)| name)
        } else {
            serde_json::Value::Object(row)
        };
        matrix.insert(example, row);
    }
    Ok(DistinctSnapshots {
        cases: out,
        matrix: serde_json::Value::Object(matrix),
    })
}

/// Every rendered object as JSON, in apply order (what the snapshots hold).
pub fn children_values(children: &Children) -> Result<serde_json::Value, serde_json::Error> {
    let Children {
        service_accounts,
        roles,
        role_bindings,
        cluster_roles,
        cluster_role_bindings,
        config_maps,
        services,
        runtime_classes,
        admission_policies,
        admission_policy_bindings,
        device_classes,
        resource_claim_templates,
        daemonsets,
        deployments,
        service_monitors,
        prometheus_rules,
    } = children;
    let mut all = Vec::new();
    for value in [
        serde_json::to_value(service_accounts)?,
        serde_json::to_value(roles)?,
        serde_json::to_value(role_bindings)?,
        serde_json::to_value(cluster_roles)?,
        serde_json::to_value(cluster_role_bindings)?,
        serde_json::to_value(config_maps)?,
        serde_json::to_value(services)?,
        serde_json::to_value(runtime_classes)?,
        serde_json::to_value(admission_policies)?,
        serde_json::to_value(admission_policy_bindings)?,
        serde_json::to_value(device_classes)?,
        serde_json::to_value(resource_claim_templates)?,
        serde_json::to_value(daemonsets)?,
        serde_json::to_value(deployments)?,
        serde_json::to_value(service_monitors)?,
        serde_json::to_value(prometheus_rules)?,
    ] {
        if let serde_json::Value::Array(items) = value {
            all.extend(items);
        }
    }
    Ok(serde_json::Value::Array(all))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn every_example_parses_and_profiles_cover_each_runtime() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let examples = examples(&root).unwrap();
        assert!(examples.iter().any(|(name, _)| name == "minimal"));
        let runtimes: BTreeSet<String> = profiles()
            .into_iter()
            .flat_map(|p| p.facts.runtimes)
            .collect();
        assert_eq!(runtimes.len(), 3);
    }
}
