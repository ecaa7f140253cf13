//! Facts about the cluster's nodes the reconcilers need, computed from the metadata-only Node
//! cache and the GPU nodes' container runtimes: how many GPU nodes there are, whether NFD runs,
//! which operating systems, kernels and container runtimes the GPU nodes have; which GPU nodes
//! lack the device plugin's config label or are labelled for a sandbox workload type (counted,
//! with the first few names); and whether the Prometheus Operator's ServiceMonitor CRD is
//! installed.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use gpu_operator_api::labels;

use crate::cache::{
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
    /// Container runtimes of the GPU nodes of each OS, by name: what a driver DaemonSet for that
    /// OS needs to know, independent of the nodes of other OSes.
    pub os_runtimes: BTreeMap<OsRelease, BTreeSet<String>>,
    /// GPU nodes of the node cache that the runtime cache does not hold yet (the two caches are
    /// separate watches, so one may run a moment behind the other): until it catches up, the
    /// runtime facts are incomplete.
    pub gpu_nodes_without_runtime: usize,
    /// Nodes whose NFD labels show an NVIDIA GPU but that the node labeller has not labelled
    /// `nvidia.com/gpu.present=true` yet (see [`crate::cache::labeller_wait`]).
    pub gpu_candidates_unlabelled: usize,
    /// The (OS, kernel) pairs of the GPU nodes that carry both, for per-kernel driver images.
    pub os_kernels: BTreeSet<(OsRelease, String)>,
    /// The OSes, and (OS, kernel) pairs, of the GPU nodes each NVIDIADriver serves (NVIDIA's
    /// owner label `nvidia.com/gpu-operator.driver.owner`), by NVIDIADriver: its DaemonSets are
    /// for those only, as NVIDIA's are.
    pub owner_pools: BTreeMap<String, BTreeSet<(OsRelease, Option<String>)>>,
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
    /// GPU nodes that run the device plugin (`nvidia.com/gpu.deploy.device-plugin=true`) without
    /// the `nvidia.com/device-plugin.config` label (they run `devicePlugin.config.default`, or the
    /// plugin's built-in settings without one).
    pub gpu_nodes_without_plugin_config: NodeSample,
    /// GPU nodes by their `nvidia.com/gpu.workload.config` label (`container`, `vm-passthrough`,
    /// `vm-vgpu`; `""` for nodes without a valid one, which take
    /// `sandboxWorkloads.defaultWorkload`). Read from the label the user sets, not from the deploy
    /// labels the node labeller derives from it, so the first reconcile already knows them.
    pub gpu_nodes_by_workload: BTreeMap<String, NodeSample>,
    /// How many GPU nodes of each workload config label (as in
    /// [`ClusterFacts::gpu_nodes_by_workload`]) run each OS (`None`: no os-release labels): what
    /// an operand of one workload config, such as the vGPU manager, needs of the OSes.
    pub gpu_nodes_by_workload_os: BTreeMap<(String, Option<OsRelease>), usize>,
    /// GPU nodes whose MIG manager reports the layout they ask for failed
    /// (`nvidia.com/mig.config.state=failed`), by that layout (`nvidia.com/mig.config`). NVIDIA's
    /// MIG manager leaves such a node's GPU operands `paused-for-mig-change`: it offers no GPUs
    /// until a layout applies.
    pub mig_failed: BTreeMap<String, NodeSample>,
    /// GPU nodes the MIG watchdog marked stuck (`nvidia.com/gpu-operator.mig-stuck`: `pending`
    /// or `rebooting` past `migManager.watchdog.timeoutSeconds`), by the layout they ask for.
    pub mig_stuck: BTreeMap<String, NodeSample>,
    /// GPU nodes by container runtime and version as the node reports it
    /// (`status.nodeInfo.containerRuntimeVersion`, such as `containerd://1.7.27`), for what
    /// depends on the runtime's version (CDI for the DRA driver); nodes the runtime cache does not
    /// hold yet are left out.
    pub gpu_nodes_by_runtime_version: BTreeMap<String, NodeSample>,
    /// GPU nodes by the major version of their driver (GFD's
    /// `nvidia.com/cuda.driver-version.major` label), where they carry it.
    pub gpu_nodes_by_driver_major: BTreeMap<String, NodeSample>,
    /// The operator's DaemonSets as they run now, by name: what a render must keep stable
    /// (the driver's per-OS DaemonSets keep the OS they were created for).
    pub daemonsets: BTreeMap<String, LiveDaemonSet>,
}

/// What renders may need to know of a live DaemonSet.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LiveDaemonSet {
    /// The pod template's `nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
    /// The images of the pod template's containers.
    pub images: Vec<String>,
}

impl LiveDaemonSet {
    /// The parts of `ds` renders read.
    pub fn of(ds: &k8s_openapi::api::apps::v1::DaemonSet) -> Self {
        let pod = ds.spec.as_ref().and_then(|s| s.template.spec.as_ref());
        Self {
            node_selector: pod
                .and_then(|p| p.node_selector.clone())
                .unwrap_or_default(),
            images: pod
                .map(|p| {
                    p.containers
                        .iter()
                        .filter_map(|c| c.image.clone())
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

/// The deploy label of the device plugin (the node labeller's gate).
const PLUGIN_DEPLOY_LABEL: &str = "nvidia.com/gpu.deploy.device-plugin";

/// How many nodes share a trait, and the first few of them by name (bounded, so a condition can
/// name them at any fleet size).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeSample {
    /// How many nodes.
    pub count: usize,
    /// The alphabetically first [`NodeSample::NAMED`] of them.
    pub first: BTreeSet<String>,
}

impl NodeSample {
    /// How many names a sample keeps.
    pub const NAMED: usize = 5;

    /// Counts node `name`.
    pub fn add(&mut self, name: &str) {
        self.count += 1;
        let full = self.first.len() >= Self::NAMED;
        if full && self.first.last().is_some_and(|last| last.as_str() <= name) {
            return;
        }
        self.first.insert(name.to_owned());
        if self.first.len() > Self::NAMED {
            self.first.pop_last();
        }
    }

    /// Counts the nodes of `other` too (two samples of distinct nodes).
    pub fn merge(&mut self, other: &Self) {
        self.count += other.count;
        self.first.extend(other.first.iter().cloned());
        while self.first.len() > Self::NAMED {
            self.first.pop_last();
        }
    }

    /// `3 node(s) (a, b, c)` or `7 node(s) (a, b, c, d, e, …)`.
    pub fn describe(&self) -> String {
        let names: Vec<&str> = self.first.iter().map(String::as_str).collect();
        let more = if self.count > names.len() {
            ", …"
        } else {
            ""
        };
        format!("{} node(s) ({}{more})", self.count, names.join(", "))
    }
}

/// A node's operating system as NFD reports it, such as `ubuntu` `22.04`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct OsRelease {
    /// `system-os_release.ID`, such as `ubuntu` or `rhel`.
    pub id: String,
    /// `system-os_release.VERSION_ID`, such as `22.04` or `9.4`.
    pub version_id: String,
}

impl OsRelease {
    /// The OS NFD's os-release labels of a node name, if it carries both.
    fn of(node_labels: &Labels) -> Option<Self> {
        Some(Self {
            id: node_labels.get(labels::NFD_OS_RELEASE_ID)?.to_owned(),
            version_id: node_labels
                .get(labels::NFD_OS_RELEASE_VERSION_ID)?
                .to_owned(),
        })
    }
}

impl ClusterFacts {
    /// Records that NVIDIADriver `owner` serves a node of `os` (and `kernel`).
    fn add_owner_pool(&mut self, owner: &str, os: &OsRelease, kernel: Option<&str>) {
        let pools = self.owner_pools.entry(owner.to_owned()).or_default();
        pools.insert((os.clone(), None));
        if let Some(kernel) = kernel {
            pools.insert((os.clone(), Some(kernel.to_owned())));
        }
    }

    /// Counts GPU node `name` as failed or stuck on its MIG layout when its labels say so.
    fn add_mig_state(&mut self, name: &str, node_labels: &crate::cache::node_labels::Labels) {
        let layout = || {
            node_labels
                .get(labels::MIG_CONFIG)
                .unwrap_or_default()
                .to_owned()
        };
        if node_labels.get(labels::MIG_CONFIG_STATE) == Some("failed") {
            self.mig_failed.entry(layout()).or_default().add(name);
        } else if node_labels.get(labels::MIG_STUCK).is_some() {
            self.mig_stuck.entry(layout()).or_default().add(name);
        }
    }

    /// Counts GPU node `name` by its container runtime version and its driver's major version.
    fn add_runtime_and_driver(&mut self, name: &str, runtime: Option<&str>, major: Option<&str>) {
        self.gpu_nodes_without_runtime += usize::from(runtime.is_none());
        if let Some(version) = runtime {
            self.gpu_nodes_by_runtime_version
                .entry(version.to_owned())
                .or_default()
                .add(name);
        }
        if let Some(major) = major {
            self.gpu_nodes_by_driver_major
                .entry(major.to_owned())
                .or_default()
                .add(name);
        }
    }

    /// Computes the facts from node metadata and the GPU nodes' runtime cache.
    pub fn from_nodes<'a>(
        nodes: impl IntoIterator<Item = &'a NodeMeta>,
        runtimes: impl IntoIterator<Item = &'a NodeRuntime>,
    ) -> Self {
        let mut facts = Self::default();
        let runtimes: Vec<&NodeRuntime> = runtimes.into_iter().collect();
        let runtime_of: HashMap<&str, &str> = runtimes
            .iter()
            .filter_map(|node| {
                let name = kube::Resource::meta(*node).name.as_deref()?;
                Some((name, node.container_runtime_version.as_str()))
            })
            .collect();
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
                facts.gpu_candidates_unlabelled += usize::from(
                    labels::NFD_GPU_PRESENT
                        .iter()
                        .any(|key| node_labels.get(key) == Some("true")),
                );
                continue;
            }
            facts.gpu_nodes += 1;
            let name = kube::Resource::meta(node)
                .name
                .as_deref()
                .unwrap_or_default();
            if node_labels.get(PLUGIN_DEPLOY_LABEL) == Some("true")
                && node_labels.get(labels::DEVICE_PLUGIN_CONFIG).is_none()
            {
                facts.gpu_nodes_without_plugin_config.add(name);
            }
            facts.add_mig_state(name, node_labels);
            let workload = node_labels
                .get(labels::GPU_WORKLOAD_CONFIG)
                .filter(|w| matches!(*w, "container" | "vm-passthrough" | "vm-vgpu"))
                .unwrap_or_default();
            facts
                .gpu_nodes_by_workload
                .entry(workload.to_owned())
                .or_default()
                .add(name);
            let os = OsRelease::of(node_labels);
            let kernel = node_labels.get(labels::NFD_KERNEL_VERSION);
            facts.gpu_nodes_without_os += usize::from(os.is_none());
            *facts
                .gpu_nodes_by_workload_os
                .entry((workload.to_owned(), os.clone()))
                .or_default() += 1;
            facts.gpu_nodes_without_kernel += usize::from(kernel.is_none());
            if let (Some(os), Some(kernel)) = (&os, kernel) {
                facts.os_kernels.insert((os.clone(), kernel.to_owned()));
            }
            if let (Some(owner), Some(os)) = (node_labels.get(labels::DRIVER_OWNER), &os) {
                facts.add_owner_pool(owner, os, kernel);
            }
            let runtime = runtime_of.get(name).copied();
            facts.add_runtime_and_driver(name, runtime, node_labels.get(labels::CUDA_DRIVER_MAJOR));
            if let Some(os) = os {
                if let Some(runtime) = runtime.and_then(runtime_name) {
                    facts
                        .os_runtimes
                        .entry(os.clone())
                        .or_default()
                        .insert(runtime.to_owned());
                }
                facts.os_releases.insert(os);
            }
            if let Some(kernel) = kernel {
                facts.kernels.insert(kernel.to_owned());
            }
        }
        facts.runtimes = runtimes
            .iter()
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
    fn nodes_with_an_nvidia_pci_device_but_no_gpu_present_label_are_unlabelled_candidates() {
        // NFD's label keys written out by hand (PCI vendor 10de: any class, 3D, VGA).
        let candidates = [
            meta(&[("feature.node.kubernetes.io/pci-10de.present", "true")]),
            meta(&[("feature.node.kubernetes.io/pci-0302_10de.present", "true")]),
            meta(&[
                ("feature.node.kubernetes.io/pci-0300_10de.present", "true"),
                (labels::GPU_PRESENT, "false"),
            ]),
        ];
        let others = [
            meta(&[
                ("feature.node.kubernetes.io/pci-10de.present", "true"),
                (labels::GPU_PRESENT, "true"),
            ]),
            meta(&[("feature.node.kubernetes.io/pci-10de.present", "false")]),
            meta(&[("feature.node.kubernetes.io/pci-1af4.present", "true")]),
        ];
        let facts = ClusterFacts::from_nodes(candidates.iter().chain(&others), []);
        assert_eq!((facts.gpu_nodes, facts.gpu_candidates_unlabelled), (1, 3));
    }

    #[test]
    fn each_nvidia_driver_gets_the_oses_and_kernels_of_the_nodes_it_serves() {
        let node = |owner: Option<&str>, os: (&str, &str), kernel: &str| {
            let mut pairs = vec![
                (labels::GPU_PRESENT, "true"),
                (labels::NFD_OS_RELEASE_ID, os.0),
                (labels::NFD_OS_RELEASE_VERSION_ID, os.1),
                (labels::NFD_KERNEL_VERSION, kernel),
            ];
            pairs.extend(owner.map(|o| (labels::DRIVER_OWNER, o)));
            meta(&pairs)
        };
        let nodes = [
            node(Some("h100"), ("ubuntu", "22.04"), "6.8.0-1021-aws"),
            node(Some("h100"), ("ubuntu", "22.04"), "6.8.0-1024-aws"),
            node(Some("a100"), ("rhel", "9.4"), "5.14.0-427"),
            node(None, ("ubuntu", "24.04"), "6.8.0-1024-aws"),
        ];
        let facts = ClusterFacts::from_nodes(&nodes, []);
        let ubuntu = OsRelease {
            id: "ubuntu".into(),
            version_id: "22.04".into(),
        };
        assert_eq!(
            facts.owner_pools["h100"],
            BTreeSet::from([
                (ubuntu.clone(), None),
                (ubuntu.clone(), Some("6.8.0-1021-aws".to_owned())),
                (ubuntu, Some("6.8.0-1024-aws".to_owned())),
            ])
        );
        assert_eq!(facts.owner_pools["a100"].len(), 2);
        assert_eq!(
            facts.owner_pools.len(),
            2,
            "an unowned node serves no NVIDIADriver"
        );
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

    #[test]
    fn runtimes_are_kept_per_os_and_nodes_the_runtime_cache_lacks_are_counted() {
        let node = |name: &str, os: &str, version: &str| {
            NodeMeta::new(
                name,
                &[
                    (labels::GPU_PRESENT, "true"),
                    (labels::NFD_OS_RELEASE_ID, os),
                    (labels::NFD_OS_RELEASE_VERSION_ID, version),
                ],
            )
        };
        let nodes = [
            node("a100-0", "rhel", "9.4"),
            node("h100-0", "ubuntu", "22.04"),
            node("t4-0", "ubuntu", "24.04"),
        ];
        let runtimes = [
            NodeRuntime::new("a100-0", "cri-o://1.30.4"),
            NodeRuntime::new("h100-0", "containerd://1.7.27"),
            NodeRuntime::new("cpu-0", "docker://27.0.0"),
        ];
        let facts = ClusterFacts::from_nodes(&nodes, &runtimes);
        let os = |id: &str, version_id: &str| OsRelease {
            id: id.into(),
            version_id: version_id.into(),
        };
        let names = |set: &BTreeSet<String>| set.iter().cloned().collect::<Vec<_>>();
        assert_eq!(names(&facts.os_runtimes[&os("rhel", "9.4")]), ["cri-o"]);
        assert_eq!(
            names(&facts.os_runtimes[&os("ubuntu", "22.04")]),
            ["containerd"]
        );
        assert!(
            !facts.os_runtimes.contains_key(&os("ubuntu", "24.04")),
            "t4-0 is not in the runtime cache yet"
        );
        assert_eq!(facts.gpu_nodes_without_runtime, 1);
        assert_eq!(facts.os_releases.len(), 3);
    }

    #[test]
    fn node_samples_count_every_node_and_name_the_first_five() {
        let nodes: Vec<NodeMeta> = ["g", "c", "a", "f", "b", "e", "d"]
            .into_iter()
            .map(|n| {
                NodeMeta::new(
                    n,
                    &[(labels::GPU_PRESENT, "true"), (PLUGIN_DEPLOY_LABEL, "true")],
                )
            })
            .chain([NodeMeta::new(
                "labelled",
                &[
                    (labels::GPU_PRESENT, "true"),
                    (PLUGIN_DEPLOY_LABEL, "true"),
                    (labels::DEVICE_PLUGIN_CONFIG, "a100"),
                    (labels::GPU_WORKLOAD_CONFIG, "vm-passthrough"),
                ],
            )])
            .chain([NodeMeta::new(
                "default-vm",
                &[
                    (labels::GPU_PRESENT, "true"),
                    (labels::GPU_WORKLOAD_CONFIG, "vm-bogus"),
                ],
            )])
            .chain([NodeMeta::new("cpu", &[])])
            .collect();
        let facts = ClusterFacts::from_nodes(&nodes, []);
        let sample = &facts.gpu_nodes_without_plugin_config;
        // default-vm runs no device plugin (no deploy label), labelled has its config.
        assert_eq!(sample.count, 7);
        assert_eq!(sample.describe(), "7 node(s) (a, b, c, d, e, …)");
        let vm = &facts.gpu_nodes_by_workload["vm-passthrough"];
        assert_eq!(vm.describe(), "1 node(s) (labelled)");
        // Nodes without a valid workload label take the policy's default.
        assert_eq!(
            facts.gpu_nodes_by_workload[""].describe(),
            "8 node(s) (a, b, c, d, default-vm, …)"
        );
        assert_eq!(facts.gpu_nodes_by_workload.len(), 2);
    }

    #[test]
    fn failed_mig_layouts_are_counted_by_layout() {
        let node = |name: &str, layout: &str, state: &str| {
            NodeMeta::new(
                name,
                &[
                    (labels::GPU_PRESENT, "true"),
                    (labels::MIG_CONFIG, layout),
                    (labels::MIG_CONFIG_STATE, state),
                ],
            )
        };
        let nodes = [
            node("a", "all-1g.10gb", "failed"),
            node("b", "all-1g.10gb", "failed"),
            node("c", "all-2g.20gb", "failed"),
            node("d", "all-1g.10gb", "success"),
            node("e", "all-1g.10gb", "pending"),
            NodeMeta::new(
                "f",
                &[
                    (labels::GPU_PRESENT, "true"),
                    (labels::MIG_CONFIG, "all-1g.10gb"),
                    (labels::MIG_CONFIG_STATE, "rebooting"),
                    (labels::MIG_STUCK, "rebooting"),
                ],
            ),
        ];
        let facts = ClusterFacts::from_nodes(&nodes, []);
        assert_eq!(
            facts.mig_stuck["all-1g.10gb"].describe(),
            "1 node(s) (f)",
            "marked by the watchdog; e is pending, not stuck"
        );
        let described: Vec<(&str, String)> = facts
            .mig_failed
            .iter()
            .map(|(layout, sample)| (layout.as_str(), sample.describe()))
            .collect();
        assert_eq!(
            described,
            [
                ("all-1g.10gb", "2 node(s) (a, b)".to_owned()),
                ("all-2g.20gb", "1 node(s) (c)".to_owned())
            ]
        );
    }
}
