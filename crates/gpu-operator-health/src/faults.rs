//! From one reading to the node's faults: each names its family (the Node condition it sets), its
//! class (the condition's reason), the GPU, what was read, and NVIDIA's recommended action.

use std::fmt;

use crate::{
    catalog::{self, Bucket},
    reading::{GpuReading, NodeReading, RecoveryAction, XidEvent},
};

/// A fault family: one Node condition each, True while a fault of the family is present.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// An XID whose catalog action is not the application's own (or the driver asks for recovery).
    Xid,
    /// Uncorrectable memory errors: double-bit ECC, pages or rows waiting for a reset, rows exhausted.
    Memory,
    /// A GPU fell off the bus or fewer GPUs are seen than the node advertises.
    Lost,
    /// The GPU slows its clocks to protect itself (heat, power brake). Not counted as unhealthy.
    Throttled,
}

impl Family {
    /// Every family, in the order the summary names them.
    pub const ALL: [Self; 4] = [Self::Lost, Self::Memory, Self::Xid, Self::Throttled];

    /// The Node condition's type.
    pub fn condition_type(self) -> &'static str {
        match self {
            Self::Xid => crate::condition::GPU_XID_ERROR,
            Self::Memory => crate::condition::GPU_MEMORY_ERROR,
            Self::Lost => crate::condition::GPU_LOST,
            Self::Throttled => crate::condition::GPU_THROTTLED,
        }
    }

    /// Whether a fault of this family makes `GPUHealthy` False.
    pub fn makes_unhealthy(self) -> bool {
        !matches!(self, Self::Throttled)
    }

    /// Whether the family's faults are events that stay until the node reboots (XIDs) rather
    /// than states read anew each poll.
    pub fn is_sticky(self) -> bool {
        matches!(self, Self::Xid)
    }

    /// The reason written when the family has no fault.
    pub fn healthy_reason(self) -> &'static str {
        match self {
            Self::Xid => reason::NO_XID_REASON,
            Self::Memory => reason::NO_MEMORY_ERROR_REASON,
            Self::Lost => reason::ALL_GPUS_PRESENT_REASON,
            Self::Throttled => reason::NOT_THROTTLED_REASON,
        }
    }
}

/// The condition reasons (the fault classes), PascalCase.
pub mod reason {
    /// `GPUXidError`: an XID whose immediate action is `RESET_GPU`.
    pub const XID_RESET_GPU_REASON: &str = "XidResetGPU";
    /// `GPUXidError`: `RESTART_BM` or `RESTART_VM`.
    pub const XID_REBOOT_REASON: &str = "XidRebootNode";
    /// `GPUXidError`: `CONTACT_SUPPORT`.
    pub const XID_CONTACT_SUPPORT_REASON: &str = "XidContactSupport";
    /// `GPUXidError`: `CHECK_MECHANICALS`.
    pub const XID_CHECK_MECHANICALS_REASON: &str = "XidCheckMechanicals";
    /// `GPUXidError`: `UPDATE_SW`, `CHECK_UVM`, a `WORKFLOW_…` or another bucket.
    pub const XID_INVESTIGATE_REASON: &str = "XidInvestigate";
    /// `GPUXidError`: the driver's recovery action asks for a reset or reboot.
    pub const DRIVER_RECOVERY_REASON: &str = "DriverRecoveryAction";
    /// `GPUXidError=False`.
    pub const NO_XID_REASON: &str = "NoXidErrors";
    /// `GPUMemoryError`: volatile double-bit ECC errors.
    pub const DOUBLE_BIT_ECC_REASON: &str = "DoubleBitECC";
    /// `GPUMemoryError`: retired pages wait for a GPU reset.
    pub const RETIRED_PAGES_PENDING_REASON: &str = "RetiredPagesPending";
    /// `GPUMemoryError`: a row remap waits for a GPU reset.
    pub const ROW_REMAP_PENDING_REASON: &str = "RowRemapPending";
    /// `GPUMemoryError`: row remapping failed.
    pub const ROW_REMAP_FAILURE_REASON: &str = "RowRemapFailure";
    /// `GPUMemoryError=False`.
    pub const NO_MEMORY_ERROR_REASON: &str = "NoMemoryErrors";
    /// `GPULost`: NVML answers `GpuLost` for a GPU.
    pub const FALLEN_OFF_BUS_REASON: &str = "GPUFallenOffBus";
    /// `GPULost`: fewer GPUs than the node's `nvidia.com/gpu.count`.
    pub const GPU_COUNT_BELOW_LABEL_REASON: &str = "GPUCountBelowLabel";
    /// `GPULost=False`.
    pub const ALL_GPUS_PRESENT_REASON: &str = "AllGPUsPresent";
    /// `GPUThrottled`: thermal slowdown.
    pub const THERMAL_SLOWDOWN_REASON: &str = "ThermalSlowdown";
    /// `GPUThrottled`: power brake slowdown.
    pub const POWER_BRAKE_REASON: &str = "PowerBrakeSlowdown";
    /// `GPUThrottled=False`.
    pub const NOT_THROTTLED_REASON: &str = "NotThrottled";
}

/// The fault classes, most severe first: a condition's reason is its most severe fault's.
pub const SEVERITY: [&str; 14] = [
    reason::FALLEN_OFF_BUS_REASON,
    reason::GPU_COUNT_BELOW_LABEL_REASON,
    reason::ROW_REMAP_FAILURE_REASON,
    reason::DOUBLE_BIT_ECC_REASON,
    reason::ROW_REMAP_PENDING_REASON,
    reason::RETIRED_PAGES_PENDING_REASON,
    reason::XID_CONTACT_SUPPORT_REASON,
    reason::XID_CHECK_MECHANICALS_REASON,
    reason::XID_REBOOT_REASON,
    reason::DRIVER_RECOVERY_REASON,
    reason::XID_RESET_GPU_REASON,
    reason::XID_INVESTIGATE_REASON,
    reason::POWER_BRAKE_REASON,
    reason::THERMAL_SLOWDOWN_REASON,
];

/// Where `reason` stands in [`SEVERITY`] (unknown reasons last).
pub fn severity_rank(reason: &str) -> usize {
    SEVERITY
        .iter()
        .position(|r| *r == reason)
        .unwrap_or(SEVERITY.len())
}

/// A GPU, as messages name it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GpuRef {
    /// The index, when known.
    pub index: Option<u32>,
    /// The UUID, when known.
    pub uuid: Option<String>,
}

impl fmt::Display for GpuRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.index, &self.uuid) {
            (Some(i), Some(u)) => write!(f, "GPU {i} ({u})"),
            (Some(i), None) => write!(f, "GPU {i}"),
            (None, Some(u)) => write!(f, "GPU {u}"),
            (None, None) => f.write_str("node"),
        }
    }
}

/// One fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// Its family.
    pub family: Family,
    /// Its class: the condition's reason.
    pub reason: &'static str,
    /// The GPU.
    pub gpu: GpuRef,
    /// What was read, e.g. `XID 79 …` or `3 volatile double-bit ECC errors`.
    pub detail: String,
    /// NVIDIA's recommended action, e.g. `RESET_GPU`.
    pub action: &'static str,
}

impl Fault {
    /// What identifies the fault across polls: the same family, class and GPU.
    pub fn key(&self) -> (Family, &'static str, GpuRef) {
        (self.family, self.reason, self.gpu.clone())
    }
}

impl GpuReading {
    fn gpu_ref(&self) -> GpuRef {
        GpuRef {
            index: Some(self.index),
            uuid: self.uuid.as_ref().ok().cloned(),
        }
    }
}

/// The state faults of one reading (everything but XIDs), given how many GPUs the node
/// advertises (`nvidia.com/gpu.count`, when labelled).
pub fn state_faults(reading: &NodeReading, expected_gpus: Option<u32>) -> Vec<Fault> {
    let mut faults = Vec::new();
    for gpu in &reading.gpus {
        gpu_faults(gpu, &mut faults);
    }
    let seen = u32::try_from(reading.gpus.iter().filter(|g| !g.lost).count()).unwrap_or(u32::MAX);
    if let Some(expected) = expected_gpus.filter(|e| seen < *e) {
        faults.push(Fault {
            family: Family::Lost,
            reason: reason::GPU_COUNT_BELOW_LABEL_REASON,
            gpu: GpuRef {
                index: None,
                uuid: None,
            },
            detail: format!("{seen} of {expected} GPUs (nvidia.com/gpu.count) answer NVML"),
            action: "CHECK_MECHANICALS",
        });
    }
    faults
}

/// One GPU's state faults.
fn gpu_faults(gpu: &GpuReading, faults: &mut Vec<Fault>) {
    {
        let at = gpu.gpu_ref();
        let mut push = |family, reason, detail: String, action| {
            faults.push(Fault {
                family,
                reason,
                gpu: at.clone(),
                detail,
                action,
            });
        };
        if gpu.lost {
            push(
                Family::Lost,
                reason::FALLEN_OFF_BUS_REASON,
                "NVML answers GpuLost: the GPU fell off the bus or is inaccessible".to_owned(),
                "RESTART_BM",
            );
            return;
        }
        if let Ok(n @ 1..) = gpu.volatile_dbe {
            let lifetime = gpu
                .aggregate_dbe
                .as_ref()
                .map_or_else(|_| String::new(), |a| format!(", {a} over its life"));
            push(
                Family::Memory,
                reason::DOUBLE_BIT_ECC_REASON,
                format!("{n} volatile double-bit ECC errors{lifetime}"),
                "RESET_GPU",
            );
        }
        if gpu.retired_pages_pending == Ok(true) {
            push(
                Family::Memory,
                reason::RETIRED_PAGES_PENDING_REASON,
                "retired pages wait for a GPU reset".to_owned(),
                "RESET_GPU",
            );
        }
        if gpu.row_remap_failure == Ok(true) {
            push(
                Family::Memory,
                reason::ROW_REMAP_FAILURE_REASON,
                "row remapping failed: no spare rows left".to_owned(),
                "CONTACT_SUPPORT",
            );
        } else if gpu.row_remap_pending == Ok(true) {
            push(
                Family::Memory,
                reason::ROW_REMAP_PENDING_REASON,
                "a row remap waits for a GPU reset".to_owned(),
                "RESET_GPU",
            );
        }
        if let Ok(
            action @ (RecoveryAction::GpuReset
            | RecoveryAction::NodeReboot
            | RecoveryAction::DrainAndReset),
        ) = gpu.recovery_action
        {
            push(
                Family::Xid,
                reason::DRIVER_RECOVERY_REASON,
                format!("the driver's recovery action is {action} (XID 154)"),
                match action {
                    RecoveryAction::NodeReboot => "RESTART_BM",
                    _ => "RESET_GPU",
                },
            );
        }
        if let Ok(slowdown) = gpu.slowdown {
            if slowdown.thermal {
                push(
                    Family::Throttled,
                    reason::THERMAL_SLOWDOWN_REASON,
                    "clocks slowed: thermal slowdown".to_owned(),
                    "CHECK_MECHANICALS",
                );
            }
            if slowdown.power_brake {
                push(
                    Family::Throttled,
                    reason::POWER_BRAKE_REASON,
                    "clocks slowed: power brake asserted".to_owned(),
                    "CHECK_MECHANICALS",
                );
            }
        }
    }
}

/// What an XID event means: a fault when the catalog's immediate action is the node's, otherwise
/// `Err` with the catalog row (or `None` for an XID the catalog lacks), which is only reported.
pub fn xid_fault(event: &XidEvent) -> Result<Fault, Option<&'static catalog::Entry>> {
    let entry = catalog::lookup(event.xid).ok_or(None)?;
    let bucket = entry.bucket();
    if !bucket.is_node_fault() {
        return Err(Some(entry));
    }
    let reason = match bucket {
        Bucket::ResetGpu => reason::XID_RESET_GPU_REASON,
        Bucket::RestartBm | Bucket::RestartVm => reason::XID_REBOOT_REASON,
        Bucket::ContactSupport => reason::XID_CONTACT_SUPPORT_REASON,
        Bucket::CheckMechanicals => reason::XID_CHECK_MECHANICALS_REASON,
        _ => reason::XID_INVESTIGATE_REASON,
    };
    Ok(Fault {
        family: Family::Xid,
        reason,
        gpu: GpuRef {
            index: event.gpu,
            uuid: event.uuid.clone(),
        },
        detail: format!(
            "XID {} {} ({})",
            entry.xid, entry.mnemonic, entry.description
        ),
        action: entry.immediate,
    })
}
