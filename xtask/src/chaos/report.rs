//! The chaos report: one Markdown table row per kill, failover and restart, with each scenario's
//! figures.

use std::fmt::Write as _;

use super::{
    failover::Failover,
    kills::{Cycle, LEASE_DURATION},
    restarts::{self, Restart},
    throttled::{self, Rollout},
};

/// A chaos run's results.
pub struct Report {
    /// `short` or `full`.
    pub profile: &'static str,
    /// Seed of the kill moments.
    pub seed: u64,
    /// `git describe` of the tree.
    pub revision: String,
    /// The simulated fleet.
    pub fleet: String,
    /// Wall time of the run, cluster start included.
    pub minutes: f64,
    /// The kill cycles, in order.
    pub cycles: Vec<Cycle>,
    /// The leader failovers, in order.
    pub failovers: Vec<Failover>,
    /// The control plane restarts, in order.
    pub restarts: Vec<Restart>,
    /// The rollouts without and with API Priority and Fairness limiting the operator.
    pub throttled: Vec<Rollout>,
}

impl Report {
    /// Whether every cycle passed.
    pub fn passed(&self) -> bool {
        self.cycles.iter().all(Cycle::passed)
            && self.failovers.iter().all(Failover::passed)
            && self.restarts.iter().all(Restart::passed)
            && (self.throttled.is_empty() || throttled::passed(&self.throttled))
    }

    /// The report as Markdown.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let now = k8s_openapi::jiff::Timestamp::now();
        let _ = writeln!(
            out,
            "# gpu-operator chaos\n\n{} profile, seed {}, tree {}, fleet {}, finished {now}, \
             {:.1} min",
            self.profile, self.seed, self.revision, self.fleet, self.minutes
        );
        if !self.cycles.is_empty() {
            self.kills_markdown(&mut out);
        }
        if !self.failovers.is_empty() {
            self.failover_markdown(&mut out);
        }
        if !self.restarts.is_empty() {
            restarts::markdown(&self.restarts, &mut out);
        }
        if !self.throttled.is_empty() {
            throttled::markdown(&self.throttled, &mut out);
        }
        out
    }

    fn kills_markdown(&self, out: &mut String) {
        out.push_str(
            "\n## Operator killed (SIGKILL) mid-rollout and mid-change, restarted at once\n\n",
        );
        out.push_str(
            "| # | killed during | killed after | converged after restart | orphaned / duplicated | missing | pods replaced | extra DS updates | writes to converge | writes once converged |\n\
             |---|---|---|---|---|---|---|---|---|---|\n",
        );
        for (i, cycle) in self.cycles.iter().enumerate() {
            let converged = cycle
                .converged_s
                .map_or_else(|| "**no**".to_owned(), |s| format!("{s:.1} s"));
            let _ = writeln!(
                out,
                "| {} | {} | {:.1} s | {converged} | {} | {} | {} | {} | {} | {} |",
                i + 1,
                cycle.action,
                cycle.killed_after_s,
                cycle.extra.len(),
                cycle.missing.len(),
                cycle.pods_replaced,
                cycle.extra_updates,
                cycle.writes_to_converge,
                cycle.quiet_writes.len(),
            );
        }
        let _ = writeln!(out, "\n{}", self.summary());
        for (i, cycle) in self.cycles.iter().enumerate() {
            if cycle.passed() {
                continue;
            }
            let _ = writeln!(out, "\nkill {} failed:", i + 1);
            if let Some(error) = &cycle.error {
                let _ = writeln!(out, "- error: {error}");
            }
            for (what, list) in [
                ("orphaned/duplicated", &cycle.extra),
                ("missing", &cycle.missing),
                ("write once converged", &cycle.quiet_writes),
            ] {
                for item in list {
                    let _ = writeln!(out, "- {what}: {item}");
                }
            }
        }
    }

    fn failover_markdown(&self, out: &mut String) {
        out.push_str(
            "\n## Leader failover (two candidates, the leader SIGKILLed mid-rollout)\n\n\
             | # | killed after | standby holds the Lease after | rollout complete after | standby writes before it led | writes of both at once | writes leader / standby |\n\
             |---|---|---|---|---|---|---|\n",
        );
        let secs = |s: Option<f64>| s.map_or_else(|| "**no**".to_owned(), |s| format!("{s:.1} s"));
        for (i, f) in self.failovers.iter().enumerate() {
            let _ = writeln!(
                out,
                "| {} | {:.1} s | {} | {} | {} | {} | {} / {} |",
                i + 1,
                f.killed_after_s,
                secs(f.takeover_s),
                secs(f.converged_s),
                f.standby_writes_before,
                f.overlapping_writes,
                f.writes.0,
                f.writes.1,
            );
        }
        let worst = self
            .failovers
            .iter()
            .filter_map(|f| f.takeover_s)
            .fold(0.0, f64::max);
        let _ = writeln!(
            out,
            "\n**{} of {} failovers passed**; slowest takeover {worst:.1} s after the kill (Lease \
             duration {} s).",
            self.failovers.iter().filter(|f| f.passed()).count(),
            self.failovers.len(),
            LEASE_DURATION.as_secs(),
        );
        for (i, f) in self.failovers.iter().enumerate() {
            if let Some(error) = &f.error {
                let _ = writeln!(out, "\nfailover {} failed: {error}", i + 1);
            }
        }
    }

    /// The kill scenario's figures in one paragraph.
    pub fn summary(&self) -> String {
        let kills = self.cycles.len();
        let converged: Vec<f64> = self.cycles.iter().filter_map(|c| c.converged_s).collect();
        let worst = converged.iter().copied().fold(0.0, f64::max);
        let sum = |f: fn(&Cycle) -> usize| self.cycles.iter().map(f).sum::<usize>();
        format!(
            "**{} of {kills} kills converged to `ready`** (slowest {worst:.1} s after the restart, \
             which first waits out the dead holder's {} s Lease); orphaned or duplicated objects: {}; \
             missing: {}; operand pods replaced without a DaemonSet change: {}; extra DaemonSet \
             updates: {}; mutating requests in the 10 s once converged: {}.",
            converged.len(),
            LEASE_DURATION.as_secs(),
            sum(|c| c.extra.len()),
            sum(|c| c.missing.len()),
            sum(|c| c.pods_replaced),
            self.cycles.iter().map(|c| c.extra_updates).sum::<i64>(),
            sum(|c| c.quiet_writes.len()),
        )
    }
}
