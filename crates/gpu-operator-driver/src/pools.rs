//! Which driver DaemonSets the GPU nodes need, by NVIDIA's rules. A driver image is built for one
//! OS (`<version>-ubuntu22.04`, `-rhel9`), and with precompiled drivers for one kernel too
//! (`<branch>-<kernel>-<os>`):
//! - precompiled: one DaemonSet per (OS, kernel) of the GPU nodes,
//!   `nvidia-driver-daemonset-<sanitized kernel>-<os id><os version>`, selecting that kernel
//!   and OS;
//! - one OS among the GPU nodes: the single `nvidia-driver-daemonset`, with no OS selector;
//! - several OSes: one DaemonSet per OS, `nvidia-driver-daemonset-<os id><os version>`,
//!   selecting that OS (NVIDIA's ClusterPolicy would give every node the first node's OS; its
//!   NVIDIADriver pools split by OS like this).
//!
//! GPU nodes without the labels a pool needs get no driver pod; [`unserved`] says so.

use std::collections::BTreeMap;

use gpu_operator_api::labels::{NFD_KERNEL_VERSION, NFD_OS_RELEASE_ID, NFD_OS_RELEASE_VERSION_ID};
use gpu_operator_core::facts::{ClusterFacts, OsRelease};

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
    /// Node labels it selects on, besides `nvidia.com/gpu.deploy.driver=true`.
    pub node_selector: BTreeMap<String, String>,
    /// The driver image (also run by the peermem sidecar).
    pub driver_image: String,
    /// The GPUDirect Storage sidecar image, when `gds.enabled`.
    pub gds_image: Option<String>,
    /// The GDRCopy sidecar image, when `gdrcopy.enabled`.
    pub gdrcopy_image: Option<String>,
}

/// The image tag suffix of an OS: `<id><VERSION_ID>`, with only the major version for RHEL,
/// Rocky Linux and Oracle Linux (`ubuntu22.04`, `rhel9`).
pub fn os_tag(os: &OsRelease) -> String {
    let version = match os.id.as_str() {
        "rhel" | "rocky" | "ol" => os.version_id.split('.').next().unwrap_or_default(),
        _ => os.version_id.as_str(),
    };
    format!("{}{version}", os.id)
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
    match facts.os_releases.len() {
        1 => facts
            .os_releases
            .iter()
            .map(|os| (DAEMONSET.to_owned(), os.clone(), None))
            .collect(),
        _ => facts
            .os_releases
            .iter()
            .map(|os| {
                let name = format!("{DAEMONSET}-{}{}", os.id, os.version_id);
                (name, os.clone(), None)
            })
            .collect(),
    }
}

/// The node selector of a pool beyond the deploy label.
pub fn node_selector(
    os: &OsRelease,
    kernel: Option<&str>,
    split_by_os: bool,
) -> BTreeMap<String, String> {
    let mut selector = BTreeMap::new();
    if split_by_os || kernel.is_some() {
        selector.insert(NFD_OS_RELEASE_ID.to_owned(), os.id.clone());
        selector.insert(NFD_OS_RELEASE_VERSION_ID.to_owned(), os.version_id.clone());
    }
    if let Some(kernel) = kernel {
        selector.insert(NFD_KERNEL_VERSION.to_owned(), kernel.to_owned());
    }
    selector
}

/// Says which GPU nodes no pool selects, if any.
pub fn unserved(facts: &ClusterFacts, precompiled: bool) -> Option<String> {
    let single_os = !precompiled && facts.os_releases.len() == 1;
    let mut missing = Vec::new();
    if facts.gpu_nodes_without_os > 0 && !single_os {
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
    fn os_tag_keeps_the_full_version_except_major_only_for_rhel_rocky_and_oracle() {
        assert_eq!(os_tag(&os("ubuntu", "22.04")), "ubuntu22.04");
        assert_eq!(os_tag(&os("rhel", "9.4")), "rhel9");
        assert_eq!(os_tag(&os("rocky", "8.10")), "rocky8");
        assert_eq!(os_tag(&os("ol", "9.3")), "ol9");
        assert_eq!(os_tag(&os("sles", "15.5")), "sles15.5");
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
        let selector = node_selector(&pools[0].1, pools[0].2.as_deref(), false);
        assert_eq!(selector[NFD_KERNEL_VERSION], "6.8.0-1021-aws");
    }

    #[test]
    fn nodes_without_nfd_labels_are_reported_unless_one_os_serves_everyone() {
        let mut fleet = facts(&[(os("ubuntu", "22.04"), "k")]);
        fleet.gpu_nodes_without_os = 2;
        assert_eq!(unserved(&fleet, false), None);
        fleet.os_releases.insert(os("rhel", "9.4"));
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
}
