//! The GPUCluster's share (`--dra`: every GPU node on the DRA stack, beside the ClusterPolicy that
//! still serves its driver and toolkit): the ResourceSlice cache as `gpu-operator run` keeps it
//! (`cache::stores`: every slice of `gpu.nvidia.com` narrowed to a `SliceSummary`, its change
//! stream and the one subscriber of it, the DRA readiness), filled with one slice per GPU node as
//! NVIDIA's DRA driver publishes it — pool named after the node, eight `gpu` devices with every
//! attribute and capacity the driver lists — each sent as JSON and decoded through the
//! projection's serde as the watch decodes it; and the GPUCluster operands' and the DRA
//! readiness' subscriptions to the node streams, counted from the operand registry. The DRA
//! operands' pods are in no cache (the driver upgrade watches the ClusterPolicy's driver and
//! validator pods only), so none are made.

use std::{pin::Pin, sync::Arc};

use futures::{FutureExt as _, Stream, StreamExt as _};
use gpu_operator_core::{
    cache::{
        change_stream::{self, Dispatcher},
        node_meta::NodeMeta,
        resource_slice::{NVIDIA_GPU_DRIVER, SliceSummary},
        stores::BUFFER,
    },
    contract::Operand,
    report::conditions::Desired,
};
use gpu_operator_harness::fleet::{Fleet, Profile};
use kube::runtime::{
    reflector::{Store, store::Writer},
    watcher::Event,
};
use serde_json::{Value, json};

use crate::fleet::CREATED;

/// The `gpu` devices of each synthetic slice: an 8-GPU node (the largest profile, for every GPU
/// node: the worst case).
pub const GPUS_PER_SLICE: u32 = 8;

/// The driver version the slices report.
const DRIVER_VERSION: &str = "580.95.05";
/// The CUDA version that driver supports.
const CUDA_DRIVER_VERSION: &str = "13.0.0";

/// The operands of the GPUCluster (the operand registry's), each of which subscribes to the node
/// label and runtime streams as the ClusterPolicy's do.
pub fn gpu_cluster_operands() -> usize {
    struct Count(usize);
    impl gpu_operator_operands::VisitAny for Count {
        fn operand<O: Operand>(&mut self) {
            self.0 += 1;
        }
    }
    let mut count = Count(0);
    gpu_operator_operands::visit_gpu_cluster(&mut count);
    count.0
}

/// A GPU's UUID as NVML writes it (`GPU-` and 32 hex digits in five groups), unique per node
/// `version` and GPU `index`.
fn uuid(version: u64, index: u32) -> String {
    let n = version.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ u64::from(index);
    format!(
        "GPU-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        n >> 32,
        (n >> 16) & 0xffff,
        n & 0xffff,
        (u64::from(index) << 8) | 0x4a,
        (version << 4) | u64::from(index)
    )
}

/// The ResourceSlice NVIDIA's DRA driver publishes for GPU node `node` of `profile` (the
/// `version`th node), as the API server sends it to the watch: metadata with the generated name,
/// the owner reference to the Node and the plugin's managed fields; one pool named after the
/// node, one slice, [`GPUS_PER_SLICE`] `gpu` devices with the attributes and capacity the driver
/// lists for a GPU.
pub fn slice(node: &str, profile: Profile, version: u64) -> Value {
    let labels = profile.labels(node);
    let label = |key: &str| labels.get(key).cloned().unwrap_or_default();
    let product = label("nvidia.com/gpu.product").replace('-', " ");
    let family = label("nvidia.com/gpu.family");
    let architecture = family
        .get(..1)
        .map(|first| first.to_uppercase() + &family[1..])
        .unwrap_or_default();
    let compute = format!(
        "{}.{}.0",
        label("nvidia.com/gpu.compute.major"),
        label("nvidia.com/gpu.compute.minor")
    );
    let memory = format!("{}Mi", label("nvidia.com/gpu.memory"));
    let devices: Vec<Value> = (0..GPUS_PER_SLICE)
        .map(|index| {
            let bus = format!("0000:{:02x}:00.0", 0x18 + index * 0x10);
            json!({
                "name": format!("gpu-{index}"),
                "attributes": {
                    "type": {"string": "gpu"},
                    "uuid": {"string": uuid(version, index)},
                    "productName": {"string": product},
                    "brand": {"string": "Nvidia"},
                    "architecture": {"string": architecture},
                    "cudaComputeCapability": {"version": compute},
                    "driverVersion": {"version": DRIVER_VERSION},
                    "cudaDriverVersion": {"version": CUDA_DRIVER_VERSION},
                    "pcieBusID": {"string": bus},
                    "resource.kubernetes.io/pcieRoot": {"string": format!("pci0000:{:02x}", index / 2 * 0x10)},
                    "index": {"int": index},
                    "minor": {"int": index},
                },
                "capacity": {"memory": {"value": memory}},
            })
        })
        .collect();
    let prefix = format!("{node}-{NVIDIA_GPU_DRIVER}-");
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {
            "name": format!("{prefix}{:05x}", version % 0xf_ffff),
            "generateName": prefix,
            "uid": format!("5a1ce000-0000-0000-0000-{version:012}"),
            "resourceVersion": (version + 1_000_000).to_string(),
            "generation": 1,
            "creationTimestamp": CREATED,
            "ownerReferences": [{
                "apiVersion": "v1",
                "kind": "Node",
                "name": node,
                "uid": format!("00000000-0000-0000-0000-{version:012}"),
                "controller": true,
            }],
            "managedFields": [{
                "manager": "gpu-kubelet-plugin",
                "operation": "Update",
                "apiVersion": "resource.k8s.io/v1",
                "time": CREATED,
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:ownerReferences": {}},
                             "f:spec": {"f:devices": {}, "f:driver": {}, "f:nodeName": {},
                                        "f:pool": {}}},
            }],
        },
        "spec": {
            "driver": NVIDIA_GPU_DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    })
}

type Subscriber = Pin<Box<dyn Stream<Item = ()> + Send>>;

/// The ResourceSlice cache, its change stream and its subscriber (the DRA readiness), filled.
pub struct SliceCache {
    slices: Writer<SliceSummary>,
    changes: Dispatcher<SliceSummary>,
    subscriber: Subscriber,
}

impl SliceCache {
    /// The cache with a slice of every GPU node of `fleet`, each decoded from its JSON.
    pub fn fill(fleet: &Fleet) -> anyhow::Result<Self> {
        let (changes, all) = change_stream::channel(BUFFER);
        let mut this = Self {
            slices: Writer::default(),
            changes,
            subscriber: Box::pin(all.map(|_| ())),
        };
        let mut version = 0;
        for (profile, name) in fleet.nodes() {
            version += 1;
            if profile.gpu_count() == 0 {
                continue;
            }
            let body = serde_json::to_vec(&slice(&name, profile, version))?;
            let cached: SliceSummary = serde_json::from_slice(&body)?;
            anyhow::ensure!(
                cached.devices.gpu == GPUS_PER_SLICE
                    && cached.physical_gpus.len() == GPUS_PER_SLICE as usize,
                "the slice of {name} decoded with {} GPUs, {} physical",
                cached.devices.gpu,
                cached.physical_gpus.len()
            );
            this.apply(cached);
        }
        Ok(this)
    }

    /// A slice event: cached, dispatched, taken by the subscriber.
    fn apply(&mut self, slice: SliceSummary) {
        let event = Event::Apply(slice);
        let old = change_stream::apply(&mut self.slices, &event);
        let cache = self.slices.as_reader();
        std::hint::black_box(self.changes.dispatch(&event, old, &cache).now_or_never());
        while let Some(Some(())) = self.subscriber.next().now_or_never() {}
    }

    /// The cache.
    pub fn store(&self) -> Store<SliceSummary> {
        self.slices.as_reader()
    }
}

/// One DRA readiness pass as its reconcile runs it: both caches read, every DRA node's slices
/// checked, the `DRAResourcesPublished` condition.
pub fn readiness(nodes: &Store<NodeMeta>, slices: &Store<SliceSummary>) -> Desired {
    gpu_operator_status::dra_resources::summarize(&nodes.state(), &slices.state())
}

/// Checks that every GPU node of the cache `nodes` is a DRA node whose GPUs are all published.
pub fn ensure_all_ready(
    desired: &Desired,
    nodes: &[Arc<NodeMeta>],
    gpu_nodes: u32,
) -> anyhow::Result<()> {
    let dra = nodes
        .iter()
        .filter(|n| gpu_operator_status::dra_resources::is_dra_node(n))
        .count();
    anyhow::ensure!(
        desired.status && u32::try_from(dra).ok() == Some(gpu_nodes),
        "{dra} DRA nodes of {gpu_nodes} GPU nodes: {}",
        desired.message
    );
    Ok(())
}
