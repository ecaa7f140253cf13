//! What one bench run measured, and how it is shown: a table on the terminal, Markdown and JSON
//! under `target/bench/`.

use std::{collections::BTreeMap, fmt::Write as _};

use serde::Serialize;

/// Mutating requests, counted by verb (`patch`, `create`, …) and by `verb resource`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Writes {
    /// Count per verb.
    pub by_verb: BTreeMap<String, u64>,
    /// Count per `verb resource`, such as `patch nodes`.
    pub by_resource: BTreeMap<String, u64>,
    /// Of all, those the API server refused (status 400 and above, such as 409 Conflict).
    pub refused: u64,
    /// The ClusterPolicy status writes by field manager (`gpu-operator/status`, …; `-` when the
    /// request named none): which reconciler wrote how often.
    pub status_by_manager: BTreeMap<String, u64>,
}

impl Writes {
    /// Counts one request that got HTTP status `code`.
    pub fn add(&mut self, verb: &str, resource: &str, code: u16) {
        if code >= 400 {
            self.refused += 1;
        }
        *self.by_verb.entry(verb.to_owned()).or_default() += 1;
        *self
            .by_resource
            .entry(format!("{verb} {resource}"))
            .or_default() += 1;
    }

    /// Counts one ClusterPolicy status write by `manager`.
    pub fn add_status_writer(&mut self, manager: Option<&str>) {
        *self
            .status_by_manager
            .entry(manager.unwrap_or("-").to_owned())
            .or_default() += 1;
    }

    /// All requests counted.
    pub fn total(&self) -> u64 {
        self.by_verb.values().sum()
    }

    /// Requests on `resource` by any verb, such as `clusterpolicies/status` (we patch it,
    /// NVIDIA's operator updates it).
    pub fn of(&self, resource: &str) -> u64 {
        self.by_resource
            .iter()
            .filter(|(k, _)| k.split_once(' ').is_some_and(|(_, r)| r == resource))
            .map(|(_, n)| n)
            .sum()
    }

    /// `patch nodes 5, patch nodes/status 5`, or `none`.
    pub fn summary_by_resource(&self) -> String {
        if self.by_resource.is_empty() {
            return "none".to_owned();
        }
        self.by_resource
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `patch 12, create 3` (plus `(2 refused)` when some were), or `0`.
    pub fn summary(&self) -> String {
        if self.by_verb.is_empty() {
            return "0".to_owned();
        }
        let verbs = self
            .by_verb
            .iter()
            .map(|(verb, n)| format!("{verb} {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        if self.refused == 0 {
            verbs
        } else {
            format!("{verbs} ({} refused)", self.refused)
        }
    }
}

/// The measurements of one fleet size. Times are seconds; `None` where the step did not finish.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Run {
    /// Simulated nodes in the cluster.
    pub nodes: u32,
    /// Of which GPU nodes.
    pub gpu_nodes: u32,
    /// Operator start until its caches synced (`/readyz`).
    pub caches_synced_s: Option<f64>,
    /// ClusterPolicy created until `state: ready` with reason `Reconciled`.
    pub ready_s: Option<f64>,
    /// Each `kubectl patch` of the series until the device plugin DaemonSet's spec changed.
    pub patch_latencies_s: Vec<f64>,
    /// Each patch split into the server's, the operator's and the watch's parts (from the audit
    /// log), `None` where the log lacks its requests.
    pub patch_parts: Vec<Option<super::patch_parts::PatchParts>>,
    /// Writes from the ClusterPolicy's creation until the steady window starts.
    pub rollout_writes: Writes,
    /// Lease renewals in that time.
    pub rollout_lease_writes: u64,
    /// Writes during the patch series (lease renewals excluded).
    pub patch_writes: Writes,
    /// Lease renewals during the patch series.
    pub patch_lease_writes: u64,
    /// Writes during the steady window (leader-election lease renewals excluded).
    pub steady_writes: Writes,
    /// Length of the steady window.
    pub steady_window_s: u64,
    /// Lease renewals during the steady window (expected: about one per 2–10 s).
    pub steady_lease_writes: u64,
    /// Peak resident memory of the operator (VmHWM), MiB.
    pub peak_rss_mib: Option<f64>,
    /// Resident memory at the end of the steady window (VmRSS), MiB.
    pub steady_rss_mib: Option<f64>,
    /// CPU seconds (user + system) of the operator from start until ready.
    pub cpu_rollout_s: Option<f64>,
    /// CPU seconds during the steady window.
    pub cpu_steady_s: Option<f64>,
    /// CPU seconds over the whole run (start to stop).
    pub cpu_total_s: Option<f64>,
    /// `/proc/loadavg` when the run started and when it ended: the machine may be shared.
    pub load_average: Vec<String>,
    /// The GPU health step (`--health`), when it ran.
    pub health: Option<super::health::HealthRun>,
    /// The driver upgrade step (`--upgrade`), when it ran.
    pub upgrade: Option<super::upgrade::UpgradeRun>,
    /// The sandbox profile's fleet and relabel step (`--sandbox`), when it ran.
    pub sandbox: Option<super::sandbox::SandboxRun>,
    /// The DRA profile's pools (`--dra`), when it ran.
    pub dra: Option<super::dra::DraRun>,
    /// What went wrong, if a step failed or timed out.
    pub error: Option<String>,
}

/// The whole report: the operator binary measured and one [`Run`] per fleet size.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Report {
    /// The `gpu-operator` binary that ran.
    pub operator: String,
    /// Extra environment it ran with.
    pub operator_env: Vec<String>,
    /// `git describe` of the tree it was built from, when known.
    pub revision: String,
    /// The ClusterPolicy it got (`--policy`, `--policy-patch`).
    pub policy: String,
    /// When the report was written (RFC 3339).
    pub finished_at: String,
    /// One entry per fleet size, in the order run.
    pub runs: Vec<Run>,
}

/// The ClusterPolicy's status subresource: its writes, by whatever verb or field manager.
pub const STATUS_WRITES: &str = "clusterpolicies/status";

impl Run {
    /// Median patch → DaemonSet latency, seconds.
    pub fn patch_p50_s(&self) -> Option<f64> {
        super::patches::percentile(&self.patch_latencies_s, 50.0)
    }

    /// 95th percentile patch → DaemonSet latency, seconds.
    pub fn patch_p95_s(&self) -> Option<f64> {
        super::patches::percentile(&self.patch_latencies_s, 95.0)
    }

    /// Mutating requests per patch of the series (lease renewals excluded).
    #[expect(clippy::cast_precision_loss, reason = "request counts are small")]
    pub fn writes_per_patch(&self) -> Option<f64> {
        let patches = self.patch_latencies_s.len();
        (patches > 0).then(|| self.patch_writes.total() as f64 / patches as f64)
    }

    /// Rollout writes (lease renewals excluded) per GPU node, comparable across profiles.
    #[expect(clippy::cast_precision_loss, reason = "request counts are small")]
    pub fn rollout_writes_per_gpu_node(&self) -> Option<f64> {
        (self.gpu_nodes > 0).then(|| self.rollout_writes.total() as f64 / f64::from(self.gpu_nodes))
    }
}

fn ms(value: Option<f64>) -> String {
    value.map_or_else(|| "—".to_owned(), |s| format!("{:.0} ms", s * 1e3))
}

fn secs(value: Option<f64>) -> String {
    value.map_or_else(|| "—".to_owned(), |s| format!("{s:.1} s"))
}

fn mib(value: Option<f64>) -> String {
    value.map_or_else(|| "—".to_owned(), |m| format!("{m:.1} MiB"))
}

const HEADER: [&str; 15] = [
    "nodes (GPU)",
    "caches synced",
    "ready",
    "patch → DS p50",
    "p95",
    "rollout writes",
    "per GPU node",
    "status writes",
    "writes/patch",
    "steady writes",
    "peak RSS",
    "steady RSS",
    "CPU rollout",
    "CPU steady",
    "CPU total",
];

impl Run {
    fn cells(&self) -> [String; 15] {
        [
            format!("{} ({})", self.nodes, self.gpu_nodes),
            secs(self.caches_synced_s),
            secs(self.ready_s),
            ms(self.patch_p50_s()),
            ms(self.patch_p95_s()),
            self.rollout_writes.summary(),
            self.rollout_writes_per_gpu_node()
                .map_or_else(|| "—".to_owned(), |w| format!("{w:.2}")),
            self.rollout_writes.of(STATUS_WRITES).to_string(),
            self.writes_per_patch()
                .map_or_else(|| "—".to_owned(), |w| format!("{w:.1}")),
            format!(
                "{} in {} s",
                self.steady_writes.summary(),
                self.steady_window_s
            ),
            mib(self.peak_rss_mib),
            mib(self.steady_rss_mib),
            secs(self.cpu_rollout_s),
            secs(self.cpu_steady_s),
            secs(self.cpu_total_s),
        ]
    }
}

impl Report {
    /// The report as Markdown: a table, the writes by resource, and errors.
    pub fn markdown(&self) -> String {
        let mut out = format!(
            "# gpu-operator bench\n\noperator `{}` {}(bench tree {}), policy {}, finished {}\n\n",
            self.operator,
            self.operator_env.iter().fold(String::new(), |mut out, e| {
                let _ = write!(out, "with `{e}` ");
                out
            }),
            self.revision,
            self.policy,
            self.finished_at
        );
        let _ = writeln!(out, "| {} |", HEADER.join(" | "));
        let _ = writeln!(out, "|{}", "---|".repeat(HEADER.len()));
        for run in &self.runs {
            let _ = writeln!(out, "| {} |", run.cells().join(" | "));
        }
        out.push_str("\nWrites by resource (rollout; steady, lease renewals excluded):\n\n");
        for run in &self.runs {
            let list = Writes::summary_by_resource;
            let _ = writeln!(
                out,
                "- {} nodes: rollout: {}; steady: {} (+{} lease renewals); {} patches: {}",
                run.nodes,
                list(&run.rollout_writes),
                list(&run.steady_writes),
                run.steady_lease_writes,
                run.patch_latencies_s.len(),
                list(&run.patch_writes),
            );
            let upgrade_writes = run.upgrade.as_ref().map(|u| &u.writes);
            for (when, writes) in [
                ("rollout", Some(&run.rollout_writes)),
                ("patches", Some(&run.patch_writes)),
                ("driver upgrade", upgrade_writes),
            ] {
                let Some(writes) = writes else { continue };
                if !writes.status_by_manager.is_empty() {
                    let by: Vec<String> = writes
                        .status_by_manager
                        .iter()
                        .map(|(m, n)| format!("{m} {n}"))
                        .collect();
                    let _ = writeln!(
                        out,
                        "  - status writes by writer, {when}: {}",
                        by.join(", ")
                    );
                }
            }
            if !run.patch_latencies_s.is_empty() {
                let each: Vec<String> = run
                    .patch_latencies_s
                    .iter()
                    .map(|s| format!("{:.0}", s * 1e3))
                    .collect();
                let _ = writeln!(out, "  - patch → DaemonSet, ms: {}", each.join(", "));
            }
            if let Some(parts) = super::patch_parts::line(&run.patch_parts) {
                let _ = writeln!(out, "  - {parts}");
            }
            if !run.load_average.is_empty() {
                let _ = writeln!(
                    out,
                    "  - load average (1, 5, 15 min) at start, end: {}",
                    run.load_average.join("; ")
                );
            }
            if let Some(health) = &run.health {
                let _ = writeln!(out, "  {}", super::health::line(health));
            }
            if let Some(upgrade) = &run.upgrade {
                let _ = writeln!(
                    out,
                    "  {}",
                    super::upgrade::line(run.nodes, run.gpu_nodes, upgrade)
                );
            }
            if let Some(sandbox) = &run.sandbox {
                let _ = writeln!(out, "  {}", super::sandbox::line(run.nodes, sandbox));
            }
            if let Some(dra) = &run.dra {
                let _ = writeln!(out, "  {}", super::dra::line(run.nodes, dra));
            }
            if let Some(error) = &run.error {
                let _ = writeln!(out, "  - error: {error}");
            }
        }
        out
    }

    /// The table for a terminal, columns aligned.
    pub fn table(&self) -> String {
        let rows: Vec<[String; 15]> = self.runs.iter().map(Run::cells).collect();
        let widths: Vec<usize> = (0..HEADER.len())
            .map(|i| {
                rows.iter()
                    .map(|r| r[i].chars().count())
                    .chain([HEADER[i].chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cells: Vec<&str>| {
            cells
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_owned()
        };
        let mut out = line(HEADER.to_vec());
        for row in &rows {
            out.push('\n');
            out.push_str(&line(row.iter().map(String::as_str).collect()));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run() -> Run {
        let mut rollout = Writes::default();
        for _ in 0..3 {
            rollout.add("patch", "nodes", 200);
        }
        rollout.add("create", "events", 201);
        Run {
            nodes: 100,
            gpu_nodes: 86,
            caches_synced_s: Some(0.42),
            ready_s: Some(12.345),
            rollout_writes: rollout,
            steady_window_s: 60,
            peak_rss_mib: Some(20.0),
            ..Run::default()
        }
    }

    #[test]
    fn writes_count_by_verb_and_resource() {
        let w = run().rollout_writes;
        assert_eq!(w.summary(), "create 1, patch 3");
        assert_eq!(w.by_resource["patch nodes"], 3);
        assert_eq!(Writes::default().summary(), "0");
        let mut conflicted = w.clone();
        conflicted.add("patch", "nodes", 409);
        assert_eq!(conflicted.summary(), "create 1, patch 4 (1 refused)");
    }

    #[test]
    fn the_markdown_has_one_row_per_run_and_dashes_for_missing_numbers() {
        let mut with_status = run();
        with_status
            .rollout_writes
            .add_status_writer(Some("gpu-operator/status"));
        with_status
            .rollout_writes
            .add_status_writer(Some("gpu-operator/status"));
        with_status.rollout_writes.add_status_writer(None);
        let report = Report {
            operator: "gpu-operator".into(),
            operator_env: vec!["MALLOC_ARENA_MAX=2".into()],
            revision: "abc".into(),
            policy: "`minimal.yaml`".into(),
            finished_at: "now".into(),
            runs: vec![with_status],
        };
        let md = report.markdown();
        assert!(
            md.contains("operator `gpu-operator` with `MALLOC_ARENA_MAX=2` (bench tree abc)"),
            "{md}"
        );
        assert!(
            md.contains(
                "| 100 (86) | 0.4 s | 12.3 s | — | — | create 1, patch 3 | 0.05 | 0 | — | 0 in 60 s | 20.0 MiB | — |"
            ),
            "{md}"
        );
        assert!(md.contains("- 100 nodes: rollout: create events 1, patch nodes 3; steady: none (+0 lease renewals); 0 patches: none"), "{md}");
        assert!(
            md.contains("  - status writes by writer, rollout: - 1, gpu-operator/status 2\n"),
            "{md}"
        );
        assert!(!md.contains("by writer, patches"), "{md}");
        let table = report.table();
        assert_eq!(table.lines().count(), 2);
        assert!(
            table.starts_with("nodes (GPU)  caches synced  ready"),
            "{table}"
        );
    }

    #[test]
    fn patch_figures_are_percentiles_and_writes_per_patch() {
        let mut run = run();
        run.patch_latencies_s = vec![0.05, 0.03, 0.04, 0.2];
        run.patch_writes.add("patch", "daemonsets", 200);
        for _ in 0..7 {
            run.patch_writes.add("patch", "clusterpolicies/status", 200);
        }
        assert_eq!(run.patch_p50_s(), Some(0.04));
        assert_eq!(run.patch_p95_s(), Some(0.2));
        assert_eq!(run.writes_per_patch(), Some(2.0));
        let cells = run.cells();
        assert_eq!((cells[3].as_str(), cells[4].as_str()), ("40 ms", "200 ms"));
        assert_eq!(cells[8], "2.0");
    }

    #[test]
    fn the_json_names_every_measurement() {
        let json = serde_json::to_value(run()).unwrap();
        assert_eq!(json["ready_s"], 12.345);
        assert_eq!(json["rollout_writes"]["by_verb"]["patch"], 3);
        assert_eq!(json["patch_latencies_s"], serde_json::json!([]));
    }
}
