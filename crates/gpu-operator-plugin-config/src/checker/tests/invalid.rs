//! §9.2: configurations the device plugin refuses, while reading the file or at startup. Each
//! test asserts the field path and a key phrase of the error.

use super::{assert_error, check};

/// A time-slicing configuration whose one resource is `entry`.
fn time_slicing(entry: &str) -> String {
    format!("sharing:\n  timeSlicing:\n    resources:\n    - {entry}\n")
}

const ENTRY: &str = "sharing.timeSlicing.resources[0]";

#[test]
fn unknown_version() {
    assert_error("version: v2\n", "version", "unknown version `v2`");
    // The loader turns a number into text for a string field.
    assert_error("version: 1\n", "version", "unknown version `1`");
}

#[test]
fn unknown_mig_strategy() {
    assert_error(
        "flags: {migStrategy: auto}\n",
        "flags.migStrategy",
        "unknown MIG strategy `auto`",
    );
}

#[test]
fn invalid_device_id_strategy() {
    assert_error(
        "flags: {plugin: {deviceIDStrategy: serial}}\n",
        "flags.plugin.deviceIDStrategy",
        "invalid device ID strategy `serial`: use uuid or index",
    );
}

#[test]
fn invalid_device_list_strategy() {
    assert_error(
        "flags: {plugin: {deviceListStrategy: cdi}}\n",
        "flags.plugin.deviceListStrategy",
        "invalid device list strategy `cdi`",
    );
    assert_error(
        "flags: {plugin: {deviceListStrategy: [envvar, cdi]}}\n",
        "flags.plugin.deviceListStrategy[1]",
        "invalid device list strategy `cdi`",
    );
    // Neither a string nor a list of strings.
    assert_error(
        "flags: {plugin: {deviceListStrategy: {envvar: true}}}\n",
        "flags.plugin.deviceListStrategy",
        "expected a strategy or a list of strategies",
    );
    assert_error(
        "flags: {plugin: {deviceListStrategy: [1]}}\n",
        "flags.plugin.deviceListStrategy[0]",
        "invalid device list strategy 1",
    );
}

#[test]
fn invalid_shared_devices_allocation_policy() {
    assert_error(
        "flags: {plugin: {sharedDevicesAllocationPolicy: spread}}\n",
        "flags.plugin.sharedDevicesAllocationPolicy",
        "invalid shared devices allocation policy `spread`: use distributed or packed",
    );
}

#[test]
fn invalid_device_discovery_strategy() {
    assert_error(
        "flags: {deviceDiscoveryStrategy: pci}\n",
        "flags.deviceDiscoveryStrategy",
        "invalid device discovery strategy `pci`: use auto, nvml or tegra",
    );
}

#[test]
fn invalid_imex_channel_ids() {
    for ids in ["[1]", "[0, 1]"] {
        assert_error(
            &format!("imex: {{channelIDs: {ids}}}\n"),
            "imex.channelIDs",
            "invalid IMEX config: channelIDs must be [] or [0]",
        );
    }
    assert_error(
        "imex: {channelIDs: [zero]}\n",
        "imex.channelIDs[0]",
        "expected a whole number",
    );
}

#[test]
fn no_resources_specified() {
    let phrase = "no resources specified";
    assert_error(
        "sharing: {timeSlicing: {}}\n",
        "sharing.timeSlicing",
        phrase,
    );
    assert_error("sharing:\n  timeSlicing:\n", "sharing.timeSlicing", phrase);
    assert_error(
        "sharing: {mps: {renameByDefault: true}}\n",
        "sharing.mps",
        phrase,
    );
    assert_error(
        "sharing: {timeSlicing: {resources: []}}\n",
        "sharing.timeSlicing.resources",
        phrase,
    );
    assert_error(
        "sharing: {mps: {resources: null}}\n",
        "sharing.mps.resources",
        phrase,
    );
}

#[test]
fn no_resource_name_specified() {
    assert_error(
        &time_slicing("{replicas: 4}"),
        &format!("{ENTRY}.name"),
        "no resource name specified",
    );
}

#[test]
fn no_replicas_specified() {
    assert_error(
        &time_slicing("{name: gpu}"),
        &format!("{ENTRY}.replicas"),
        "no replicas specified",
    );
}

#[test]
fn fewer_than_two_replicas() {
    for replicas in ["1", "0", "-3", "null"] {
        assert_error(
            &time_slicing(&format!("{{name: gpu, replicas: {replicas}}}")),
            &format!("{ENTRY}.replicas"),
            "number of replicas must be >= 2",
        );
    }
}

#[test]
fn name_not_a_dns_subdomain() {
    assert_error(
        &time_slicing("{name: nvidia.com/GPU_Shared, replicas: 2}"),
        &format!("{ENTRY}.name"),
        "`GPU_Shared` is not a valid DNS-1123 subdomain",
    );
    assert_error(
        &time_slicing("{name: gpu, rename: Shared, replicas: 2}"),
        &format!("{ENTRY}.rename"),
        "not a valid DNS-1123 subdomain",
    );
}

#[test]
fn name_too_long() {
    let name = "g".repeat(53);
    assert_error(
        &time_slicing(&format!("{{name: {name}, replicas: 2}}")),
        &format!("{ENTRY}.name"),
        "is too long: 64 characters",
    );
}

#[test]
fn devices_string_other_than_all() {
    assert_error(
        &time_slicing("{name: gpu, replicas: 2, devices: some}"),
        &format!("{ENTRY}.devices"),
        "the only string allowed is \"all\"",
    );
}

#[test]
fn devices_count_not_positive() {
    assert_error(
        &time_slicing("{name: gpu, replicas: 2, devices: 0}"),
        &format!("{ENTRY}.devices"),
        "a count of devices must be > 0",
    );
}

#[test]
fn devices_list_item_unsupported() {
    for (item, shown) in [("\"gpu0\"", "\"gpu0\""), ("true", "true"), ("-1", "-1")] {
        assert_error(
            &time_slicing(&format!("{{name: gpu, replicas: 2, devices: [0, {item}]}}")),
            &format!("{ENTRY}.devices[1]"),
            &format!("unsupported device {shown} in the devices list"),
        );
    }
}

#[test]
fn devices_of_unrecognised_type() {
    assert_error(
        &time_slicing("{name: gpu, replicas: 2, devices: {a: 1}}"),
        &format!("{ENTRY}.devices"),
        "unrecognised type for devices",
    );
}

#[test]
fn mps_with_mixed_mig_strategy() {
    assert_error(
        "flags: {migStrategy: mixed, mpsRoot: /run/nvidia/mps}
sharing: {mps: {resources: [{name: gpu, replicas: 2}]}}
",
        "flags.migStrategy",
        "migStrategy mixed is not supported with MPS sharing (sharing.mps)",
    );
}

#[test]
fn mps_with_an_empty_mps_root() {
    assert_error(
        "flags: {mpsRoot: \"\"}\nsharing: {mps: {resources: [{name: gpu, replicas: 2}]}}\n",
        "flags.mpsRoot",
        "needs an MPS root, but mpsRoot is empty",
    );
    // Without MPS an empty root is no matter.
    assert!(check("flags: {mpsRoot: \"\"}\n").errors.is_empty());
}

#[test]
fn sleep_interval_not_a_duration() {
    assert_error(
        "flags: {gfd: {sleepInterval: \"5 minutes\"}}\n",
        "flags.gfd.sleepInterval",
        "invalid duration \"5 minutes\"",
    );
    assert_error(
        "flags: {gfd: {sleepInterval: true}}\n",
        "flags.gfd.sleepInterval",
        "invalid duration",
    );
}

#[test]
fn malformed_yaml_names_the_line() {
    let findings = assert_error(
        "version: v1\nflags: {migStrategy: mixed\n",
        "",
        "not valid YAML",
    );
    assert_eq!(findings.errors.len(), 1, "{findings:#?}");
    assert!(
        findings.errors[0].message.contains("line 3"),
        "{findings:#?}"
    );
    assert_error(
        "sharing:\n  timeSlicing:\n\tresources: []\n",
        "",
        "not valid YAML",
    );
}

#[test]
fn wrong_types_name_the_field_and_the_type() {
    assert_error(
        &time_slicing("{name: gpu, replicas: \"four\"}"),
        &format!("{ENTRY}.replicas"),
        "expected a whole number, found a string (\"four\")",
    );
    assert_error(
        &time_slicing("{name: gpu, replicas: 2.5}"),
        &format!("{ENTRY}.replicas"),
        "expected a whole number",
    );
    assert_error(
        "flags: {failOnInitError: maybe}\n",
        "flags.failOnInitError",
        "expected true or false, found a string (\"maybe\")",
    );
    assert_error(
        "flags: {plugin: {passDeviceSpecs: \"true\"}}\n",
        "flags.plugin.passDeviceSpecs",
        "expected true or false",
    );
    assert_error(
        &time_slicing("{name: 7, replicas: 2}"),
        &format!("{ENTRY}.name"),
        "expected a string, found a number (7)",
    );
    assert_error("flags: [migStrategy]\n", "flags", "expected a mapping");
    assert_error(
        "flags: {nvidiaDriverRoot: [/]}\n",
        "flags.nvidiaDriverRoot",
        "expected a string, found a list",
    );
    assert_error(
        "sharing: {timeSlicing: [gpu]}\n",
        "sharing.timeSlicing",
        "expected a mapping with `resources`",
    );
    assert_error(
        "sharing: {timeSlicing: {resources: {name: gpu}}}\n",
        "sharing.timeSlicing.resources",
        "expected a list",
    );
    assert_error("- version: v1\n", "", "must be a mapping");
}

#[test]
fn resources_entries_need_pattern_and_name() {
    assert_error(
        "resources: {gpus: [{name: gpu}]}\n",
        "resources.gpus[0].pattern",
        "must have a 'pattern' field set",
    );
    assert_error(
        "resources: {mig: [{pattern: \"*\"}]}\n",
        "resources.mig[0].name",
        "must have a 'name' field set",
    );
    assert_error(
        "resources: {gpus: [{pattern: \"*\", name: Big_GPU}]}\n",
        "resources.gpus[0].name",
        "not a valid DNS-1123 subdomain",
    );
}

#[test]
fn every_problem_is_reported_not_just_the_first() {
    let findings = check(
        "version: v3
flags: {migStrategy: auto, plugin: {deviceIDStrategy: serial}}
sharing: {timeSlicing: {resources: [{name: gpu, replicas: 1}]}}
",
    );
    let fields: Vec<&str> = findings.errors.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "version",
            "flags.migStrategy",
            "flags.plugin.deviceIDStrategy",
            "sharing.timeSlicing.resources[0].replicas"
        ]
    );
}
