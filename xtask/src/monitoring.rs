//! The shipped alert rules and dashboards under promtool (built by `cargo xtask promtool` into
//! the harness cache; these tests fail with that command when it is missing): the rules pass
//! `promtool check rules` and the hand-written unit tests in
//! `crates/gpu-operator-dcgm-exporter/tests/promtool/` (`promtool test rules`: each alert fires
//! when it should and stays silent when it should not), with default and with custom values;
//! every dashboard expression parses; an invalid threshold is refused by the chart's schema.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
};

use gpu_operator_api::spec::{
    AlertThresholds, DcgmExporterSpec, PrometheusRuleConfig, ServiceMonitorConfig,
};
use gpu_operator_dcgm_exporter::observability::{Settings, alerts, dashboards};
use serde_yaml::Value;

use crate::{
    chart::{CHART_DIR, helm_binary},
    cluster::{Layout, PROMTOOL_BUILD_COMMAND},
    codegen::workspace_root,
};

fn promtool() -> PathBuf {
    let path = Layout::from_env().unwrap().promtool_bin().join("promtool");
    assert!(
        path.is_file(),
        "promtool is not built ({}): run `{PROMTOOL_BUILD_COMMAND}` (it builds promtool from its Go module into the harness cache)",
        path.display()
    );
    path
}

fn tests_dir() -> PathBuf {
    workspace_root().join("crates/gpu-operator-dcgm-exporter/tests/promtool")
}

/// The values of `custom.yaml`: written out here by hand, as that file's header says.
fn custom_settings() -> Settings {
    let exporter = DcgmExporterSpec {
        service_monitor: Some(ServiceMonitorConfig {
            honor_labels: Some(true),
            ..ServiceMonitorConfig::default()
        }),
        prometheus_rule: Some(PrometheusRuleConfig {
            enabled: Some(true),
            runbook_url: Some("https://wiki.example.com/gpu".into()),
            disabled_alerts: Some(vec!["GPUUnallocated".into()]),
            thresholds: Some(AlertThresholds {
                temperature_celsius: Some(90),
                temperature_for: Some("5m".into()),
                idle_utilization_percent: Some(20),
                critical_xids: Some(vec![31]),
                ..AlertThresholds::default()
            }),
            ..PrometheusRuleConfig::default()
        }),
        ..DcgmExporterSpec::default()
    };
    Settings::of(&exporter, false)
}

/// A temporary directory with `rules.yaml` for `settings` and the unit-test file `test`.
fn workdir(name: &str, settings: &Settings, test: Option<&str>) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "gpu-operator-promtool-{name}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let rules = serde_yaml::to_string(&alerts::rule_spec(settings)).unwrap();
    std::fs::write(dir.join("rules.yaml"), rules).unwrap();
    if let Some(test) = test {
        std::fs::copy(tests_dir().join(test), dir.join(test)).unwrap();
    }
    dir
}

/// Runs promtool in `dir`; returns whether it succeeded and what it printed.
fn run(dir: &Path, args: &[&str]) -> (bool, String) {
    let output = Command::new(promtool())
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

#[test]
#[ignore = "runs promtool: `cargo xtask promtool` builds it, `cargo xtask ci` runs this"]
fn rules_with_default_values_pass_promtool_check_and_their_unit_tests() {
    let settings = Settings::of(&DcgmExporterSpec::default(), true);
    let dir = workdir("defaults", &settings, Some("defaults.yaml"));
    let (ok, out) = run(&dir, &["check", "rules", "rules.yaml"]);
    assert!(ok && out.contains("20 rules found"), "{out}");
    let (ok, out) = run(&dir, &["test", "rules", "defaults.yaml"]);
    assert!(ok, "promtool test rules defaults.yaml:\n{out}");
}

#[test]
#[ignore = "runs promtool: `cargo xtask promtool` builds it, `cargo xtask ci` runs this"]
fn rules_with_custom_values_pass_their_unit_tests() {
    let dir = workdir("custom", &custom_settings(), Some("custom.yaml"));
    let (ok, out) = run(&dir, &["check", "rules", "rules.yaml"]);
    assert!(ok && out.contains("19 rules found"), "{out}");
    let (ok, out) = run(&dir, &["test", "rules", "custom.yaml"]);
    assert!(ok, "promtool test rules custom.yaml:\n{out}");
    // Positive control: the same tests fail against the default rules (85 °C, XID 31 not
    // critical, pod labels renamed), so they do test the values.
    let dir = workdir(
        "custom-vs-defaults",
        &Settings::of(&DcgmExporterSpec::default(), true),
        Some("custom.yaml"),
    );
    let (ok, out) = run(&dir, &["test", "rules", "custom.yaml"]);
    assert!(!ok && out.contains("GPUTemperatureHigh"), "{out}");
}

#[test]
#[ignore = "runs promtool: `cargo xtask promtool` builds it, `cargo xtask ci` runs this"]
fn every_alert_has_a_firing_and_a_silent_unit_test() {
    let text = std::fs::read_to_string(tests_dir().join("defaults.yaml")).unwrap();
    let tests: Value = serde_yaml::from_str(&text).unwrap();
    let mut cases: BTreeMap<String, (bool, bool)> = BTreeMap::new();
    for test in tests["tests"].as_sequence().unwrap() {
        for case in test["alert_rule_test"].as_sequence().unwrap() {
            let name = case["alertname"].as_str().unwrap().to_owned();
            let fires = !case["exp_alerts"].as_sequence().unwrap().is_empty();
            let entry = cases.entry(name).or_default();
            if fires {
                entry.0 = true;
            } else {
                entry.1 = true;
            }
        }
    }
    let settings = Settings::of(&DcgmExporterSpec::default(), true);
    for alert in alerts::alerts(&settings) {
        assert_eq!(
            cases.get(alert.name),
            Some(&(true, true)),
            "{}: defaults.yaml needs a case where it fires and one where it stays silent",
            alert.name
        );
    }
}

#[test]
#[ignore = "runs promtool: `cargo xtask promtool` builds it, `cargo xtask ci` runs this"]
fn every_dashboard_expression_parses_and_a_broken_one_does_not() {
    let settings = Settings::of(&DcgmExporterSpec::default(), true);
    let mut rules = Vec::new();
    for dashboard in dashboards::dashboards(&settings) {
        for (i, expr) in dashboard.expressions().into_iter().enumerate() {
            // Grafana's variables, as Grafana would substitute them.
            let expr = expr
                .replace("$__rate_interval", "5m")
                .replace("$__range", "1d")
                .replace("$node", ".*");
            rules.push(serde_json::json!({
                "record": format!("dashboard:{}:{i}", dashboard.uid.replace('-', "_")),
                "expr": expr,
            }));
        }
    }
    let count = rules.len();
    let check = |name: &str, rules: &[serde_json::Value]| {
        let dir = workdir(name, &settings, None);
        let file = serde_json::json!({"groups": [{"name": "dashboards", "rules": rules}]});
        std::fs::write(
            dir.join("dashboards.yaml"),
            serde_yaml::to_string(&file).unwrap(),
        )
        .unwrap();
        run(&dir, &["check", "rules", "dashboards.yaml"])
    };
    let (ok, out) = check("dashboards", &rules);
    assert!(ok && out.contains(&format!("{count} rules found")), "{out}");
    rules.push(serde_json::json!({"record": "dashboard:broken", "expr": "sum(rate(x[5m])"}));
    let (ok, out) = check("dashboards-broken", &rules);
    assert!(!ok, "a broken expression must fail: {out}");
}

#[test]
#[ignore = "runs helm: `cargo xtask cluster up` builds it, `cargo xtask ci` runs this"]
fn an_invalid_threshold_is_refused_by_the_chart_with_the_key_named() {
    let helm = helm_binary().unwrap_or_else(|| {
        panic!("helm is not built: run `cargo xtask cluster up --build-only` (it builds helm with the control plane)")
    });
    let chart = workspace_root().join(CHART_DIR);
    let render = |set: &str| {
        Command::new(&helm)
            .args(["template", "gpu-operator"])
            .arg(&chart)
            .args(["--set", set])
            .output()
            .unwrap()
    };
    for (set, key) in [
        (
            "dcgmExporter.prometheusRule.thresholds.temperatureCelsius=500",
            "temperatureCelsius",
        ),
        (
            "dcgmExporter.prometheusRule.thresholds.idleFor=soon",
            "idleFor",
        ),
        (
            "dcgmExporter.prometheusRule.thresholds.idleUtilizationPercent=101",
            "idleUtilizationPercent",
        ),
        ("dcgmExporter.grafanaDashboards.lables.x=1", "lables"),
    ] {
        let output = render(set);
        let error = String::from_utf8_lossy(&output.stderr);
        assert!(
            !output.status.success() && error.contains(key),
            "{set}: {error}"
        );
    }
    let output = render("dcgmExporter.prometheusRule.thresholds.temperatureCelsius=90");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("temperatureCelsius: 90"),
        "the value reaches the ClusterPolicy"
    );
}
