//! Where readings come from: the [`HealthSource`] trait (faked in tests) and its NVML
//! implementation, which dlopens the driver's `libnvidia-ml.so.1` through `nvml-wrapper`, keeps it
//! loaded for the process's life, watches XID events on every GPU that supports them, and reads
//! each GPU's counters per poll.

use std::{path::PathBuf, time::Duration};

use nvml_wrapper::{
    Device, Nvml,
    bitmasks::{device::ThrottleReasons, event::EventTypes},
    enum_wrappers::device::{EccCounter, MemoryError},
    enums::{device::SampleValue, event::XidError},
    error::NvmlError,
    event::EventSet,
    structs::device::FieldId,
    sys_exports::field_id::{
        NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, NVML_FI_DEV_REMAPPED_FAILURE,
        NVML_FI_DEV_REMAPPED_PENDING,
    },
};

use crate::reading::{
    GpuReading, NodeReading, Read, RecoveryAction, Slowdown, Unreadable, XidEvent,
};

/// The source could not be read at all: health is unknown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unavailable(pub String);

/// A way to read the node's GPU health.
pub trait HealthSource: Send {
    /// Waits up to `window` for XID events; returns those that arrived, and why events cannot be
    /// watched, if they cannot.
    fn wait_xids(
        &mut self,
        window: Duration,
    ) -> Result<(Vec<XidEvent>, Option<Unreadable>), Unavailable>;

    /// Reads every GPU's counters.
    fn read(&mut self) -> Result<Vec<GpuReading>, Unavailable>;
}

/// One poll: the XID wait, then the counters; also returns how long the counters took to read.
pub fn poll(
    source: &mut dyn HealthSource,
    window: Duration,
) -> Result<(NodeReading, Duration), Unavailable> {
    let (xids, xid_watch) = source.wait_xids(window)?;
    let start = std::time::Instant::now();
    let gpus = source.read()?;
    Ok((
        NodeReading {
            gpus,
            xids,
            xid_watch,
            other_unreadable: Vec::new(),
        },
        start.elapsed(),
    ))
}

/// NVML, loaded from `library` on the first poll that succeeds.
pub struct NvmlSource {
    library: PathBuf,
    loaded: Option<Loaded>,
}

struct Loaded {
    nvml: &'static Nvml,
    events: Result<EventSet<'static>, Unreadable>,
}

impl NvmlSource {
    /// A source that loads `library` (a path, or the soname for the loader's search path).
    pub fn new(library: PathBuf) -> Self {
        Self {
            library,
            loaded: None,
        }
    }

    fn load(&mut self) -> Result<&Loaded, Unavailable> {
        if self.loaded.is_none() {
            let nvml = Nvml::builder()
                .lib_path(self.library.as_os_str())
                .init()
                .map_err(|e| {
                    Unavailable(format!(
                        "cannot load NVML from {}: {e}",
                        self.library.display()
                    ))
                })?;
            // Loaded once and kept for the process's life: the event set borrows the library.
            let nvml: &'static Nvml = Box::leak(Box::new(nvml));
            self.loaded = Some(Loaded {
                nvml,
                events: watch_xids(nvml),
            });
        }
        self.loaded
            .as_ref()
            .ok_or_else(|| Unavailable("NVML not loaded".to_owned()))
    }
}

/// NVML's error as a short name (`NotSupported`, `GpuLost`) or its text.
fn error_name(e: &NvmlError) -> String {
    match e {
        NvmlError::NotSupported => "NotSupported".to_owned(),
        NvmlError::GpuLost => "GpuLost".to_owned(),
        NvmlError::NoPermission => "NoPermission".to_owned(),
        other => other.to_string(),
    }
}

fn unreadable(query: &'static str) -> impl Fn(NvmlError) -> Unreadable {
    move |e| Unreadable {
        query,
        error: error_name(&e),
    }
}

/// An event set with XID events of every GPU that supports them.
fn watch_xids(nvml: &'static Nvml) -> Result<EventSet<'static>, Unreadable> {
    let mut set = nvml
        .create_event_set()
        .map_err(unreadable("nvmlEventSetCreate"))?;
    let count = nvml
        .device_count()
        .map_err(unreadable("nvmlDeviceGetCount"))?;
    for index in 0..count {
        let Ok(device) = nvml.device_by_index(index) else {
            continue;
        };
        let supported = device
            .supported_event_types()
            .is_ok_and(|t| t.contains(EventTypes::CRITICAL_XID_ERROR));
        if supported {
            set = device
                .register_events(EventTypes::CRITICAL_XID_ERROR, set)
                .map_err(|e| unreadable("nvmlDeviceRegisterEvents")(e.error))?;
        }
    }
    Ok(set)
}

/// The events that arrive within `window` (the first wait) and right after it.
fn drain(set: &EventSet<'static>, window: Duration) -> (Vec<XidEvent>, Option<Unreadable>) {
    let mut events = Vec::new();
    let mut timeout = u32::try_from(window.as_millis()).unwrap_or(u32::MAX);
    loop {
        match set.wait(timeout) {
            Ok(data) => {
                if let Some(XidError::Value(xid)) = data.event_data {
                    events.push(XidEvent {
                        gpu: data.device.index().ok(),
                        uuid: data.device.uuid().ok(),
                        xid,
                    });
                }
                timeout = 0;
            }
            Err(NvmlError::Timeout) => return (events, None),
            Err(e) => return (events, Some(unreadable("nvmlEventSetWait")(e))),
        }
        if events.len() >= 1024 {
            return (events, None);
        }
    }
}

impl HealthSource for NvmlSource {
    fn wait_xids(
        &mut self,
        window: Duration,
    ) -> Result<(Vec<XidEvent>, Option<Unreadable>), Unavailable> {
        let loaded = self.load()?;
        Ok(match &loaded.events {
            Ok(set) => drain(set, window),
            Err(e) => {
                std::thread::sleep(window);
                (Vec::new(), Some(e.clone()))
            }
        })
    }

    fn read(&mut self) -> Result<Vec<GpuReading>, Unavailable> {
        let loaded = self.load()?;
        let count = loaded
            .nvml
            .device_count()
            .map_err(|e| Unavailable(format!("nvmlDeviceGetCount: {e}")))?;
        Ok((0..count)
            .map(|index| match loaded.nvml.device_by_index(index) {
                Ok(device) => read_gpu(index, &device),
                Err(e) => lost_or_unreadable(index, &e),
            })
            .collect())
    }
}

/// A GPU whose handle could not be had: lost when NVML says so.
fn lost_or_unreadable(index: u32, e: &NvmlError) -> GpuReading {
    let why = |query| -> Read<bool> {
        Err(Unreadable {
            query,
            error: error_name(e),
        })
    };
    GpuReading {
        index,
        uuid: Err(Unreadable {
            query: "nvmlDeviceGetHandleByIndex",
            error: error_name(e),
        }),
        lost: matches!(e, NvmlError::GpuLost),
        volatile_dbe: why("nvmlDeviceGetTotalEccErrors(volatile)").map(u64::from),
        aggregate_dbe: why("nvmlDeviceGetTotalEccErrors(aggregate)").map(u64::from),
        retired_pages_pending: why("nvmlDeviceGetRetiredPagesPendingStatus"),
        row_remap_pending: why("NVML_FI_DEV_REMAPPED_PENDING"),
        row_remap_failure: why("NVML_FI_DEV_REMAPPED_FAILURE"),
        recovery_action: why("NVML_FI_DEV_GET_GPU_RECOVERY_ACTION").map(|_| RecoveryAction::None),
        slowdown: why("nvmlDeviceGetCurrentClocksEventReasons").map(|_| Slowdown::default()),
    }
}

fn sample_u64(value: &SampleValue) -> u64 {
    match *value {
        SampleValue::U32(v) => u64::from(v),
        SampleValue::U64(v) => v,
        SampleValue::I64(v) => u64::try_from(v).unwrap_or(0),
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "NVML's counters are small non-negative integers"
        )]
        SampleValue::F64(v) => v.max(0.0) as u64,
    }
}

/// The field values the agent reads in one call: row remapping and the recovery action.
const FIELDS: [u32; 3] = [
    NVML_FI_DEV_REMAPPED_PENDING,
    NVML_FI_DEV_REMAPPED_FAILURE,
    NVML_FI_DEV_GET_GPU_RECOVERY_ACTION,
];

fn read_gpu(index: u32, device: &Device<'_>) -> GpuReading {
    let uuid = device.uuid().map_err(unreadable("nvmlDeviceGetUUID"));
    let fields: Vec<Read<u64>> = match device.field_values_for(&FIELDS.map(FieldId)) {
        Ok(samples) => samples
            .into_iter()
            .map(|sample| {
                sample
                    .and_then(|s| s.value)
                    .map(|v| sample_u64(&v))
                    .map_err(unreadable("nvmlDeviceGetFieldValues"))
            })
            .collect(),
        Err(e) => vec![Err(unreadable("nvmlDeviceGetFieldValues")(e)); FIELDS.len()],
    };
    let field = |i: usize, query| -> Read<u64> {
        fields
            .get(i)
            .cloned()
            .unwrap_or_else(|| {
                Err(Unreadable {
                    query,
                    error: "missing".to_owned(),
                })
            })
            .map_err(|e| Unreadable { query, ..e })
    };
    let volatile_dbe = device
        .total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile)
        .map_err(unreadable("nvmlDeviceGetTotalEccErrors(volatile)"));
    let aggregate_dbe = device
        .total_ecc_errors(MemoryError::Uncorrected, EccCounter::Aggregate)
        .map_err(unreadable("nvmlDeviceGetTotalEccErrors(aggregate)"));
    let retired_pages_pending = device
        .are_pages_pending_retired()
        .map_err(unreadable("nvmlDeviceGetRetiredPagesPendingStatus"));
    let slowdown = device
        .current_throttle_reasons()
        .map(|r| Slowdown {
            thermal: r.intersects(
                ThrottleReasons::HW_THERMAL_SLOWDOWN | ThrottleReasons::SW_THERMAL_SLOWDOWN,
            ),
            power_brake: r.contains(ThrottleReasons::HW_POWER_BRAKE_SLOWDOWN),
        })
        .map_err(unreadable("nvmlDeviceGetCurrentClocksEventReasons"));
    let all = [
        uuid.as_ref().err(),
        volatile_dbe.as_ref().err(),
        retired_pages_pending.as_ref().err(),
        slowdown.as_ref().err(),
    ];
    let lost = all.into_iter().flatten().any(|e| e.error == "GpuLost");
    GpuReading {
        index,
        uuid,
        lost,
        volatile_dbe,
        aggregate_dbe,
        retired_pages_pending,
        row_remap_pending: field(0, "NVML_FI_DEV_REMAPPED_PENDING").map(|v| v != 0),
        row_remap_failure: field(1, "NVML_FI_DEV_REMAPPED_FAILURE").map(|v| v != 0),
        recovery_action: field(2, "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION")
            .map(RecoveryAction::from_value),
        slowdown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_makes_health_unknown_not_a_panic() {
        let mut source = NvmlSource::new("/nonexistent/libnvidia-ml.so.1".into());
        let err = poll(&mut source, Duration::ZERO).unwrap_err();
        assert!(err.0.contains("/nonexistent/libnvidia-ml.so.1"), "{err}");
    }
}
