//! NVIDIA's XID catalog, as facts: for each XID of Ampere and newer GPUs its mnemonic and the
//! catalog's resolution buckets (the immediate action and the investigatory one). Source: NVIDIA,
//! "Analyzing Xid Errors with the Xid Catalog", Table 1
//! (<https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html>), read 2026-11-27; the
//! table in `catalog/table.rs` holds only rows read there.

mod table;

use std::fmt;

/// A resolution bucket of the catalog: what to do about an XID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Bucket {
    /// `RESTART_APP`: the application's fault; restart it. Not a node fault.
    RestartApp,
    /// `IGNORE`: informational.
    Ignore,
    /// `RESET_GPU`: reset the GPU (drain it first).
    ResetGpu,
    /// `RESTART_BM`: reboot the bare-metal node.
    RestartBm,
    /// `RESTART_VM`: restart the virtual machine.
    RestartVm,
    /// `CONTACT_SUPPORT`: hardware service.
    ContactSupport,
    /// `CHECK_MECHANICALS`: power, cooling, seating.
    CheckMechanicals,
    /// `UPDATE_SWFW`: update the driver or firmware.
    UpdateSwFw,
    /// `CHECK_UVM`: reset the GPU when unified memory or vGPU is in use.
    CheckUvm,
    /// A workflow the catalog names for a node fault (`WORKFLOW_NVLINK_ERR`,
    /// `WORKFLOW_NVLINK5_ERR`): follow NVIDIA's documented steps.
    Workflow,
    /// A workflow the catalog names for an application's fault (`WORKFLOW_XID_13`, `_31`, `_45`:
    /// the application's own error, or cleanup after another XID).
    AppWorkflow,
    /// `XID_154`: the driver's recovery action changed; the agent reads that action itself.
    RecoveryAction,
    /// A bucket word this build does not know.
    Other,
}

impl Bucket {
    /// The catalog's word.
    pub fn parse(word: &str) -> Self {
        match word {
            "RESTART_APP" => Self::RestartApp,
            "IGNORE" => Self::Ignore,
            // The catalog's XID 48 workflow: a reset (drain and reset with XID 63 or 64).
            "RESET_GPU" | "WORKFLOW_XID_48" => Self::ResetGpu,
            "RESTART_BM" => Self::RestartBm,
            "RESTART_VM" => Self::RestartVm,
            "CONTACT_SUPPORT" => Self::ContactSupport,
            "CHECK_MECHANICALS" => Self::CheckMechanicals,
            "UPDATE_SWFW" => Self::UpdateSwFw,
            "CHECK_UVM" => Self::CheckUvm,
            "WORKFLOW_XID_13" | "WORKFLOW_XID_31" | "WORKFLOW_XID_45" => Self::AppWorkflow,
            "XID_154" => Self::RecoveryAction,
            w if w.starts_with("WORKFLOW_") => Self::Workflow,
            _ => Self::Other,
        }
    }

    /// Whether the node needs an administrator (or a remediation engine): everything but an
    /// application's own fault, informational events and XID 154 (whose recovery action the
    /// agent reads from the driver).
    pub fn is_node_fault(self) -> bool {
        !matches!(
            self,
            Self::RestartApp | Self::Ignore | Self::AppWorkflow | Self::RecoveryAction
        )
    }
}

/// One catalog row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The XID.
    pub xid: u64,
    /// The catalog's mnemonic, e.g. `ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS`.
    pub mnemonic: &'static str,
    /// The catalog's short description.
    pub description: &'static str,
    /// The immediate action's bucket word, as the catalog writes it.
    pub immediate: &'static str,
    /// The investigatory action's bucket word.
    pub investigatory: &'static str,
}

impl Entry {
    /// The immediate action's bucket.
    pub fn bucket(&self) -> Bucket {
        Bucket::parse(self.immediate)
    }
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "XID {} {} ({}); NVIDIA's recommended action: {}, then {}",
            self.xid, self.mnemonic, self.description, self.immediate, self.investigatory
        )
    }
}

/// The catalog's row for `xid`.
pub fn lookup(xid: u64) -> Option<&'static Entry> {
    table::ENTRIES
        .binary_search_by_key(&xid, |e| e.xid)
        .ok()
        .and_then(|i| table::ENTRIES.get(i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_and_unique_so_lookup_finds_every_row() {
        assert!(table::ENTRIES.windows(2).all(|w| w[0].xid < w[1].xid));
        for entry in table::ENTRIES {
            assert_eq!(lookup(entry.xid), Some(entry));
        }
    }

    #[test]
    fn every_bucket_word_of_the_table_is_known() {
        for entry in table::ENTRIES {
            assert_ne!(entry.bucket(), Bucket::Other, "{entry}");
            assert!(!entry.mnemonic.is_empty() && !entry.investigatory.is_empty());
        }
    }

    /// Facts of the catalog (Table 1) the classification rests on.
    #[test]
    fn the_catalogs_actions_for_well_known_xids() {
        let bucket = |xid| lookup(xid).unwrap().bucket();
        assert_eq!(
            lookup(79).unwrap().mnemonic,
            "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS"
        );
        assert_eq!(bucket(79), Bucket::RestartBm);
        assert_eq!(bucket(48), Bucket::ResetGpu, "double-bit ECC");
        assert_eq!(bucket(95), Bucket::ResetGpu, "uncontained ECC error");
        assert_eq!(bucket(94), Bucket::RestartApp, "contained ECC error");
        assert_eq!(bucket(64), Bucket::ResetGpu, "row remapping failure");
        assert_eq!(bucket(63), Bucket::Ignore, "row remapping event");
        assert_eq!(bucket(119), Bucket::ResetGpu, "GSP RPC timeout");
        assert_eq!(bucket(54), Bucket::CheckMechanicals);
        assert_eq!(bucket(74), Bucket::Workflow, "NVLink");
        assert_eq!(bucket(151), Bucket::RestartVm);
        for app in [8, 13, 31, 43, 45] {
            assert!(!bucket(app).is_node_fault(), "XID {app}");
        }
        assert_eq!(bucket(154), Bucket::RecoveryAction);
        assert_eq!(lookup(162), None, "no action in the catalog yet");
    }

    #[test]
    fn application_faults_are_not_node_faults() {
        assert!(!Bucket::parse("RESTART_APP").is_node_fault());
        assert!(!Bucket::parse("IGNORE").is_node_fault());
        assert!(!Bucket::parse("WORKFLOW_XID_45").is_node_fault());
        assert!(!Bucket::parse("XID_154").is_node_fault());
        for word in [
            "RESET_GPU",
            "RESTART_BM",
            "CONTACT_SUPPORT",
            "WORKFLOW_XID_48",
            "NEW",
        ] {
            assert!(Bucket::parse(word).is_node_fault(), "{word}");
        }
    }
}
