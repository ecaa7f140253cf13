//! Prometheus metrics, under NVIDIA's names so existing dashboards and alerts keep working
//! (`gpu_operator_reconciliation_status`, `…_total`, `…_failed_total`, `…_last_success_ts_seconds`,
//! `gpu_operator_gpu_nodes_total`, the driver upgrade gauges `gpu_operator_nodes_upgrades_*` and
//! `gpu_operator_driver_auto_upgrade_enabled`), plus a duration histogram per reconciler and the
//! nodes per driver upgrade state. Labels are the reconciler, the error category and the upgrade
//! state only — never object names.

use std::{
    sync::atomic::AtomicU64,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use prometheus_client::{
    encoding::{EncodeLabelSet, text::encode},
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};

/// NVIDIA's `gpu_operator_reconciliation_status` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReconciliationStatus {
    /// Every enabled operand is ready.
    Ready = 1,
    /// Some operand is not ready yet.
    NotReady = 0,
    /// There is no active ClusterPolicy.
    PolicyUnavailable = -1,
    /// Reconciling failed.
    Failed = -2,
}

/// The driver upgrade as NVIDIA's gauges count it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DriverUpgrades {
    /// `driver.upgradePolicy.autoUpgrade` is on (and the driver enabled).
    pub auto_upgrade: bool,
    /// Nodes between admission and done.
    pub in_progress: usize,
    /// Nodes in `upgrade-done`.
    pub done: usize,
    /// Nodes in `upgrade-failed`.
    pub failed: usize,
    /// How many more nodes may start now (parallel and unavailable slots left).
    pub available: usize,
    /// Nodes in `upgrade-required`.
    pub pending: usize,
    /// Nodes per state label value, every state listed (0 included).
    pub by_state: Vec<(&'static str, usize)>,
    /// Driver pods that run the driver asked for from an older template of their DaemonSet.
    pub older_template: usize,
}

/// Why the upgrade restarts a node's driver pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriverRestart {
    /// What the pod installs changed: cordon, wait, evict, drain, restart, validate.
    Upgrade,
    /// Only the rest of its template changed: the pod is restarted in place, the node stays in
    /// service.
    InPlace,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    decision: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReconcileLabels {
    reconciler: String,
    error: String,
}

/// The operator's metrics registry. Built once in `main` and shared through the context.
pub struct Metrics {
    registry: Registry,
    gpu_nodes: Gauge,
    has_nfd_labels: Gauge,
    status: Gauge,
    reconciliations: Counter,
    failures: Counter,
    last_success: Gauge<f64, AtomicU64>,
    durations: Family<ReconcileLabels, Histogram>,
    upgrades: UpgradeGauges,
    mig_failed_nodes: Gauge,
    mig_stuck_nodes: Gauge,
    unhealthy_nodes: Family<ReasonLabels, Gauge>,
}

/// The driver upgrade gauges.
#[derive(Default)]
struct UpgradeGauges {
    enabled: Gauge,
    in_progress: Gauge,
    done: Gauge,
    failed: Gauge,
    available: Gauge,
    pending: Gauge,
    by_state: Family<StateLabels, Gauge>,
    older_template: Gauge,
    decisions: Family<DecisionLabels, Counter>,
}

impl UpgradeGauges {
    fn register(&self, registry: &mut Registry) {
        for (name, help, gauge) in [
            (
                "driver_auto_upgrade_enabled",
                "1 when driver.upgradePolicy.autoUpgrade is on",
                &self.enabled,
            ),
            (
                "nodes_upgrades_in_progress",
                "GPU nodes upgrading the driver",
                &self.in_progress,
            ),
            (
                "nodes_upgrades_done",
                "GPU nodes in upgrade-done",
                &self.done,
            ),
            (
                "nodes_upgrades_failed",
                "GPU nodes in upgrade-failed",
                &self.failed,
            ),
            (
                "nodes_upgrades_available",
                "GPU nodes that may start a driver upgrade now",
                &self.available,
            ),
            (
                "nodes_upgrades_pending",
                "GPU nodes in upgrade-required",
                &self.pending,
            ),
        ] {
            registry.register(name, help, gauge.clone());
        }
        registry.register(
            "driver_upgrade_nodes",
            "GPU nodes per driver upgrade state (label nvidia.com/gpu-driver-upgrade-state)",
            self.by_state.clone(),
        );
        registry.register(
            "driver_pods_older_template",
            "Driver pods that run the desired driver from an older template (labels, tolerations, resources, ...)",
            self.older_template.clone(),
        );
        registry.register(
            "driver_restarts",
            "Driver pod restarts the upgrade began, by decision (upgrade: cordon and drain; in-place: template only)",
            self.decisions.clone(),
        );
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every metric registered.
    pub fn new() -> Self {
        let mut root = Registry::default();
        let registry = root.sub_registry_with_prefix("gpu_operator");
        let gpu_nodes = Gauge::default();
        registry.register(
            "gpu_nodes_total",
            "Number of nodes with an NVIDIA GPU",
            gpu_nodes.clone(),
        );
        let has_nfd_labels = Gauge::default();
        registry.register(
            "reconciliation_has_nfd_labels",
            "1 when some node carries NFD labels",
            has_nfd_labels.clone(),
        );
        let status = Gauge::default();
        registry.register(
            "reconciliation_status",
            "1: ready, 0: operands not ready, -1: no ClusterPolicy, -2: reconciling failed",
            status.clone(),
        );
        let reconciliations = Counter::default();
        registry.register(
            "reconciliation",
            "ClusterPolicy status reconciliations",
            reconciliations.clone(),
        );
        let failures = Counter::default();
        registry.register(
            "reconciliation_failed",
            "ClusterPolicy reconciliations that failed",
            failures.clone(),
        );
        let last_success = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "reconciliation_last_success_ts_seconds",
            "Unix time of the last reconciliation that found every operand ready",
            last_success.clone(),
        );
        let durations = Family::<ReconcileLabels, Histogram>::new_with_constructor(|| {
            Histogram::new([
                0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
            ])
        });
        registry.register(
            "reconcile_duration_seconds",
            "Duration of one reconcile, by reconciler and error category (empty when it succeeded)",
            durations.clone(),
        );
        let upgrades = UpgradeGauges::default();
        upgrades.register(registry);
        let mig_failed_nodes = Gauge::default();
        registry.register(
            "mig_config_failed_nodes",
            "GPU nodes whose MIG layout failed to apply (nvidia.com/mig.config.state=failed)",
            mig_failed_nodes.clone(),
        );
        let mig_stuck_nodes = Gauge::default();
        registry.register(
            "mig_config_stuck_nodes",
            "GPU nodes whose MIG reconfiguration has been pending or rebooting past migManager.watchdog.timeoutSeconds",
            mig_stuck_nodes.clone(),
        );
        let unhealthy_nodes = Family::<ReasonLabels, Gauge>::default();
        registry.register(
            "gpu_unhealthy_nodes",
            "GPU nodes whose GPU health agent reports GPUHealthy=False, by fault class (the reason)",
            unhealthy_nodes.clone(),
        );
        Self {
            registry: root,
            gpu_nodes,
            has_nfd_labels,
            status,
            reconciliations,
            failures,
            last_success,
            durations,
            upgrades,
            mig_failed_nodes,
            mig_stuck_nodes,
            unhealthy_nodes,
        }
    }

    /// Records the driver upgrade's counts.
    pub fn set_driver_upgrades(&self, upgrades: &DriverUpgrades) {
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        let g = &self.upgrades;
        g.enabled.set(i64::from(upgrades.auto_upgrade));
        g.in_progress.set(count(upgrades.in_progress));
        g.done.set(count(upgrades.done));
        g.failed.set(count(upgrades.failed));
        g.available.set(count(upgrades.available));
        g.pending.set(count(upgrades.pending));
        g.older_template.set(count(upgrades.older_template));
        for (state, n) in &upgrades.by_state {
            g.by_state
                .get_or_create(&StateLabels {
                    state: (*state).to_owned(),
                })
                .set(count(*n));
        }
    }

    /// Counts one driver pod restart the upgrade began, by why.
    pub fn count_driver_restart(&self, why: DriverRestart) {
        let decision = match why {
            DriverRestart::Upgrade => "upgrade",
            DriverRestart::InPlace => "in-place",
        };
        self.upgrades
            .decisions
            .get_or_create(&DecisionLabels { decision })
            .inc();
    }

    /// Records one reconcile of `reconciler`; `error` is the error category if it failed.
    pub fn observe(&self, reconciler: &str, duration: Duration, error: Option<&str>) {
        let labels = ReconcileLabels {
            reconciler: reconciler.to_owned(),
            error: error.unwrap_or_default().to_owned(),
        };
        self.durations
            .get_or_create(&labels)
            .observe(duration.as_secs_f64());
    }

    /// Records the outcome of a ClusterPolicy status reconciliation.
    pub fn set_policy_status(
        &self,
        status: ReconciliationStatus,
        gpu_nodes: usize,
        has_nfd_labels: bool,
    ) {
        self.reconciliations.inc();
        if matches!(status, ReconciliationStatus::Failed) {
            self.failures.inc();
        }
        if matches!(status, ReconciliationStatus::Ready) {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            self.last_success.set(now.as_secs_f64());
        }
        self.status.set(status as i64);
        self.gpu_nodes
            .set(i64::try_from(gpu_nodes).unwrap_or(i64::MAX));
        self.has_nfd_labels.set(i64::from(has_nfd_labels));
    }

    /// Records how many GPU nodes report a failed MIG layout, and how many the watchdog marked
    /// stuck.
    pub fn set_mig_troubled_nodes(&self, failed: usize, stuck: usize) {
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.mig_failed_nodes.set(count(failed));
        self.mig_stuck_nodes.set(count(stuck));
    }

    /// Records the unhealthy GPU nodes by fault class; classes no node has any more are dropped.
    pub fn set_unhealthy_nodes(&self, by_reason: &std::collections::BTreeMap<String, usize>) {
        self.unhealthy_nodes.clear();
        for (reason, n) in by_reason {
            self.unhealthy_nodes
                .get_or_create(&ReasonLabels {
                    reason: reason.clone(),
                })
                .set(i64::try_from(*n).unwrap_or(i64::MAX));
        }
    }

    /// The metrics in the Prometheus text format.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

#[cfg(test)]
#[allow(
    clippy::float_cmp,
    reason = "the values compared are small integers, exact in an f64"
)]
mod tests {
    use super::*;
    use crate::report::exposition;

    #[test]
    fn exposes_nvidia_names_with_the_recorded_values() {
        let metrics = Metrics::new();
        metrics.set_policy_status(ReconciliationStatus::Ready, 13, true);
        for _ in 0..11 {
            metrics.observe("device-plugin", Duration::from_millis(20), None);
        }
        metrics.observe("device-plugin", Duration::from_millis(20), Some("ApiError"));
        metrics.set_policy_status(ReconciliationStatus::Failed, 13, false);
        let text = metrics.encode().unwrap();
        let all = exposition::samples(&text).unwrap();
        let get = |name: &str, labels: &[(&str, &str)]| {
            exposition::value(&all, name, labels)
                .unwrap_or_else(|| panic!("no {name} {labels:?} in:\n{text}"))
        };
        // NVIDIA's names (reference/nvidia-gpu-operator.md), with the values recorded above.
        assert_eq!(get("gpu_operator_gpu_nodes_total", &[]), 13.0);
        assert_eq!(get("gpu_operator_reconciliation_status", &[]), -2.0);
        assert_eq!(get("gpu_operator_reconciliation_total", &[]), 2.0);
        assert_eq!(get("gpu_operator_reconciliation_failed_total", &[]), 1.0);
        assert_eq!(get("gpu_operator_reconciliation_has_nfd_labels", &[]), 0.0);
        let ok = [("reconciler", "device-plugin"), ("error", "")];
        let failed = [("reconciler", "device-plugin"), ("error", "ApiError")];
        assert_eq!(
            get("gpu_operator_reconcile_duration_seconds_count", &ok),
            11.0
        );
        assert_eq!(
            get("gpu_operator_reconcile_duration_seconds_count", &failed),
            1.0
        );
        let sum = get("gpu_operator_reconcile_duration_seconds_sum", &ok);
        assert!((sum - 0.22).abs() < 1e-9, "{sum}");
        let mut le = ok.to_vec();
        le.push(("le", "0.01"));
        assert_eq!(
            get("gpu_operator_reconcile_duration_seconds_bucket", &le),
            0.0
        );
        le[2] = ("le", "0.025");
        assert_eq!(
            get("gpu_operator_reconcile_duration_seconds_bucket", &le),
            11.0
        );
    }

    #[test]
    fn driver_upgrade_gauges_have_nvidias_names() {
        let metrics = Metrics::new();
        metrics.set_driver_upgrades(&DriverUpgrades {
            auto_upgrade: true,
            in_progress: 2,
            done: 9,
            failed: 1,
            available: 0,
            pending: 3,
            by_state: vec![("upgrade-required", 3), ("drain-required", 0)],
            older_template: 4,
        });
        metrics.count_driver_restart(DriverRestart::InPlace);
        metrics.count_driver_restart(DriverRestart::InPlace);
        metrics.count_driver_restart(DriverRestart::Upgrade);
        let text = metrics.encode().unwrap();
        let all = exposition::samples(&text).unwrap();
        let get = |name: &str, labels: &[(&str, &str)]| {
            exposition::value(&all, name, labels)
                .unwrap_or_else(|| panic!("no {name} {labels:?} in:\n{text}"))
        };
        // NVIDIA's names (reference/nvidia-gpu-operator.md §1.8).
        assert_eq!(get("gpu_operator_driver_auto_upgrade_enabled", &[]), 1.0);
        assert_eq!(get("gpu_operator_nodes_upgrades_in_progress", &[]), 2.0);
        assert_eq!(get("gpu_operator_nodes_upgrades_done", &[]), 9.0);
        assert_eq!(get("gpu_operator_nodes_upgrades_failed", &[]), 1.0);
        assert_eq!(get("gpu_operator_nodes_upgrades_available", &[]), 0.0);
        assert_eq!(get("gpu_operator_nodes_upgrades_pending", &[]), 3.0);
        let state = |s| get("gpu_operator_driver_upgrade_nodes", &[("state", s)]);
        assert_eq!(state("upgrade-required"), 3.0);
        assert_eq!(state("drain-required"), 0.0);
        assert_eq!(get("gpu_operator_driver_pods_older_template", &[]), 4.0);
        let restarts = |d| get("gpu_operator_driver_restarts_total", &[("decision", d)]);
        assert_eq!((restarts("in-place"), restarts("upgrade")), (2.0, 1.0));
    }

    #[test]
    fn the_last_success_time_is_set_only_by_a_ready_status() {
        let metrics = Metrics::new();
        metrics.set_policy_status(ReconciliationStatus::NotReady, 1, true);
        let value = |m: &Metrics| {
            let all = exposition::samples(&m.encode().unwrap()).unwrap();
            exposition::value(
                &all,
                "gpu_operator_reconciliation_last_success_ts_seconds",
                &[],
            )
            .unwrap()
        };
        assert_eq!(value(&metrics), 0.0);
        let before = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        metrics.set_policy_status(ReconciliationStatus::Ready, 1, true);
        assert!(value(&metrics) >= before.floor(), "{}", value(&metrics));
    }
}
