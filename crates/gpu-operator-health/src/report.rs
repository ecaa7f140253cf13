//! A plain-text account of one poll, for `gpu-operator-validator health --once`: every value
//! read (or why it could not be), the XID events, the faults and the conditions they make.

use std::{fmt::Write as _, time::Duration};

use crate::{
    condition::Desired,
    faults::Fault,
    reading::{NodeReading, Read},
};

fn value<T: std::fmt::Debug>(read: &Read<T>) -> String {
    match read {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("unreadable ({e})"),
    }
}

/// The report: one line per GPU, then events, faults and conditions, then the poll's duration.
pub fn render(
    reading: &NodeReading,
    faults: &[Fault],
    conditions: &[Desired],
    took: Duration,
) -> String {
    let mut out = String::new();
    for gpu in &reading.gpus {
        let _ = writeln!(
            out,
            "gpu {} uuid={} lost={} volatile_dbe={} aggregate_dbe={} retired_pages_pending={} row_remap_pending={} row_remap_failure={} recovery_action={} slowdown={}",
            gpu.index,
            value(&gpu.uuid),
            gpu.lost,
            value(&gpu.volatile_dbe),
            value(&gpu.aggregate_dbe),
            value(&gpu.retired_pages_pending),
            value(&gpu.row_remap_pending),
            value(&gpu.row_remap_failure),
            value(&gpu.recovery_action),
            value(&gpu.slowdown),
        );
    }
    match &reading.xid_watch {
        None => {
            let _ = writeln!(out, "xid events: watched, {} arrived", reading.xids.len());
        }
        Some(e) => {
            let _ = writeln!(out, "xid events: not watched ({e})");
        }
    }
    for event in &reading.xids {
        let _ = writeln!(out, "xid {event:?}");
    }
    for fault in faults {
        let _ = writeln!(
            out,
            "fault {:?} {} {}: {}",
            fault.family, fault.reason, fault.gpu, fault.detail
        );
    }
    for c in conditions {
        let _ = writeln!(
            out,
            "condition {}={} reason={} message={:?}",
            c.type_, c.status, c.reason, c.message
        );
    }
    let _ = writeln!(out, "poll took {:.3} ms", took.as_secs_f64() * 1000.0);
    out
}
