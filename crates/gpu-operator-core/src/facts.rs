//! Facts about the cluster's nodes the reconcilers need, computed from the metadata-only Node
//! cache and the GPU nodes' container runtimes: how many GPU nodes there are, whether NFD runs,
//! which operating systems, kernels and container runtimes the GPU nodes have; and whether the
//! Prometheus Operator's ServiceMonitor CRD is installed.

use std::collections::{BTreeMap, BTreeSet};

use gpu_operator_api::labels;

use crate::{
    node_meta::{Labels, NodeMeta},
    node_runtime::NodeRuntime,
};

/// What the node caches say about the cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterFacts {
    /// Nodes labelled `nvidia.com/gpu.present=true`.
    pub gpu_nodes: usize,
    /// Whether any node carries an NFD label.
    pub has_nfd_labels: bool,
    /// Operating systems of the GPU nodes from NFD's os-release labels.
    pub os_releases: BTreeSet<OsRelease>,
    /// Kernels of the GPU nodes (NFD's `kernel-version.full`).
    pub kernels: BTreeSet<String>,
    /// Container runtimes of the GPU nodes, by name (`containerd`, `cri-o`, `docker`), from
    /// `status.nodeInfo.containerRuntimeVersion`.
    pub runtimes: BTreeSet<String>,
    /// The (OS, kernel) pairs of the GPU nodes that carry both, for per-kernel driver images.
    pub os_kernels: BTreeSet<(OsRelease, String)>,
    /// GPU nodes without NFD's os-release labels (no driver image can be chosen for them).
    pub gpu_nodes_without_os: usize,
    /// GPU nodes without NFD's `kernel-version.full` label.
    pub gpu_nodes_without_kernel: usize,
    /// Whether the ServiceMonitor CRD (`servicemonitors.monitoring.coreos.com`) is installed, so
    /// ServiceMonitors can be created.
    pub service_monitor_crd: bool,
    /// Whether the PrometheusRule CRD (`prometheusrules.monitoring.coreos.com`) is installed, so
    /// PrometheusRules can be created.
    pub prometheus_rule_crd: bool,
}

/// A node's operating system as NFD reports it, such as `ubuntu` `22.04`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct OsRelease {
    /// `system-os_release.ID`, such as `ubuntu` or `rhel`.
    pub id: String,
    /// `system-os_release.VERSION_ID`, such as `22.04` or `9.4`.
    pub version_id: String,
}

impl ClusterFacts {
    /// Computes the facts from node metadata and the GPU nodes' runtime cache.
    pub fn from_nodes<'a>(
        nodes: impl IntoIterator<Item = &'a NodeMeta>,
        runtimes: impl IntoIterator<Item = &'a NodeRuntime>,
    ) -> Self {
        let mut facts = Self::default();
        for node in nodes {
            let node_labels = node.labels();
            if !facts.has_nfd_labels
                && node_labels
                    .keys()
                    .any(|k| k.starts_with(labels::NFD_PREFIX))
            {
                facts.has_nfd_labels = true;
            }
            if node_labels.get(labels::GPU_PRESENT) != Some("true") {
                continue;
            }
            facts.gpu_nodes += 1;
            let os = match (
                node_labels.get(labels::NFD_OS_RELEASE_ID),
                node_labels.get(labels::NFD_OS_RELEASE_VERSION_ID),
            ) {
                (Some(id), Some(version_id)) => Some(OsRelease {
                    id: id.to_owned(),
                    version_id: version_id.to_owned(),
                }),
                _ => None,
            };
            let kernel = node_labels.get(labels::NFD_KERNEL_VERSION);
            facts.gpu_nodes_without_os += usize::from(os.is_none());
            facts.gpu_nodes_without_kernel += usize::from(kernel.is_none());
            if let (Some(os), Some(kernel)) = (&os, kernel) {
                facts.os_kernels.insert((os.clone(), kernel.to_owned()));
            }
            if let Some(os) = os {
                facts.os_releases.insert(os);
            }
            if let Some(kernel) = kernel {
                facts.kernels.insert(kernel.to_owned());
            }
        }
        facts.runtimes = runtimes
            .into_iter()
            .filter_map(|node| runtime_name(&node.container_runtime_version))
            .map(str::to_owned)
            .collect();
        facts
    }
}

/// The runtime name of a `containerRuntimeVersion` such as `containerd://1.7.27`.
pub fn runtime_name(version: &str) -> Option<&str> {
    version.split_once("://").map(|(name, _)| name)
}

/// Whether `node_labels` satisfy every `key=value` of a DaemonSet's `nodeSelector`.
pub fn matches_selector(node_labels: &Labels, selector: &BTreeMap<String, String>) -> bool {
    selector
        .iter()
        .all(|(k, v)| node_labels.get(k) == Some(v.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(labels: &[(&str, &str)]) -> NodeMeta {
        NodeMeta::new("node", labels)
    }

    fn runtime(version: &str) -> NodeRuntime {
        NodeRuntime::new("gpu", version)
    }

    #[test]
    fn only_gpu_nodes_contribute_their_os_kernel_and_runtime() {
        let gpu = meta(&[
            (labels::GPU_PRESENT, "true"),
            (labels::NFD_OS_RELEASE_ID, "ubuntu"),
            (labels::NFD_OS_RELEASE_VERSION_ID, "22.04"),
            (labels::NFD_KERNEL_VERSION, "6.8.0-1021-aws"),
        ]);
        let cpu = meta(&[
            (labels::NFD_OS_RELEASE_ID, "rhel"),
            (labels::NFD_OS_RELEASE_VERSION_ID, "9.4"),
        ]);
        let facts = ClusterFacts::from_nodes(
            [&gpu, &gpu, &cpu],
            [&runtime("containerd://1.7.27"), &runtime("cri-o://1.30.4")],
        );
        assert_eq!(facts.gpu_nodes, 2);
        assert!(facts.has_nfd_labels);
        assert_eq!(
            facts.os_releases.into_iter().collect::<Vec<_>>(),
            vec![OsRelease {
                id: "ubuntu".into(),
                version_id: "22.04".into()
            }]
        );
        assert_eq!(facts.kernels.len(), 1);
        assert_eq!(facts.os_kernels.len(), 1);
        assert_eq!(
            (facts.gpu_nodes_without_os, facts.gpu_nodes_without_kernel),
            (0, 0)
        );
        assert_eq!(
            facts.runtimes.into_iter().collect::<Vec<_>>(),
            vec!["containerd".to_owned(), "cri-o".to_owned()]
        );
    }
}
