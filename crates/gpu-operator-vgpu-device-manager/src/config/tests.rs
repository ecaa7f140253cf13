//! Tests of the vGPU device configuration checker: NVIDIA-style files pass, each bad case gives
//! its message.

use super::*;

/// A configuration in NVIDIA's style: time-sliced and MIG-backed types, a device filter, GPU
/// indexes, an empty `vgpu-devices`.
const GOOD: &str = r#"version: v1
vgpu-configs:
  A10-4C:
    - devices: all
      vgpu-devices:
        A10-4C: 6
  mixed:
    - device-filter: ["0x20B510DE", "0x20B810DE:0x151F10DE"]
      devices: [0, 1]
      vgpu-devices:
        A100D-1-10C: 7
    - device-filter: "0x223610DE"
      devices: all
      vgpu-devices:
        A10-12Q: 2
    - devices: [2]
      vgpu-devices: {}
  unknown-model:
    - devices: all
      vgpu-devices:
        M60-0Q: 16
"#;

fn one(text: &str) -> String {
    configs(text).unwrap_err()
}

fn with_devices(devices: &str) -> String {
    one(&format!(
        "version: v1\nvgpu-configs:\n  c:\n    - devices: all\n      vgpu-devices: {devices}\n"
    ))
}

#[test]
fn an_nvidia_style_file_passes_with_its_configuration_names() {
    assert_eq!(configs(GOOD).unwrap(), ["A10-4C", "mixed", "unknown-model"]);
}

#[test]
fn the_default_configuration_passes_the_checker() {
    let names = configs(catalog::default_config()).unwrap();
    assert_eq!(names.len(), 711);
    assert_eq!(
        names,
        catalog::default_config_names()
            .filter(|n| *n != "default")
            .chain(["default"])
            .collect::<Vec<_>>()
    );
}

#[test]
fn the_document_and_its_top_fields() {
    assert!(
        one("version: [").starts_with("not YAML: "),
        "{}",
        one("version: [")
    );
    assert_eq!(
        one("- a"),
        "not a vGPU device configuration: expected a mapping with version and vgpu-configs"
    );
    assert_eq!(
        one("version: v2\nvgpu-configs:\n  c: [{devices: all, vgpu-devices: {}}]\n"),
        "version: \"v2\" is not v1, the only version the vGPU device manager reads"
    );
    assert_eq!(
        one("vgpu-configs:\n  c: [{devices: all, vgpu-devices: {}}]\nmig-configs: {}\n"),
        "unexpected field \"mig-configs\" (a vGPU device configuration has version and \
         vgpu-configs only); version: missing, set it to v1"
    );
    assert_eq!(
        one("version: v1\n"),
        "vgpu-configs: missing or empty, name at least one configuration"
    );
    assert_eq!(
        one("version: v1\nvgpu-configs:\n  c: []\n"),
        "vgpu-configs.c: expected a list of entries, each with devices and vgpu-devices"
    );
}

#[test]
fn an_entry_and_its_fields() {
    let entry = |body: &str| one(&format!("version: v1\nvgpu-configs:\n  c:\n    - {body}\n"));
    assert_eq!(
        entry("{vgpu-devices: {}}"),
        "vgpu-configs.c[0]: missing devices (all or GPU indexes)"
    );
    assert_eq!(
        entry("{devices: all}"),
        "vgpu-configs.c[0]: missing vgpu-devices (a map of vGPU type to count)"
    );
    assert_eq!(
        entry("{devices: some, vgpu-devices: {}}"),
        "vgpu-configs.c[0].devices: \"some\" is neither all nor a list of GPU indexes"
    );
    assert_eq!(
        entry("{devices: all, vgpu-devices: {}, mig-devices: {}}"),
        "vgpu-configs.c[0]: unexpected field \"mig-devices\" (an entry has device-filter, \
         devices and vgpu-devices)"
    );
    assert_eq!(
        entry("{devices: all, device-filter: A100, vgpu-devices: {}}"),
        "vgpu-configs.c[0].device-filter: \"A100\" is not a PCI device ID such as 0x20B510DE \
         (device 20B5, vendor 10DE)"
    );
    assert_eq!(
        entry("{devices: all, vgpu-devices: [A10-4C]}"),
        "vgpu-configs.c[0].vgpu-devices: - A10-4C is not a map of vGPU type to count"
    );
}

#[test]
fn each_vgpu_type_and_count() {
    assert_eq!(
        with_devices("{A10_4C: 1}"),
        format!(
            "vgpu-configs.c[0].vgpu-devices.A10_4C: not a vGPU type: {}",
            vgpu_type::SHAPE
        )
    );
    assert_eq!(
        with_devices("{A10-4C: 0}"),
        "vgpu-configs.c[0].vgpu-devices.A10-4C: count 0 is not a positive whole number"
    );
    assert_eq!(
        with_devices("{A100-4Q: 1}"),
        "vgpu-configs.c[0].vgpu-devices.A100-4Q: not a vGPU type of the A100 (its types: \
         A100-1-5C, A100-1-5CME, A100-1-10C, A100-2-10C, A100-3-20C, A100-4C, A100-4-20C, \
         A100-5C, A100-7-40C, A100-8C, A100-10C, A100-20C, A100-40C)"
    );
    let dc = with_devices("{DC-5Q: 1}");
    assert!(dc.ends_with(" and 51 more)"), "{dc}");
    assert_eq!(
        with_devices("{A100-4C: 1, A100-1-5C: 1}"),
        "vgpu-configs.c[0].vgpu-devices: mixes time-sliced A100-4C and MIG-backed A100-1-5C, \
         which one GPU cannot hold together: split them into entries for different devices"
    );
}

#[test]
fn many_problems_are_counted_past_the_tenth() {
    let devices: Vec<String> = (1..=12).map(|i| format!("X{i}: 0")).collect();
    let message = with_devices(&format!("{{{}}}", devices.join(", ")));
    assert!(message.ends_with("; and 14 more"), "{message}");
}
