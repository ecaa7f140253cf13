//! Checks of the dashboards and of the metric names every rule and panel reads (promtool checks
//! that the expressions parse, in `xtask`'s `monitoring` tests).

use std::collections::BTreeSet;

use gpu_operator_api::spec::DcgmExporterSpec;

use super::*;
use crate::observability::{alerts, names, promql::metric_names};

fn settings() -> Settings {
    Settings::of(&DcgmExporterSpec::default(), true)
}

fn read(exprs: &[&str]) -> BTreeSet<String> {
    exprs
        .iter()
        .flat_map(|e| metric_names(e).unwrap())
        .collect()
}

#[test]
fn dashboards_read_only_metrics_exposed_by_default() {
    let mut allowed = names::of("dcgm-default");
    for source in ["operator", "node-status"] {
        allowed.extend(names::of(source));
    }
    for dashboard in dashboards(&settings()) {
        let mut exprs = dashboard.expressions();
        exprs.extend(dashboard.node_variable);
        for name in read(&exprs) {
            assert!(
                allowed.contains(&name.as_str()),
                "{}: `{name}` is not in docs/metrics.txt as exposed by default",
                dashboard.uid
            );
        }
    }
}

#[test]
fn alerts_read_only_listed_metrics() {
    let listed = names::all();
    let exprs: Vec<String> = alerts::alerts(&settings())
        .into_iter()
        .map(|a| a.expr)
        .collect();
    let exprs: Vec<&str> = exprs.iter().map(String::as_str).collect();
    let used = read(&exprs);
    for name in &used {
        assert!(
            listed.contains(&name.as_str()),
            "`{name}` is not in docs/metrics.txt"
        );
    }
    // Positive control: the names the alerts are about are really read.
    for expected in [
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "DCGM_FI_DEV_THERMAL_VIOLATION",
        "DCGM_FI_DEV_POWER_VIOLATION",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "gpu_operator_node_cuda_ready",
        "gpu_operator_node_device_plugin_devices_total",
        "gpu_operator_nodes_upgrades_in_progress",
        "gpu_operator_reconcile_duration_seconds_count",
    ] {
        assert!(used.contains(expected), "no alert reads {expected}");
    }
}

#[test]
fn the_fleet_dashboard_covers_utilisation_memory_power_temperature_and_mig() {
    let all = dashboards(&settings());
    let fleet = all.iter().find(|d| d.uid == "gpu-operator-fleet").unwrap();
    let used = read(&fleet.expressions());
    for metric in [
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_GPU_TEMP",
    ] {
        assert!(used.contains(metric), "fleet dashboard lacks {metric}");
    }
    assert!(fleet.expressions().iter().any(|e| e.contains("GPU_I_ID")));
    assert!(
        fleet
            .expressions()
            .iter()
            .any(|e| e.contains("by (exported_namespace, exported_pod)")),
        "per pod"
    );
}

#[test]
fn panels_do_not_overlap_and_ids_are_unique() {
    let mut uids = BTreeSet::new();
    for dashboard in dashboards(&settings()) {
        assert!(uids.insert(dashboard.uid));
        let json = dashboard.to_json();
        let mut cells = BTreeSet::new();
        let mut ids = BTreeSet::new();
        for panel in json["panels"].as_array().unwrap() {
            assert!(ids.insert(panel["id"].as_u64().unwrap()));
            let grid = &panel["gridPos"];
            let at = |key: &str| grid[key].as_u64().unwrap();
            let (left, top, width, height) = (at("x"), at("y"), at("w"), at("h"));
            assert!(left + width <= 24, "{}: {panel}", dashboard.uid);
            for cx in left..left + width {
                for cy in top..top + height {
                    assert!(
                        cells.insert((cx, cy)),
                        "{}: overlap at {panel}",
                        dashboard.uid
                    );
                }
            }
            assert_eq!(panel["datasource"]["uid"], "${datasource}");
        }
    }
}
