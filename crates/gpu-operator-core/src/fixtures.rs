//! Cluster views for render tests and snapshots: the node profiles of the local cluster (H100 on
//! Ubuntu 22.04 with containerd, A100 on RHEL 9.4 with CRI-O, T4 on Ubuntu 24.04 with containerd),
//! a Docker node, and a fleet with two kernels for precompiled drivers. Pure data, no cluster.

use std::collections::BTreeSet;

use crate::facts::{ClusterFacts, OsRelease};

/// A named set of GPU-node facts.
#[derive(Clone, Debug)]
pub struct Profile {
    /// Short name, used in snapshot names.
    pub name: &'static str,
    /// The facts.
    pub facts: ClusterFacts,
}

fn facts(nodes: &[(&str, &str, &str, &str)]) -> ClusterFacts {
    ClusterFacts {
        gpu_nodes: nodes.len(),
        has_nfd_labels: true,
        os_releases: nodes
            .iter()
            .map(|(id, version, _, _)| OsRelease {
                id: (*id).to_owned(),
                version_id: (*version).to_owned(),
            })
            .collect(),
        kernels: nodes.iter().map(|(_, _, k, _)| (*k).to_owned()).collect(),
        runtimes: nodes
            .iter()
            .map(|(_, _, _, r)| (*r).to_owned())
            .collect::<BTreeSet<_>>(),
    }
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
/// ConfigMap next to the policy) are skipped.
/// `root` is the repository root.
pub fn examples(
    root: &std::path::Path,
) -> Result<Vec<(String, gpu_operator_api::ClusterPolicySpec)>, Box<dyn std::error::Error>> {
    let mut examples = Vec::new();
    let mut paths: Vec<_> = std::fs::read_dir(root.join("manifests/examples"))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    paths.sort();
    for path in paths {
        let text = std::fs::read_to_string(&path)?;
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        for document in serde_yaml::Deserializer::from_str(&text) {
            let value: serde_yaml::Value = serde::Deserialize::deserialize(document)?;
            if value.get("kind").and_then(serde_yaml::Value::as_str) == Some("ClusterPolicy") {
                let policy: gpu_operator_api::ClusterPolicy = serde_yaml::from_value(value)?;
                examples.push((stem.clone(), policy.spec));
            }
        }
    }
    Ok(examples)
}

#[cfg(test)]
mod tests {
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
