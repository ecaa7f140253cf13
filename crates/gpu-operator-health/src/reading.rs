//! What one poll of a node's GPUs read: per GPU its identity and health counters, and the XID
//! events that arrived since the last poll. Each counter is read on its own, so one that cannot be
//! read is named instead of hiding the others.

use std::fmt;

/// A counter's value, or why it could not be read.
pub type Read<T> = Result<T, Unreadable>;

/// Why one query failed: the NVML call and its error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    /// The query, e.g. `nvmlDeviceGetTotalEccErrors(volatile)`.
    pub query: &'static str,
    /// NVML's error, e.g. `NotSupported`.
    pub error: String,
}

impl fmt::Display for Unreadable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.query, self.error)
    }
}

impl Unreadable {
    /// NVML answered `NotSupported` (the GPU or its mode has no such counter, e.g. ECC off).
    pub fn not_supported(&self) -> bool {
        self.error == "NotSupported"
    }
}

/// One GPU's reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuReading {
    /// NVML's index (the `nvidia-smi` index).
    pub index: u32,
    /// `GPU-…`, or what failed when even the UUID could not be read.
    pub uuid: Read<String>,
    /// NVML answered `GpuLost` to a query: the GPU fell off the bus or is otherwise inaccessible.
    pub lost: bool,
    /// Uncorrected (double-bit) ECC errors since the driver loaded.
    pub volatile_dbe: Read<u64>,
    /// Uncorrected (double-bit) ECC errors over the GPU's life.
    pub aggregate_dbe: Read<u64>,
    /// Pages retired for double-bit errors wait for a GPU reset (pre-Ampere page retirement).
    pub retired_pages_pending: Read<bool>,
    /// Row remapping: a remap waits for a GPU reset.
    pub row_remap_pending: Read<bool>,
    /// Row remapping failed: the GPU has no spare rows left.
    pub row_remap_failure: Read<bool>,
    /// The driver's recovery action (`NVML_FI_DEV_GET_GPU_RECOVERY_ACTION`, newer drivers).
    pub recovery_action: Read<RecoveryAction>,
    /// The clocks are slowed now, and why.
    pub slowdown: Read<Slowdown>,
}

impl GpuReading {
    /// What NVML reads from a healthy GPU numbered `index` (its UUID made from the index): every
    /// counter zero, nothing pending, no slowdown. The reading the bench's simulated nodes and the
    /// tests start from.
    pub fn healthy(index: u32) -> Self {
        Self {
            index,
            uuid: Ok(format!("GPU-{index:08}")),
            lost: false,
            volatile_dbe: Ok(0),
            aggregate_dbe: Ok(0),
            retired_pages_pending: Ok(false),
            row_remap_pending: Ok(false),
            row_remap_failure: Ok(false),
            recovery_action: Ok(RecoveryAction::None),
            slowdown: Ok(Slowdown::default()),
        }
    }
}

/// The driver's own verdict on what a GPU needs (NVML's `nvmlDeviceGpuRecoveryAction_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecoveryAction {
    /// Nothing to do.
    None,
    /// Reset the GPU.
    GpuReset,
    /// Reboot the node.
    NodeReboot,
    /// Drain peer-to-peer traffic.
    DrainP2p,
    /// Drain the GPU's work, then reset it.
    DrainAndReset,
    /// A value this build does not know.
    Other(u64),
}

impl RecoveryAction {
    /// From the field's integer value.
    pub fn from_value(value: u64) -> Self {
        match value {
            0 => Self::None,
            1 => Self::GpuReset,
            2 => Self::NodeReboot,
            3 => Self::DrainP2p,
            4 => Self::DrainAndReset,
            other => Self::Other(other),
        }
    }
}

impl fmt::Display for RecoveryAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => f.write_str("none"),
            Self::GpuReset => f.write_str("GPU reset"),
            Self::NodeReboot => f.write_str("node reboot"),
            Self::DrainP2p => f.write_str("drain peer-to-peer"),
            Self::DrainAndReset => f.write_str("drain and reset"),
            Self::Other(v) => write!(f, "recovery action {v}"),
        }
    }
}

/// Clock slowdowns that mean the GPU protects itself (not the power cap a busy GPU runs into).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Slowdown {
    /// The GPU or its memory is too hot (hardware or software thermal slowdown).
    pub thermal: bool,
    /// The board's power brake asserted (the power supply cannot keep up).
    pub power_brake: bool,
}

/// One XID event, as the driver reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XidEvent {
    /// The GPU's index, when NVML named the device.
    pub gpu: Option<u32>,
    /// The GPU's UUID, when known.
    pub uuid: Option<String>,
    /// The XID.
    pub xid: u64,
}

/// One poll of the node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeReading {
    /// The GPUs NVML enumerates.
    pub gpus: Vec<GpuReading>,
    /// XID events since the previous poll.
    pub xids: Vec<XidEvent>,
    /// XID events cannot be watched (the query and its error), so XIDs go unseen.
    pub xid_watch: Option<Unreadable>,
    /// Other sources that could not be read this poll, each with why (the DCGM exporter).
    pub other_unreadable: Vec<String>,
}

impl NodeReading {
    /// A poll of a node whose `gpus` GPUs are all healthy and reported no XID.
    pub fn healthy(gpus: u32) -> Self {
        Self {
            gpus: (0..gpus).map(GpuReading::healthy).collect(),
            ..Self::default()
        }
    }
}
