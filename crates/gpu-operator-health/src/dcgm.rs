//! The node's DCGM exporter as a second source of XIDs, when the policy runs it: its
//! `DCGM_FI_DEV_XID_ERRORS` gauge holds each GPU's last XID, so a value that changes between two
//! scrapes is an XID event. This catches XIDs when NVML's event watch cannot be had (a driver or
//! runtime that refuses event registration). The first scrape only sets the baseline, so an
//! agent restart does not replay an old XID. Malformed text is skipped line by line, never a
//! panic.

use std::collections::BTreeMap;

use crate::reading::XidEvent;

/// The exporter's gauge with each GPU's last XID.
pub const XID_METRIC: &str = "DCGM_FI_DEV_XID_ERRORS";

/// The last XID per GPU (`gpu` label, with its `UUID` label when present) in an exporter answer.
pub fn last_xids(text: &str) -> BTreeMap<u32, (Option<String>, u64)> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.trim().strip_prefix(XID_METRIC) else {
            continue;
        };
        let Some((labels, value)) = rest.strip_prefix('{').and_then(|r| r.split_once('}')) else {
            continue;
        };
        let label = |name: &str| {
            labels.split(',').find_map(|pair| {
                let (key, value) = pair.split_once('=')?;
                (key.trim() == name).then(|| value.trim().trim_matches('"').to_owned())
            })
        };
        let gpu = label("gpu").and_then(|g| g.parse::<u32>().ok());
        let value = value
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0 && *v < 1e9);
        if let (Some(gpu), Some(value)) = (gpu, value) {
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "checked finite, non-negative and below 1e9"
            )]
            let xid = value as u64;
            out.insert(gpu, (label("UUID"), xid));
        }
    }
    out
}

/// Turns successive scrapes into XID events.
#[derive(Debug, Default)]
pub struct XidWatch {
    last: Option<BTreeMap<u32, (Option<String>, u64)>>,
}

impl XidWatch {
    /// The XIDs that changed since the previous scrape (none on the first).
    pub fn events(&mut self, text: &str) -> Vec<XidEvent> {
        let now = last_xids(text);
        let events = match &self.last {
            None => Vec::new(),
            Some(before) => now
                .iter()
                .filter(|(gpu, (_, xid))| *xid != 0 && before.get(gpu).map(|(_, b)| b) != Some(xid))
                .map(|(gpu, (uuid, xid))| XidEvent {
                    gpu: Some(*gpu),
                    uuid: uuid.clone(),
                    xid: *xid,
                })
                .collect(),
        };
        self.last = Some(now);
        events
    }
}

/// The events of `extra` that `seen` does not already hold (the same GPU and XID), so an XID
/// both NVML and DCGM report counts once.
pub fn merge_events(seen: &mut Vec<XidEvent>, extra: Vec<XidEvent>) {
    for event in extra {
        if !seen
            .iter()
            .any(|s| s.gpu == event.gpu && s.xid == event.xid)
        {
            seen.push(event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRAPE: &str = r#"# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.
# TYPE DCGM_FI_DEV_XID_ERRORS gauge
DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-aaaa",pci_bus_id="00000000:00:06.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-1"} 0
DCGM_FI_DEV_XID_ERRORS{gpu="1",UUID="GPU-bbbb",device="nvidia1"} 0
DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-aaaa"} 33
"#;

    #[test]
    fn reads_the_last_xid_per_gpu() {
        let xids = last_xids(SCRAPE);
        assert_eq!(xids.len(), 2);
        assert_eq!(xids[&0], (Some("GPU-aaaa".to_owned()), 0));
        assert_eq!(xids[&1], (Some("GPU-bbbb".to_owned()), 0));
    }

    #[test]
    fn a_changed_xid_is_an_event_and_the_first_scrape_only_the_baseline() {
        let mut watch = XidWatch::default();
        let old = SCRAPE.replace("device=\"nvidia1\"} 0", "device=\"nvidia1\"} 13");
        assert!(
            watch.events(&old).is_empty(),
            "baseline: no replay of an old XID"
        );
        assert!(watch.events(&old).is_empty(), "unchanged");
        let new = SCRAPE.replace("device=\"nvidia1\"} 0", "device=\"nvidia1\"} 79");
        let events = watch.events(&new);
        assert_eq!(
            events,
            [XidEvent {
                gpu: Some(1),
                uuid: Some("GPU-bbbb".into()),
                xid: 79
            }]
        );
    }

    #[test]
    fn malformed_answers_are_skipped_never_a_panic() {
        for text in [
            "",
            "DCGM_FI_DEV_XID_ERRORS",
            "DCGM_FI_DEV_XID_ERRORS{gpu=\"0\"",
            "DCGM_FI_DEV_XID_ERRORS{gpu=\"x\"} 5",
            "DCGM_FI_DEV_XID_ERRORS{gpu=\"0\"} NaN",
            "DCGM_FI_DEV_XID_ERRORS{gpu=\"0\"} -1",
            "DCGM_FI_DEV_XID_ERRORS{gpu=\"0\"} 1e300",
            "DCGM_FI_DEV_XID_ERRORS{=,=,\"} }} 3",
            "<html>502 Bad Gateway</html>",
        ] {
            assert!(last_xids(text).is_empty(), "{text}");
        }
    }

    #[test]
    fn an_xid_seen_by_both_sources_counts_once() {
        let nvml = XidEvent {
            gpu: Some(0),
            uuid: Some("GPU-aaaa".into()),
            xid: 48,
        };
        let mut seen = vec![nvml.clone()];
        let other = XidEvent {
            xid: 79,
            ..nvml.clone()
        };
        merge_events(&mut seen, vec![nvml, other.clone()]);
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[1], other);
    }
}
