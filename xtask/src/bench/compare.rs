//! The side-by-side table of `cargo xtask bench --against`: per fleet size, every figure of our
//! operator and of the other one, and their ratio (ours ÷ theirs: below 1 is less time, memory,
//! CPU or requests for us).

use std::fmt::Write as _;

use super::report::{Report, Run, STATUS_WRITES};

/// One figure of a run, as a number (for the ratio) and its unit.
struct Figure {
    name: &'static str,
    unit: &'static str,
    value: fn(&Run) -> Option<f64>,
}

#[expect(
    clippy::cast_precision_loss,
    clippy::unnecessary_wraps,
    reason = "request counts are small; the figures' type"
)]
fn count(n: u64) -> Option<f64> {
    Some(n as f64)
}

const FIGURES: [Figure; 14] = [
    Figure {
        name: "caches synced",
        unit: "s",
        value: |r| r.caches_synced_s,
    },
    Figure {
        name: "ClusterPolicy created → ready",
        unit: "s",
        value: |r| r.ready_s,
    },
    Figure {
        name: "peak RSS",
        unit: "MiB",
        value: |r| r.peak_rss_mib,
    },
    Figure {
        name: "steady RSS",
        unit: "MiB",
        value: |r| r.steady_rss_mib,
    },
    Figure {
        name: "CPU to ready",
        unit: "s",
        value: |r| r.cpu_rollout_s,
    },
    Figure {
        name: "CPU in the steady window",
        unit: "s",
        value: |r| r.cpu_steady_s,
    },
    Figure {
        name: "mutating requests, rollout",
        unit: "",
        value: |r| count(r.rollout_writes.total()),
    },
    Figure {
        name: "of which ClusterPolicy status",
        unit: "",
        value: |r| count(r.rollout_writes.of(STATUS_WRITES)),
    },
    Figure {
        name: "lease renewals, rollout",
        unit: "",
        value: |r| count(r.rollout_lease_writes),
    },
    Figure {
        name: "mutating requests, steady window",
        unit: "",
        value: |r| count(r.steady_writes.total()),
    },
    Figure {
        name: "lease renewals, steady window",
        unit: "",
        value: |r| count(r.steady_lease_writes),
    },
    Figure {
        name: "patch → DaemonSet p50",
        unit: "ms",
        value: |r| r.patch_p50_s().map(|s| s * 1e3),
    },
    Figure {
        name: "patch → DaemonSet p95",
        unit: "ms",
        value: |r| r.patch_p95_s().map(|s| s * 1e3),
    },
    Figure {
        name: "mutating requests per patch",
        unit: "",
        value: Run::writes_per_patch,
    },
];

fn cell(value: Option<f64>, unit: &str) -> String {
    match value {
        None => "—".to_owned(),
        Some(v) if unit.is_empty() && v.fract() == 0.0 => format!("{v:.0}"),
        Some(v) if unit.is_empty() || unit == "ms" => {
            format!("{v:.1} {unit}").trim_end().to_owned()
        }
        Some(v) => format!("{v:.2} {unit}"),
    }
}

fn ratio(ours: Option<f64>, theirs: Option<f64>) -> String {
    match (ours, theirs) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
        (Some(a), Some(b)) if a == 0.0 && b == 0.0 => "=".to_owned(),
        _ => "—".to_owned(),
    }
}

/// The side-by-side tables, one per fleet size both reports ran, as Markdown.
pub fn markdown(ours: &Report, theirs: &Report) -> String {
    let mut out = format!(
        "# gpu-operator bench, side by side\n\nours: `{}` ({}); against: `{}` ({}); policy {}; finished {}\n",
        ours.operator,
        ours.revision,
        theirs.operator,
        theirs.revision,
        ours.policy,
        k8s_openapi::jiff::Timestamp::now()
    );
    for run in &ours.runs {
        let other = theirs.runs.iter().find(|r| r.nodes == run.nodes);
        let _ = write!(
            out,
            "\n## {} nodes ({} GPU)\n\n| figure | ours | against | ours ÷ against |\n|---|---|---|---|\n",
            run.nodes, run.gpu_nodes
        );
        for figure in &FIGURES {
            let a = (figure.value)(run);
            let b = other.and_then(|o| (figure.value)(o));
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                figure.name,
                cell(a, figure.unit),
                cell(b, figure.unit),
                ratio(a, b)
            );
        }
        for (who, r) in [("ours", Some(run)), ("against", other)] {
            match r.and_then(|r| r.error.as_deref()) {
                Some(error) => {
                    let _ = writeln!(out, "\n{who} stopped early: {error}");
                }
                None if r.is_none() => {
                    let _ = writeln!(out, "\n{who}: no run at this size");
                }
                None => {}
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(ready: f64, rss: f64, status_writes: u64) -> Run {
        let mut run = Run {
            nodes: 100,
            gpu_nodes: 86,
            ready_s: Some(ready),
            peak_rss_mib: Some(rss),
            patch_latencies_s: vec![0.04, 0.05],
            ..Run::default()
        };
        for _ in 0..status_writes {
            run.rollout_writes
                .add("patch", "clusterpolicies/status", 200);
        }
        run
    }

    #[test]
    fn every_figure_gets_both_columns_and_the_ratio() {
        let ours = Report {
            runs: vec![run(20.0, 25.0, 30)],
            ..Report::default()
        };
        let mut failed = run(200.0, 100.0, 50);
        failed.patch_latencies_s.clear();
        failed.error = Some("timed out waiting for ready; the log ends: …".to_owned());
        let theirs = Report {
            runs: vec![failed],
            ..Report::default()
        };
        let md = markdown(&ours, &theirs);
        assert!(md.contains("## 100 nodes (86 GPU)"), "{md}");
        assert!(
            md.contains("| ClusterPolicy created → ready | 20.00 s | 200.00 s | 0.10× |"),
            "{md}"
        );
        assert!(
            md.contains("| peak RSS | 25.00 MiB | 100.00 MiB | 0.25× |"),
            "{md}"
        );
        assert!(
            md.contains("| of which ClusterPolicy status | 30 | 50 | 0.60× |"),
            "{md}"
        );
        assert!(
            md.contains("| patch → DaemonSet p50 | 40.0 ms | — | — |"),
            "{md}"
        );
        assert!(md.contains("against stopped early: timed out"), "{md}");
        assert_eq!(
            md.matches("\n| ").count(),
            15,
            "a header and 14 figures: {md}"
        );
    }
}
