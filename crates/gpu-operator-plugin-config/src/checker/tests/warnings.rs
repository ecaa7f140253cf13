//! §9.3: configurations the device plugin accepts but ignores or overrides in part. Each test
//! asserts the field path and a key phrase of the warning.

use super::{assert_warning, check, has};

#[test]
fn rename_by_default_under_flags_is_ignored() {
    assert_warning(
        "flags: {renameByDefault: true}\n",
        "flags.renameByDefault",
        "unknown key: the device plugin ignores it; `renameByDefault` belongs under sharing.timeSlicing or sharing.mps",
    );
}

#[test]
fn a_sharing_name_the_plugin_does_not_advertise_shares_nothing() {
    assert_warning(
        "sharing: {timeSlicing: {resources: [{name: nvidia.com/gpus, replicas: 2}]}}\n",
        "sharing.timeSlicing.resources[0].name",
        "advertises no resource nvidia.com/gpus",
    );
}

#[test]
fn time_slicing_and_mps_together_mps_wins() {
    assert_warning(
        "sharing:
  timeSlicing: {resources: [{name: gpu, replicas: 2}]}
  mps: {resources: [{name: gpu, replicas: 4}]}
",
        "sharing",
        "uses MPS and ignores time-slicing",
    );
}

#[test]
fn a_non_default_rename_is_stripped() {
    assert_warning(
        "sharing: {timeSlicing: {resources: [{name: gpu, rename: gpu-shared, replicas: 2}]}}\n",
        "sharing.timeSlicing.resources[0].rename",
        "does not support `rename` yet: it ignores it and keeps advertising nvidia.com/gpu",
    );
    assert_warning(
        "sharing: {mps: {renameByDefault: true, resources: [{name: gpu, rename: gpu-mps, replicas: 2}]}}\n",
        "sharing.mps.resources[0].rename",
        "advertises nvidia.com/gpu.shared, not nvidia.com/gpu-mps",
    );
}

#[test]
fn a_device_selection_is_stripped() {
    assert_warning(
        "sharing: {mps: {resources: [{name: gpu, replicas: 2, devices: [0]}]}}\n",
        "sharing.mps.resources[0].devices",
        "ignores `devices` and shares all of them",
    );
}

#[test]
fn resources_customisation_is_ignored() {
    assert_warning(
        "resources: {gpus: [{pattern: \"*\", name: gpu}]}\n",
        "resources.gpus",
        "customising resources is not supported yet",
    );
}

#[test]
fn an_unknown_top_level_key_is_ignored() {
    assert_warning(
        "sharring: {timeSlicing: {resources: [{name: gpu, replicas: 2}]}}\n",
        "sharring",
        "unknown key: the device plugin ignores it; did you mean `sharing`?",
    );
    assert_warning(
        "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2, replica: 4}]}}\n",
        "sharing.timeSlicing.resources[0].replica",
        "did you mean `replicas`?",
    );
    assert_warning(
        "flags: {passDeviceSpecs: true}\n",
        "flags.passDeviceSpecs",
        "belongs under flags.plugin",
    );
}

#[test]
fn keys_matched_only_by_ignoring_case() {
    // Plain sections match any capitalisation, as Go's encoding/json does.
    assert_warning(
        "Flags: {MigStrategy: single}\n",
        "Flags.MigStrategy",
        "write `migStrategy`",
    );
    // The plugin's own decoders do not: this `Resources` is ignored, so nothing is shared.
    let findings = check("sharing: {timeSlicing: {Resources: [{name: gpu, replicas: 2}]}}\n");
    assert!(
        has(
            &findings.warnings,
            "sharing.timeSlicing.Resources",
            "did you mean `resources`?"
        ),
        "{findings:#?}"
    );
    assert!(
        has(
            &findings.errors,
            "sharing.timeSlicing",
            "no resources specified"
        ),
        "{findings:#?}"
    );
}

#[test]
fn mps_on_a_mig_resource_cannot_work() {
    assert_warning(
        "sharing: {mps: {resources: [{name: nvidia.com/mig-1g.10gb, replicas: 2}]}}\n",
        "sharing.mps.resources[0].name",
        "MPS shares full GPUs only",
    );
}

#[test]
fn a_resource_listed_twice() {
    assert_warning(
        "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2}, {name: nvidia.com/gpu, replicas: 4}]}}\n",
        "sharing.timeSlicing.resources[1].name",
        "nvidia.com/gpu is listed more than once",
    );
}

#[test]
fn yaml_1_1_booleans_are_read_by_the_plugin_only() {
    assert_warning(
        "flags: {failOnInitError: yes}\n",
        "flags.failOnInitError",
        "read as true by the device plugin only",
    );
}

#[test]
fn sleep_intervals_that_relabel_continuously() {
    assert_warning(
        "flags: {gfd: {sleepInterval: 60}}\n",
        "flags.gfd.sleepInterval",
        "60 is 60ns",
    );
    assert_warning(
        "flags: {gfd: {sleepInterval: \"-1s\"}}\n",
        "flags.gfd.sleepInterval",
        "zero or less",
    );
}

#[test]
fn an_empty_device_list_strategy_list() {
    assert_warning(
        "flags: {plugin: {deviceListStrategy: []}}\n",
        "flags.plugin.deviceListStrategy",
        "selects no way",
    );
}

#[test]
fn only_the_first_document_is_read() {
    assert_warning(
        "version: v1\n---\nversion: v2\n",
        "",
        "more than one YAML document",
    );
}
