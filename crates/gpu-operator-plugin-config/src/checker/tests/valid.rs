//! §9.1: configurations the device plugin accepts. Most are clean; device selections are
//! accepted but stripped, so they warn.

use super::{UUID, assert_clean, check};

#[test]
fn dp_ok_min_and_empty_documents_are_the_defaults() {
    assert_clean("version: v1\n");
    assert_clean("");
    assert_clean("---\n");
    assert_clean("# only a comment\n");
    assert_clean("{}");
}

#[test]
fn dp_ok_noversion() {
    assert_clean("flags: {migStrategy: mixed}\n");
}

#[test]
fn dp_ok_flags() {
    assert_clean(
        "version: v1
flags:
  migStrategy: single
  failOnInitError: true
  nvidiaDriverRoot: /run/nvidia/driver
  plugin:
    passDeviceSpecs: true
    deviceListStrategy: envvar
    deviceIDStrategy: uuid
  gfd:
    oneshot: false
    sleepInterval: 60s
",
    );
}

#[test]
fn dp_ok_cdi_list() {
    assert_clean("flags: {plugin: {deviceListStrategy: [cdi-annotations, cdi-cri]}}\n");
}

#[test]
fn dp_ok_ts4_in_yaml_and_json() {
    assert_clean(
        "version: v1
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 4
",
    );
    assert_clean(
        r#"{"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}"#,
    );
    assert_clean(
        "{\n\t\"version\": \"v1\",\n\t\"flags\": {\n\t\t\"migStrategy\": \"none\"\n\t}\n}\n",
    );
}

#[test]
fn dp_ok_ts_rename() {
    assert_clean(
        "sharing:
  timeSlicing:
    renameByDefault: true
    failRequestsGreaterThanOne: true
    resources:
    - name: nvidia.com/gpu
      replicas: 10
",
    );
    // Spelling out the default rename is no change.
    assert_clean(
        "sharing:
  timeSlicing:
    renameByDefault: true
    resources: [{name: gpu, rename: gpu.shared, replicas: 10}]
",
    );
}

#[test]
fn dp_ok_shortname() {
    assert_clean("sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2}]}}\n");
}

#[test]
fn dp_ok_mig_ts() {
    assert_clean(
        "flags: {migStrategy: mixed}
sharing:
  timeSlicing:
    resources:
    - {name: nvidia.com/mig-1g.10gb, replicas: 2}
    - {name: nvidia.com/mig-1g.10gb.me, replicas: 3}
",
    );
}

#[test]
fn dp_ok_mps() {
    assert_clean(
        "flags: {mpsRoot: /run/nvidia/mps}
sharing:
  mps:
    resources: [{name: nvidia.com/gpu, replicas: 4}]
",
    );
    // The operator passes MPS_ROOT by env, so the file need not name it.
    assert_clean("sharing: {mps: {resources: [{name: nvidia.com/gpu, replicas: 4}]}}\n");
}

#[test]
fn dp_ok_devices_forms_parse_but_selections_warn() {
    let text = format!(
        "sharing:
  timeSlicing:
    resources:
    - {{name: nvidia.com/gpu, replicas: 2, devices: all}}
    - {{name: nvidia.com/mig-1g.10gb, replicas: 2, devices: 2}}
    - name: nvidia.com/mig-2g.20gb
      replicas: 2
      devices: [0, \"1\", \"0:1\", \"GPU-{UUID}\", \"MIG-GPU-{UUID}/1/0\", \"MIG-{UUID}\"]
"
    );
    let findings = check(&text);
    assert!(findings.errors.is_empty(), "{findings:#?}");
    let fields: Vec<&str> = findings.warnings.iter().map(|w| w.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "sharing.timeSlicing.resources[1].devices",
            "sharing.timeSlicing.resources[2].devices"
        ]
    );
    assert!(findings.warnings[0].message.contains("ignores `devices`"));
}

#[test]
fn dp_ok_imex() {
    assert_clean("imex: {channelIDs: [0], required: true}\n");
    assert_clean("imex: {channelIDs: []}\n");
}

#[test]
fn dp_ok_gfd_infinite() {
    assert_clean("flags: {gfd: {sleepInterval: infinite}}\n");
    assert_clean("flags: {gfd: {sleepInterval: \"1m30s\"}}\n");
    assert_clean("flags: {gfd: {sleepInterval: 60000000000}}\n");
}

#[test]
fn every_known_field_at_once_is_clean() {
    assert_clean(
        "version: v1
flags:
  migStrategy: none
  failOnInitError: false
  mpsRoot: /run/nvidia/mps
  nvidiaDriverRoot: /
  nvidiaDevRoot: /
  gdrcopyEnabled: false
  gdsEnabled: false
  mofedEnabled: false
  useNodeFeatureAPI: true
  deviceDiscoveryStrategy: auto
  plugin:
    passDeviceSpecs: true
    deviceListStrategy: [envvar, volume-mounts]
    deviceIDStrategy: index
    cdiAnnotationPrefix: cdi.k8s.io/
    nvidiaCTKPath: /usr/bin/nvidia-ctk
    containerDriverRoot: /driver-root
    sharedDevicesAllocationPolicy: packed
  gfd:
    oneshot: false
    noTimestamp: true
    sleepInterval: 0.5h
    outputFile: /etc/kubernetes/node-feature-discovery/features.d/gfd
    machineTypeFile: /sys/class/dmi/id/product_name
resources: {gpus: [], mig: null}
sharing:
  timeSlicing:
    renameByDefault: false
    failRequestsGreaterThanOne: false
    resources: [{name: gpu, replicas: 2, devices: all}]
imex: {channelIDs: [0], required: false}
",
    );
}
