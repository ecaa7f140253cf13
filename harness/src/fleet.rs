//! The simulated fleet: node profiles (8×H100, 4×A100, 1×T4, CPU-only) as kwok-managed `Node` objects.
//!
//! Each profile carries what a real node of that kind shows before the GPU operator runs: the NFD
//! labels (PCI vendor, kernel, OS), the hardware labels GPU Feature Discovery would have written
//! (product, count, memory, MIG capability), the container runtime, and capacity/allocatable.
//! Labels the operator itself writes (`nvidia.com/gpu.present`, `nvidia.com/gpu.deploy.*`) are absent.

use std::{collections::BTreeMap, fmt, str::FromStr};

use anyhow::{Context as _, bail};
use k8s_openapi::{
    api::core::v1::{Node, NodeStatus, NodeSystemInfo},
    apimachinery::pkg::{api::resource::Quantity, apis::meta::v1::ObjectMeta},
};

/// Label that marks the nodes kwok manages (its `--manage-nodes-with-label-selector`).
pub const KWOK_LABEL: (&str, &str) = ("type", "kwok");
/// Label naming the profile a simulated node was made from.
pub const PROFILE_LABEL: &str = "gpu-operator.e2e/profile";
/// The NFD label that says a node has an NVIDIA PCI device.
pub const NFD_NVIDIA_PCI: &str = "feature.node.kubernetes.io/pci-10de.present";

/// A kind of simulated node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Profile {
    /// 8× NVIDIA H100 80GB HBM3 SXM, MIG-capable, Ubuntu 22.04, containerd.
    H100,
    /// 4× NVIDIA A100-SXM4-80GB, MIG-capable, RHEL 9.4, CRI-O.
    A100,
    /// 1× Tesla T4, not MIG-capable, Ubuntu 24.04, containerd 2.
    T4,
    /// No GPU.
    Cpu,
}

/// Everything that differs between profiles.
struct Spec {
    name: &'static str,
    gpu: Option<Gpu>,
    kernel: &'static str,
    os_id: &'static str,
    os_version: &'static str,
    os_image: &'static str,
    runtime: &'static str,
    instance_type: &'static str,
    cpu: &'static str,
    memory: &'static str,
}

struct Gpu {
    product: &'static str,
    count: u32,
    memory_mib: u32,
    family: &'static str,
    compute: (u32, u32),
    mig_capable: bool,
}

impl Profile {
    /// Every profile, in the order fleets list them.
    pub const ALL: [Self; 4] = [Self::H100, Self::A100, Self::T4, Self::Cpu];

    fn spec(self) -> Spec {
        match self {
            Self::H100 => Spec {
                name: "h100",
                gpu: Some(Gpu {
                    product: "NVIDIA-H100-80GB-HBM3",
                    count: 8,
                    memory_mib: 81559,
                    family: "hopper",
                    compute: (9, 0),
                    mig_capable: true,
                }),
                kernel: "6.8.0-1021-aws",
                os_id: "ubuntu",
                os_version: "22.04",
                os_image: "Ubuntu 22.04.5 LTS",
                runtime: "containerd://1.7.27",
                instance_type: "p5.48xlarge",
                cpu: "192",
                memory: "2048Gi",
            },
            Self::A100 => Spec {
                name: "a100",
                gpu: Some(Gpu {
                    product: "NVIDIA-A100-SXM4-80GB",
                    count: 4,
                    memory_mib: 81920,
                    family: "ampere",
                    compute: (8, 0),
                    mig_capable: true,
                }),
                kernel: "5.14.0-427.13.1.el9_4.x86_64",
                os_id: "rhel",
                os_version: "9.4",
                os_image: "Red Hat Enterprise Linux 9.4 (Plow)",
                runtime: "cri-o://1.30.4",
                instance_type: "xe8545",
                cpu: "128",
                memory: "1024Gi",
            },
            Self::T4 => Spec {
                name: "t4",
                gpu: Some(Gpu {
                    product: "Tesla-T4",
                    count: 1,
                    memory_mib: 15360,
                    family: "turing",
                    compute: (7, 5),
                    mig_capable: false,
                }),
                kernel: "6.8.0-1024-aws",
                os_id: "ubuntu",
                os_version: "24.04",
                os_image: "Ubuntu 24.04.2 LTS",
                runtime: "containerd://2.1.5",
                instance_type: "g4dn.xlarge",
                cpu: "4",
                memory: "16Gi",
            },
            Self::Cpu => Spec {
                name: "cpu",
                gpu: None,
                kernel: "6.8.0-1021-aws",
                os_id: "ubuntu",
                os_version: "22.04",
                os_image: "Ubuntu 22.04.5 LTS",
                runtime: "containerd://1.7.27",
                instance_type: "m7i.2xlarge",
                cpu: "8",
                memory: "32Gi",
            },
        }
    }

    /// The profile's short name, as used in `--fleet` (`h100`, `a100`, `t4`, `cpu`).
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// Number of GPUs the node advertises (`nvidia.com/gpu` capacity); 0 for CPU-only.
    pub fn gpu_count(self) -> u32 {
        self.spec().gpu.map_or(0, |gpu| gpu.count)
    }

    /// Whether GPU Feature Discovery reports the node as MIG-capable.
    pub fn mig_capable(self) -> bool {
        self.spec().gpu.is_some_and(|gpu| gpu.mig_capable)
    }

    /// The labels the node is created with.
    pub fn labels(self, node_name: &str) -> BTreeMap<String, String> {
        let spec = self.spec();
        let mut labels: BTreeMap<String, String> = [
            (KWOK_LABEL.0, KWOK_LABEL.1.to_owned()),
            (PROFILE_LABEL, spec.name.to_owned()),
            ("kubernetes.io/hostname", node_name.to_owned()),
            ("kubernetes.io/os", "linux".to_owned()),
            ("kubernetes.io/arch", "amd64".to_owned()),
            // As a kubelet registers its node. Without them the controller-manager adds them a
            // moment after creation, and the operator's first label patch of the last-created
            // nodes failed its test of the labels (HTTP 422) and was retried.
            ("beta.kubernetes.io/os", "linux".to_owned()),
            ("beta.kubernetes.io/arch", "amd64".to_owned()),
            (
                "node.kubernetes.io/instance-type",
                spec.instance_type.to_owned(),
            ),
            (
                "feature.node.kubernetes.io/kernel-version.full",
                spec.kernel.to_owned(),
            ),
            (
                "feature.node.kubernetes.io/system-os_release.ID",
                spec.os_id.to_owned(),
            ),
            (
                "feature.node.kubernetes.io/system-os_release.VERSION_ID",
                spec.os_version.to_owned(),
            ),
            (
                "feature.node.kubernetes.io/cpu-model.vendor_id",
                "Intel".to_owned(),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        if let Some((major, minor)) = spec.os_version.split_once('.') {
            labels.insert(
                "feature.node.kubernetes.io/system-os_release.VERSION_ID.major".to_owned(),
                major.to_owned(),
            );
            labels.insert(
                "feature.node.kubernetes.io/system-os_release.VERSION_ID.minor".to_owned(),
                minor.to_owned(),
            );
        }
        if let Some(gpu) = spec.gpu {
            let gfd = [
                (NFD_NVIDIA_PCI, "true".to_owned()),
                ("nvidia.com/gpu.product", gpu.product.to_owned()),
                ("nvidia.com/gpu.count", gpu.count.to_string()),
                ("nvidia.com/gpu.memory", gpu.memory_mib.to_string()),
                ("nvidia.com/gpu.family", gpu.family.to_owned()),
                ("nvidia.com/gpu.compute.major", gpu.compute.0.to_string()),
                ("nvidia.com/gpu.compute.minor", gpu.compute.1.to_string()),
                ("nvidia.com/gpu.machine", spec.instance_type.to_owned()),
                ("nvidia.com/mig.capable", gpu.mig_capable.to_string()),
            ];
            labels.extend(gfd.into_iter().map(|(k, v)| (k.to_owned(), v)));
        }
        labels
    }

    /// A kwok-managed `Node` of this profile. Its status (capacity, runtime) is set at creation,
    /// which the API server allows for nodes.
    pub fn node(self, name: &str) -> Node {
        let spec = self.spec();
        let mut capacity: BTreeMap<String, Quantity> = [
            ("cpu", spec.cpu),
            ("memory", spec.memory),
            ("pods", "110"),
            ("ephemeral-storage", "500Gi"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), Quantity(v.to_owned())))
        .collect();
        if let Some(gpu) = &spec.gpu {
            capacity.insert("nvidia.com/gpu".to_owned(), Quantity(gpu.count.to_string()));
        }
        Node {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                labels: Some(self.labels(name)),
                annotations: Some(BTreeMap::from([(
                    "kwok.x-k8s.io/node".to_owned(),
                    "fake".to_owned(),
                )])),
                ..ObjectMeta::default()
            },
            spec: None,
            status: Some(NodeStatus {
                allocatable: Some(capacity.clone()),
                capacity: Some(capacity),
                node_info: Some(NodeSystemInfo {
                    architecture: "amd64".to_owned(),
                    container_runtime_version: spec.runtime.to_owned(),
                    kernel_version: spec.kernel.to_owned(),
                    kubelet_version: "v1.36.3".to_owned(),
                    operating_system: "linux".to_owned(),
                    os_image: spec.os_image.to_owned(),
                    ..NodeSystemInfo::default()
                }),
                ..NodeStatus::default()
            }),
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Profile {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Self> {
        Self::ALL
            .into_iter()
            .find(|profile| profile.name() == s)
            .with_context(|| {
                format!(
                    "unknown fleet profile `{s}`: use one of {}",
                    profile_names()
                )
            })
    }
}

fn profile_names() -> String {
    Profile::ALL.map(Profile::name).join(", ")
}

/// How many nodes of each profile to create, e.g. `h100=2,a100=2,t4=2,cpu=1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fleet {
    counts: BTreeMap<Profile, u32>,
}

impl Default for Fleet {
    /// A few of each: 2×H100 nodes, 2×A100, 2×T4, 1 CPU-only.
    fn default() -> Self {
        Self {
            counts: BTreeMap::from([
                (Profile::H100, 2),
                (Profile::A100, 2),
                (Profile::T4, 2),
                (Profile::Cpu, 1),
            ]),
        }
    }
}

impl FromStr for Fleet {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Self> {
        let mut counts = BTreeMap::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, count) = part.split_once('=').with_context(|| {
                format!(
                    "fleet entry `{part}` is not PROFILE=COUNT (e.g. `h100=2,cpu=1`; profiles: {})",
                    profile_names()
                )
            })?;
            let profile: Profile = name.trim().parse()?;
            let count: u32 = count.trim().parse().with_context(|| {
                format!("fleet entry `{part}`: `{count}` is not a node count (a whole number ≥ 0)")
            })?;
            if counts.insert(profile, count).is_some() {
                bail!("fleet names profile `{profile}` twice");
            }
        }
        let fleet = Self { counts };
        if fleet.total() == 0 {
            bail!("the fleet `{s}` has no nodes: give at least one, e.g. `h100=1`");
        }
        Ok(fleet)
    }
}

impl fmt::Display for Fleet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .counts
            .iter()
            .map(|(p, n)| format!("{p}={n}"))
            .collect();
        f.write_str(&parts.join(","))
    }
}

impl Fleet {
    /// Total number of nodes.
    pub fn total(&self) -> u32 {
        self.counts.values().sum()
    }

    /// Number of nodes of one profile.
    pub fn count(&self, profile: Profile) -> u32 {
        self.counts.get(&profile).copied().unwrap_or(0)
    }

    /// The same mix of profiles scaled to `total` nodes (largest-remainder rounding, so the counts
    /// add up exactly). Fails for `total == 0`.
    pub fn scaled_to(&self, total: u32) -> anyhow::Result<Self> {
        if total == 0 {
            bail!("--nodes must be at least 1");
        }
        let weight = u64::from(self.total());
        let mut counts = BTreeMap::new();
        let mut remainders = Vec::new();
        let mut assigned = 0;
        for (&profile, &n) in &self.counts {
            let exact = u64::from(n) * u64::from(total);
            let share = u32::try_from(exact / weight).unwrap_or(u32::MAX);
            counts.insert(profile, share);
            assigned += share;
            remainders.push((exact % weight, profile));
        }
        remainders.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        for (_, profile) in remainders.into_iter().take((total - assigned) as usize) {
            *counts.entry(profile).or_default() += 1;
        }
        Ok(Self { counts })
    }

    /// The nodes of the fleet, named `kwok-<profile>-<index>`.
    pub fn nodes(&self) -> impl Iterator<Item = (Profile, String)> + '_ {
        self.counts
            .iter()
            .flat_map(|(&profile, &n)| (0..n).map(move |i| (profile, node_name(profile, i))))
    }
}

/// The name of the `index`-th simulated node of a profile.
pub fn node_name(profile: Profile, index: u32) -> String {
    format!("kwok-{profile}-{index}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_a_fleet() {
        let fleet: Fleet = "h100=2, cpu=1".parse().unwrap();
        assert_eq!(fleet.total(), 3);
        assert_eq!(fleet.count(Profile::H100), 2);
        assert_eq!(fleet.to_string(), "h100=2,cpu=1");
    }

    #[test]
    fn rejects_bad_fleets_with_a_hint() {
        let unknown = "h200=1".parse::<Fleet>().unwrap_err().to_string();
        assert!(
            unknown.contains("unknown fleet profile `h200`")
                && unknown.contains("h100, a100, t4, cpu"),
            "{unknown}"
        );
        assert!(
            "h100"
                .parse::<Fleet>()
                .unwrap_err()
                .to_string()
                .contains("PROFILE=COUNT")
        );
        assert!(
            "h100=-1"
                .parse::<Fleet>()
                .unwrap_err()
                .to_string()
                .contains("not a node count")
        );
        assert!(
            "h100=0"
                .parse::<Fleet>()
                .unwrap_err()
                .to_string()
                .contains("has no nodes")
        );
        assert!(
            "h100=1,h100=2"
                .parse::<Fleet>()
                .unwrap_err()
                .to_string()
                .contains("twice")
        );
    }

    #[test]
    fn scaling_keeps_the_mix_and_the_exact_total() {
        let fleet = Fleet::default().scaled_to(5000).unwrap();
        assert_eq!(fleet.total(), 5000);
        assert_eq!(fleet.count(Profile::Cpu), 714);
        let small = Fleet::default().scaled_to(3).unwrap();
        assert_eq!(small.total(), 3);
        assert!(Fleet::default().scaled_to(0).is_err());
    }

    #[test]
    fn gpu_profiles_carry_nfd_and_capacity_and_cpu_nodes_do_not() {
        let h100 = Profile::H100.node("n");
        let labels = h100.metadata.labels.unwrap();
        assert_eq!(labels[NFD_NVIDIA_PCI], "true");
        assert_eq!(labels["nvidia.com/mig.capable"], "true");
        assert_eq!(
            labels["feature.node.kubernetes.io/system-os_release.ID"],
            "ubuntu"
        );
        assert!(
            !labels.contains_key("nvidia.com/gpu.present"),
            "operator-written labels must be absent"
        );
        let status = h100.status.unwrap();
        assert_eq!(status.capacity.unwrap()["nvidia.com/gpu"].0, "8");
        assert_eq!(
            status.node_info.unwrap().container_runtime_version,
            "containerd://1.7.27"
        );

        let cpu = Profile::Cpu.node("c");
        assert!(
            !cpu.metadata
                .labels
                .unwrap()
                .keys()
                .any(|k| k.contains("pci-10de") || k.starts_with("nvidia.com/"))
        );
        assert!(
            !cpu.status
                .unwrap()
                .capacity
                .unwrap()
                .contains_key("nvidia.com/gpu")
        );
    }

    #[test]
    fn node_names_are_unique_across_the_fleet() {
        let fleet = Fleet::default().scaled_to(100).unwrap();
        let names: std::collections::BTreeSet<String> = fleet.nodes().map(|(_, n)| n).collect();
        assert_eq!(names.len(), 100);
    }
}
