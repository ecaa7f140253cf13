//! Facts read from fake host trees, and the labels they give. The device facts are those of a
//! real H100 host (sysfs read by the lead: vendor 0x10de, class 0x030200, device 0x2330) and of
//! real os-release files.

use std::{fs, path::Path};

use super::*;

fn device(root: &Path, address: &str, vendor: &str, class: &str) {
    let dir = root.join(PCI_DEVICES).join(address);
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("vendor"), format!("{vendor}\n")).unwrap();
    fs::write(dir.join("class"), format!("{class}\n")).unwrap();
}

fn file(root: &Path, path: &str, text: &str) {
    let path = root.join(path);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

const UBUNTU: &str = "PRETTY_NAME=\"Ubuntu 24.04.3 LTS\"\nNAME=\"Ubuntu\"\nVERSION_ID=\"24.04\"\nVERSION=\"24.04.3 LTS (Noble Numbat)\"\nID=ubuntu\nID_LIKE=debian\n";

fn h100_host(root: &Path) {
    device(root, "0000:00:00.0", "0x8086", "0x060000");
    device(root, "0000:00:05.0", "0x10de", "0x030200");
    file(root, KERNEL_RELEASE, "6.18.44-fc-v657-gpu\n");
    file(root, "etc/os-release", UBUNTU);
}

#[test]
fn an_h100_host_gives_nvidias_nfd_labels() {
    let root = tempfile::tempdir().unwrap();
    h100_host(root.path());
    let labels = labels(&read(root.path(), false));
    let expected: BTreeMap<String, String> = [
        ("feature.node.kubernetes.io/pci-10de.present", "true"),
        ("feature.node.kubernetes.io/pci-0302_10de.present", "true"),
        (
            "feature.node.kubernetes.io/kernel-version.full",
            "6.18.44-fc-v657-gpu",
        ),
        ("feature.node.kubernetes.io/system-os_release.ID", "ubuntu"),
        (
            "feature.node.kubernetes.io/system-os_release.VERSION_ID",
            "24.04",
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    assert_eq!(labels, expected);
}

#[test]
fn a_vga_gpu_gives_the_0300_form_and_upper_case_ids_match() {
    let root = tempfile::tempdir().unwrap();
    device(root.path(), "0000:01:00.0", "0x10DE", "0x030000");
    device(root.path(), "0000:01:00.1", "0x10de", "0x040300"); // its audio function
    let labels = labels(&read(root.path(), false));
    assert_eq!(
        labels.get(PCI_VGA_PRESENT).map(String::as_str),
        Some("true")
    );
    assert_eq!(
        labels.get(PCI_VENDOR_PRESENT).map(String::as_str),
        Some("true")
    );
    assert!(!labels.contains_key(PCI_3D_PRESENT));
}

#[test]
fn a_host_without_nvidia_devices_gets_only_os_and_kernel() {
    let root = tempfile::tempdir().unwrap();
    device(root.path(), "0000:00:00.0", "0x8086", "0x060000");
    device(root.path(), "0000:00:02.0", "0x1234", "0x030200");
    file(
        root.path(),
        KERNEL_RELEASE,
        "5.14.0-427.13.1.el9_4.x86_64\n",
    );
    // RHEL keeps os-release in /usr/lib only on some images.
    file(
        root.path(),
        "usr/lib/os-release",
        "NAME=\"Red Hat Enterprise Linux\"\nVERSION_ID=\"9.4\"\nID=\"rhel\"\n",
    );
    let labels = labels(&read(root.path(), false));
    assert_eq!(
        labels.keys().map(String::as_str).collect::<Vec<_>>(),
        [
            "feature.node.kubernetes.io/kernel-version.full",
            "feature.node.kubernetes.io/system-os_release.ID",
            "feature.node.kubernetes.io/system-os_release.VERSION_ID",
        ]
    );
    assert_eq!(labels[NFD_OS_RELEASE_ID], "rhel");
    assert_eq!(labels[NFD_KERNEL_VERSION], "5.14.0-427.13.1.el9_4.x86_64");
}

#[test]
fn an_empty_tree_gives_no_labels_and_invalid_values_are_left_out() {
    let root = tempfile::tempdir().unwrap();
    assert_eq!(read(root.path(), false), HostFacts::default());
    assert!(labels(&read(root.path(), false)).is_empty());
    file(root.path(), KERNEL_RELEASE, "6.1.0+custom build\n");
    file(
        root.path(),
        "etc/os-release",
        "ID='debian'\n# comment\nVERSION_ID=12\n",
    );
    let labels = labels(&read(root.path(), false));
    assert!(!labels.contains_key(NFD_KERNEL_VERSION), "{labels:?}");
    assert_eq!(labels[NFD_OS_RELEASE_ID], "debian");
    assert_eq!(labels[NFD_OS_RELEASE_VERSION_ID], "12");
}

#[test]
fn label_values_follow_kubernetes_rules() {
    for good in ["", "true", "24.04", "6.8.0-1015-aws", "rhel"] {
        assert!(is_label_value(good), "{good}");
    }
    for bad in ["-x", "x-", "a b", "6.1+x", &"a".repeat(64)] {
        assert!(!is_label_value(bad), "{bad}");
    }
}
