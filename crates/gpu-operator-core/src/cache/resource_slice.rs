//! A `resource.k8s.io/v1` ResourceSlice of NVIDIA's DRA driver as its cache holds it: its node,
//! driver, pool (name, generation, slice count) and what its devices are, counted by their
//! `type` attribute (`gpu`, `mig`, `vfio`), with the physical GPUs they stand for (a `gpu`
//! device's `uuid`, else its name; a `mig` device's `parentUUID`). Attribute names are read
//! bare or qualified with the driver's domain (`gpu.nvidia.com/type`). Nothing else: a slice lists every attribute
//! and capacity of every device (kilobytes on an 8-GPU node with MIG profiles), which serde
//! skips instead of allocating. What the DRA readiness reads (`gpu-operator-status`).

use k8s_openapi::{ClusterResourceScope, api::resource::v1::ResourceSlice};
use kube::api::ObjectMeta;
use serde::Deserialize;
use std::collections::BTreeMap;

/// The driver name NVIDIA's DRA driver publishes its GPUs under, and the field selector of the
/// cache (`spec.driver`).
pub const NVIDIA_GPU_DRIVER: &str = "gpu.nvidia.com";

/// The devices of one slice, by their `type` attribute.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceCounts {
    /// Whole GPUs (`type: gpu`).
    pub gpu: u32,
    /// MIG devices (`type: mig`).
    pub mig: u32,
    /// GPUs bound to vfio-pci for VMs (`type: vfio`).
    pub vfio: u32,
    /// Devices of another type, or of none.
    pub other: u32,
}

/// One ResourceSlice, narrowed (see the module header).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(from = "Wire")]
pub struct SliceSummary {
    metadata: ObjectMeta,
    /// `spec.nodeName`; empty for a slice of no single node.
    pub node: String,
    /// `spec.driver`.
    pub driver: String,
    /// `spec.pool.name`.
    pub pool: String,
    /// `spec.pool.generation`.
    pub generation: i64,
    /// `spec.pool.resourceSliceCount`: how many slices the pool has at this generation.
    pub slice_count: i64,
    /// Its devices by type.
    pub devices: DeviceCounts,
    /// The physical GPUs its `gpu` and `mig` devices stand for (UUIDs, sorted, once each).
    pub physical_gpus: Vec<String>,
}

impl SliceSummary {
    /// A slice named `name` of `driver` on `node`, in `pool` at `generation` of `slice_count`
    /// slices (for tests and fixtures; the devices are set on the result).
    pub fn new(
        name: &str,
        node: &str,
        driver: &str,
        (pool, generation, slice_count): (&str, i64, i64),
    ) -> Self {
        Self {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            node: node.to_owned(),
            driver: driver.to_owned(),
            pool: pool.to_owned(),
            generation,
            slice_count,
            ..Self::default()
        }
    }
}

crate::projection!(SliceSummary, ResourceSlice, ClusterResourceScope);

/// The parts of a ResourceSlice's JSON that are read; serde skips every other field.
#[derive(Deserialize)]
struct Wire {
    #[serde(default)]
    metadata: WireMeta,
    #[serde(default)]
    spec: WireSpec,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireMeta {
    name: Option<String>,
    resource_version: Option<String>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireSpec {
    #[serde(default)]
    node_name: Option<String>,
    #[serde(default)]
    driver: String,
    #[serde(default)]
    pool: WirePool,
    #[serde(default)]
    devices: Vec<WireDevice>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WirePool {
    #[serde(default)]
    name: String,
    #[serde(default)]
    generation: i64,
    #[serde(default)]
    resource_slice_count: i64,
}

#[derive(Default, Deserialize)]
struct WireDevice {
    #[serde(default)]
    name: String,
    #[serde(default)]
    attributes: BTreeMap<String, WireAttribute>,
}

/// A device attribute; only string values are read.
#[derive(Default, Deserialize)]
struct WireAttribute {
    #[serde(default)]
    string: Option<String>,
}

impl WireDevice {
    /// The string attribute `name`, unqualified or qualified with the driver's domain.
    fn string(&self, driver: &str, name: &str) -> Option<&str> {
        self.attributes
            .get(name)
            .or_else(|| self.attributes.get(&format!("{driver}/{name}")))
            .and_then(|a| a.string.as_deref())
    }
}

impl From<Wire> for SliceSummary {
    fn from(wire: Wire) -> Self {
        let driver = wire.spec.driver;
        let mut devices = DeviceCounts::default();
        let mut physical_gpus = Vec::new();
        for device in &wire.spec.devices {
            match device.string(&driver, "type") {
                Some("gpu") => {
                    devices.gpu += 1;
                    let uuid = device.string(&driver, "uuid").unwrap_or(&device.name);
                    physical_gpus.push(uuid.to_owned());
                }
                Some("mig") => {
                    devices.mig += 1;
                    physical_gpus.extend(device.string(&driver, "parentUUID").map(str::to_owned));
                }
                Some("vfio") => devices.vfio += 1,
                _ => devices.other += 1,
            }
        }
        physical_gpus.sort();
        physical_gpus.dedup();
        Self {
            metadata: ObjectMeta {
                name: wire.metadata.name,
                resource_version: wire.metadata.resource_version,
                ..ObjectMeta::default()
            },
            node: wire.spec.node_name.unwrap_or_default(),
            driver,
            pool: wire.spec.pool.name,
            generation: wire.spec.pool.generation,
            slice_count: wire.spec.pool.resource_slice_count,
            devices,
            physical_gpus,
        }
    }
}

#[cfg(test)]
mod tests {
    use kube::{Resource as _, ResourceExt as _};
    use serde_json::json;

    use super::*;

    fn device(name: &str, attributes: &serde_json::Value) -> serde_json::Value {
        json!({"name": name, "attributes": attributes, "capacity": {"memory": {"value": "80Gi"}}})
    }

    #[test]
    fn a_slice_keeps_its_pool_and_counts_its_devices_by_type() {
        let slice = json!({
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": "n1-gpu.nvidia.com-x", "resourceVersion": "9",
                         "managedFields": [{"manager": "kubelet"}]},
            "spec": {
                "driver": "gpu.nvidia.com",
                "nodeName": "n1",
                "pool": {"name": "n1", "generation": 3, "resourceSliceCount": 2},
                "devices": [
                    device("gpu-0", &json!({"type": {"string": "gpu"}, "uuid": {"string": "GPU-a"},
                                             "driverVersion": {"version": "580.0.0"}})),
                    device("gpu-1-mig-9-0-1", &json!({"type": {"string": "mig"},
                                                       "parentUUID": {"string": "GPU-b"}})),
                    device("gpu-1-mig-9-1-1", &json!({"gpu.nvidia.com/type": {"string": "mig"},
                                                       "gpu.nvidia.com/parentUUID": {"string": "GPU-b"}})),
                    device("gpu-vfio-0", &json!({"type": {"string": "vfio"}})),
                    device("odd", &json!({"numa": {"int": 0}}))
                ]
            }
        });
        let cached: SliceSummary = serde_json::from_value(slice).unwrap();
        assert_eq!(cached.name_any(), "n1-gpu.nvidia.com-x");
        assert_eq!(cached.resource_version().as_deref(), Some("9"));
        assert!(cached.managed_fields().is_empty());
        assert_eq!(
            (
                cached.node.as_str(),
                cached.driver.as_str(),
                cached.pool.as_str()
            ),
            ("n1", NVIDIA_GPU_DRIVER, "n1")
        );
        assert_eq!((cached.generation, cached.slice_count), (3, 2));
        assert_eq!(
            cached.devices,
            DeviceCounts {
                gpu: 1,
                mig: 2,
                vfio: 1,
                other: 1
            }
        );
        assert_eq!(cached.physical_gpus, ["GPU-a", "GPU-b"]);
        let bare: SliceSummary =
            serde_json::from_value(json!({"metadata": {"name": "s"}})).unwrap();
        assert_eq!(bare, SliceSummary::new("s", "", "", ("", 0, 0)));
        assert_eq!(SliceSummary::plural(&()), "resourceslices");
        assert_eq!(SliceSummary::group(&()), "resource.k8s.io");
    }
}
