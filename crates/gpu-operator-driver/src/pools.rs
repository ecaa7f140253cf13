//! Which driver DaemonSets the GPU nodes need, by NVIDIA's rules. A driver image is built for one
//! OS (`<version>-ubuntu22.04`, `-rhel9`), and with precompiled drivers for one kernel too
//! (`<branch>-<kernel>-<os>`):
//! - precompiled: one DaemonSet per (OS, kernel) of the GPU nodes,
//!   `nvidia-driver-daemonset-<sanitized kernel>-<os id><os version>`, selecting that kernel
//!   and OS;
//! - one OS among the GPU nodes: the single `nvidia-driver-daemonset`, selecting that OS;
//! - several OSes: one DaemonSet per OS, `nvidia-driver-daemonset-<os id><os version>`,
//!   selecting that OS (NVIDIA's ClusterPolicy would give every node the first node's OS; its
//!   NVIDIADriver pools split by OS like this).
//!
//! A DaemonSet keeps the OS it runs for: a driver pod restart unloads the kernel module under
//! running GPU jobs, so a second OS appearing must not rename (delete and recreate) the DaemonSet
//! of the first. A live driver DaemonSet selecting an OS the GPU nodes still have keeps its name
//! (so `nvidia-driver-daemonset` stays for the first OS, and the newcomer gets a per-OS one); a
//! live `nvidia-driver-daemonset` without an OS selector (NVIDIA's, or ours before it had one)
//! belongs to the OS its image is built for. Because the single DaemonSet selects its OS from the
//! start, its pod template does not change when another OS arrives. The DaemonSet of an OS no
//! node has any more is no longer rendered, and pruned.
//!
//! GPU nodes without the labels a pool needs get no driver pod; [`unserved`] says so.

use std::collections::BTreeMap;

use gpu_operator_api::labels::{NFD_KERNEL_VERSION, NFD_OS_RELEASE_ID, NFD_OS_RELEASE_VERSION_ID};
pub use gpu_operator_core::build::image::os_tag;
use gpu_operator_core::{
    build::runtime_class::ContainerRuntime,
    cache::facts::{ClusterFacts, OsRelease},
};

use crate::DAEMONSET;

/// One driver DaemonSet: the nodes it selects and the images it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool {
    /// DaemonSet name.
    pub name: String,
    /// The OS of its nodes.
    pub os: OsRelease,
    /// The kernel of its nodes (precompiled drivers only).
    pub kernel: Option<String>,
    /// The container runtime of its nodes (RHEL entitlement mounts depend on it), from the nodes
    /// of its OS only.
    pub runtime: ContainerRuntime,
    /// Node labels it selects on, besides `nvidia.com/gpu.deploy.driver=true`.
    pub node_selector: BTreeMap<String, String>,
    /// The driver image (also run by the peermem sidecar).
    pub driver_image: String,
    /// The GPUDirect Storage sidecar image, when `gds.enabled`.
    pub gds_image: Option<String>,
    /// The GDRCopy sidecar image, when `gdrcopy.enabled`.
    pub gdrcopy_image: Option<String>,
}

/// A kernel version fit for an object name: the architecture (`x86_64`, `aarch64`, with an
/// optional `_64k`) removed, `_` turned into `.`, no trailing `.`, lower case.
pub fn sanitized_kernel(kernel: &str) -> String {
    let mut text = kernel.to_owned();
    for arch in ["x86_64_64k", "aarch64_64k", "x86_64", "aarch64"] {
        text = text.replace(arch, "");
    }
    text.replace('_', ".").trim_end_matches('.').to_lowercase()
}

/// The pools' names and selectors (images are resolved by validation).
pub fn layout(facts: &ClusterFacts, precompiled: bool) -> Vec<(String, OsRelease, Option<String>)> {
    if precompiled {
        return facts
            .os_kernels
            .iter()
            .map(|(os, kernel)| {
                let name = format!(
                    "{DAEMONSET}-{}-{}{}",
                    sanitized_kernel(kernel),
                    os.id,
                    os.version_id
                );
                (name, os.clone(), Some(kernel.clone()))
            })
            .collect();
    }
    let kept = live_names(facts);
    let single = facts.os_releases.len() == 1 && kept.is_empty();
    let unsuffixed_taken = kept.values().any(|name| name == DAEMONSET);
    facts
        .os_releases
        .iter()
        .map(|os| {
            let name = match kept.get(os) {
                Some(name) => name.clone(),
                None if single && !unsuffixed_taken => DAEMONSET.to_owned(),
                None => format!("{DAEMONSET}-{}{}", os.id, os.version_id),
            };
            (name, os.clone(), None)
        })
        .collect()
}

/// The live (non-precompiled) driver DaemonSets by the OS they run for, among the GPU nodes'
/// OSes: from their OS selector, or for a selector-less `nvidia-driver-daemonset` from the OS
/// tag its driver image ends with.
fn live_names(facts: &ClusterFacts) -> BTreeMap<OsRelease, String> {
    let mut kept = BTreeMap::new();
    for (name, live) in &facts.daemonsets {
        let suffix = name.strip_prefix(DAEMONSET);
        if !suffix.is_some_and(|s| s.is_empty() || s.starts_with('-')) {
            continue;
        }
        let selected = match (
            live.node_selector.get(NFD_OS_RELEASE_ID),
            live.node_selector.get(NFD_OS_RELEASE_VERSION_ID),
        ) {
            (Some(id), Some(version_id))
                if !live.node_selector.contains_key(NFD_KERNEL_VERSION) =>
            {
                Some(OsRelease {
                    id: id.clone(),
                    version_id: version_id.clone(),
                })
            }
            (None, None) if name == DAEMONSET => facts
                .os_releases
                .iter()
                .find(|os| {
                    let tag = format!("-{}", os_tag(os));
                    live.images.iter().any(|image| image.ends_with(&tag))
                })
                .cloned(),
            _ => None,
        };
        if let Some(os) = selected.filter(|os| facts.os_releases.contains(os)) {
            // The unsuffixed name wins if two DaemonSets claim one OS (it is what users watch).
            if name == DAEMONSET || !kept.contains_key(&os) {
                kept.insert(os, name.clone());
            }
        }
    }
    kept
}

/// The node selector of a pool beyond the deploy label: its OS, and its kernel if precompiled.
pub fn node_selector(os: &OsRelease, kernel: Option<&str>) -> BTreeMap<String, String> {
    let mut selector = BTreeMap::new();
    selector.insert(NFD_OS_RELEASE_ID.to_owned(), os.id.clone());
    selector.insert(NFD_OS_RELEASE_VERSION_ID.to_owned(), os.version_id.clone());
    if let Some(kernel) = kernel {
        selector.insert(NFD_KERNEL_VERSION.to_owned(), kernel.to_owned());
    }
    selector
}

/// Says which GPU nodes no pool selects, if any.
pub fn unserved(facts: &ClusterFacts, precompiled: bool) -> Option<String> {
    let mut missing = Vec::new();
    if facts.gpu_nodes_without_os > 0 {
        missing.push(format!(
            "{} GPU node(s) lack NFD's {NFD_OS_RELEASE_ID} or VERSION_ID label",
            facts.gpu_nodes_without_os
        ));
    }
    if precompiled && facts.gpu_nodes_without_kernel > 0 {
        missing.push(format!(
            "{} GPU node(s) lack NFD's {NFD_KERNEL_VERSION} label",
            facts.gpu_nodes_without_kernel
        ));
    }
    (!missing.is_empty()).then(|| {
        format!(
            "{}, so no driver image can be chosen for them and they get no driver pod: run Node \
             Feature Discovery on every GPU node",
            missing.join(" and ")
        )
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn os(id: &str, version: &str) -> OsRelease {
        OsRelease {
            id: id.into(),
            version_id: version.into(),
        }
    }

    fn facts(nodes: &[(OsRelease, &str)]) -> ClusterFacts {
        ClusterFacts {
            gpu_nodes: nodes.len(),
            os_releases: nodes.iter().map(|(o, _)| o.clone()).collect(),
            kernels: nodes.iter().map(|(_, k)| (*k).to_owned()).collect(),
            os_kernels: nodes
                .iter()
                .map(|(o, k)| (o.clone(), (*k).to_owned()))
                .collect::<BTreeSet<_>>(),
            ..ClusterFacts::default()
        }
    }

    #[test]
    fn kernels_are_sanitized_for_object_names() {
        assert_eq!(
            sanitized_kernel("5.14.0-427.13.1.el9_4.x86_64"),
            "5.14.0-427.13.1.el9.4"
        );
        assert_eq!(sanitized_kernel("6.8.0-1021-aws"), "6.8.0-1021-aws");
        assert_eq!(
            sanitized_kernel("5.14.0-427.el9.aarch64_64k"),
            "5.14.0-427.el9"
        );
    }

    #[test]
    fn one_os_gives_the_single_daemonset_and_several_give_one_per_os() {
        let one = facts(&[(os("ubuntu", "22.04"), "a"), (os("ubuntu", "22.04"), "b")]);
        let names: Vec<String> = layout(&one, false).into_iter().map(|p| p.0).collect();
        assert_eq!(names, ["nvidia-driver-daemonset"]);
        let mixed = facts(&[(os("ubuntu", "22.04"), "a"), (os("rhel", "9.4"), "b")]);
        let names: Vec<String> = layout(&mixed, false).into_iter().map(|p| p.0).collect();
        assert_eq!(
            names,
            [
                "nvidia-driver-daemonset-rhel9.4",
                "nvidia-driver-daemonset-ubuntu22.04"
            ]
        );
    }

    #[test]
    fn precompiled_gives_one_daemonset_per_kernel_selecting_it() {
        let fleet = facts(&[
            (os("ubuntu", "22.04"), "6.8.0-1021-aws"),
            (os("ubuntu", "22.04"), "6.8.0-1024-aws"),
        ]);
        let pools = layout(&fleet, true);
        let names: Vec<&str> = pools.iter().map(|p| p.0.as_str()).collect();
        assert_eq!(
            names,
            [
                "nvidia-driver-daemonset-6.8.0-1021-aws-ubuntu22.04",
                "nvidia-driver-daemonset-6.8.0-1024-aws-ubuntu22.04"
            ]
        );
        let selector = node_selector(&pools[0].1, pools[0].2.as_deref());
        assert_eq!(selector[NFD_KERNEL_VERSION], "6.8.0-1021-aws");
    }

    #[test]
    fn nodes_without_nfd_labels_are_reported() {
        let mut fleet = facts(&[(os("ubuntu", "22.04"), "k")]);
        fleet.gpu_nodes_without_os = 2;
        let message = unserved(&fleet, false).unwrap();
        assert!(message.starts_with("2 GPU node(s) lack"), "{message}");
        fleet.gpu_nodes_without_os = 0;
        fleet.gpu_nodes_without_kernel = 1;
        assert_eq!(unserved(&fleet, false), None);
        assert!(
            unserved(&fleet, true)
                .unwrap()
                .contains("kernel-version.full")
        );
    }

    fn live(
        selector: Option<&OsRelease>,
        image: &str,
    ) -> gpu_operator_core::cache::facts::LiveDaemonSet {
        gpu_operator_core::cache::facts::LiveDaemonSet {
            node_selector: selector
                .map(|os| {
                    BTreeMap::from([
                        (NFD_OS_RELEASE_ID.to_owned(), os.id.clone()),
                        (NFD_OS_RELEASE_VERSION_ID.to_owned(), os.version_id.clone()),
                    ])
                })
                .unwrap_or_default(),
            images: vec![image.to_owned()],
        }
    }

    fn names(facts: &ClusterFacts) -> Vec<(String, String)> {
        layout(facts, false)
            .into_iter()
            .map(|(name, os, _)| (name, os_tag(&os)))
            .collect()
    }

    /// The mixed-OS transition: the first OS keeps `nvidia-driver-daemonset` (with an unchanged
    /// selector) when a second OS arrives, and again once it leaves; the second OS's DaemonSet
    /// goes with its last node.
    #[test]
    fn a_second_os_gets_its_own_daemonset_and_the_first_keeps_its_name() {
        let ubuntu = os("ubuntu", "22.04");
        let rhel = os("rhel", "9.4");
        let mut fleet = facts(&[(ubuntu.clone(), "k")]);
        assert_eq!(
            names(&fleet),
            [(DAEMONSET.to_owned(), "ubuntu22.04".to_owned())]
        );
        let first = layout(&fleet, false).remove(0);
        let image = "nvcr.io/nvidia/driver:580-ubuntu22.04";
        fleet
            .daemonsets
            .insert(DAEMONSET.to_owned(), live(Some(&first.1), image));
        fleet.os_releases.insert(rhel.clone());
        assert_eq!(
            names(&fleet),
            [
                (
                    "nvidia-driver-daemonset-rhel9.4".to_owned(),
                    "rhel9".to_owned()
                ),
                (DAEMONSET.to_owned(), "ubuntu22.04".to_owned()),
            ]
        );
        // While both run, the per-OS one is live too; the RHEL nodes then leave.
        fleet.daemonsets.insert(
            "nvidia-driver-daemonset-rhel9.4".to_owned(),
            live(Some(&rhel), "nvcr.io/nvidia/driver:580-rhel9"),
        );
        fleet.os_releases.remove(&rhel);
        assert_eq!(
            names(&fleet),
            [(DAEMONSET.to_owned(), "ubuntu22.04".to_owned())]
        );
        // If instead the first OS leaves, the second keeps its per-OS name: no restart.
        fleet.os_releases = [rhel.clone()].into();
        assert_eq!(
            names(&fleet),
            [(
                "nvidia-driver-daemonset-rhel9.4".to_owned(),
                "rhel9".to_owned()
            )]
        );
    }

    /// NVIDIA's (or an older) `nvidia-driver-daemonset` has no OS selector: it belongs to the OS
    /// its image is built for.
    #[test]
    fn a_selectorless_daemonset_keeps_the_os_of_its_image() {
        let ubuntu = os("ubuntu", "22.04");
        let rhel = os("rhel", "9.4");
        let mut fleet = facts(&[(ubuntu, "k"), (rhel, "k")]);
        fleet.daemonsets.insert(
            DAEMONSET.to_owned(),
            live(None, "nvcr.io/nvidia/driver:580.95.05-rhel9"),
        );
        assert_eq!(
            names(&fleet),
            [
                (DAEMONSET.to_owned(), "rhel9".to_owned()),
                (
                    "nvidia-driver-daemonset-ubuntu22.04".to_owned(),
                    "ubuntu22.04".to_owned()
                ),
            ]
        );
    }
}
