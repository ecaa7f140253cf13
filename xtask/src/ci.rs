//! `cargo xtask ci`: exactly what CI runs — the harness binaries (helm among them) and promtool
//! built if missing, fmt check, clippy with `-D warnings`, `helm lint` of the chart, unit tests
//! (the alert-rule and dashboard tests among them run promtool), e2e.

use std::{process::Command, time::Instant};

use crate::{
    chart,
    cluster::{self, Layout},
    codegen, e2e, process,
};

/// Runs every check in order and stops at the first failure.
pub fn run() -> anyhow::Result<()> {
    let cargo = env!("CARGO");
    let steps: [(&str, &[&str]); 3] = [
        ("fmt", &["fmt", "--all", "--", "--check"]),
        (
            "clippy",
            &[
                "clippy",
                "--workspace",
                "--all-targets",
                "--all-features",
                "--",
                "-D",
                "warnings",
            ],
        ),
        ("unit tests", &["test", "--workspace"]),
    ];
    let started = Instant::now();
    // The chart tests and the static-manifest drift check render with the harness's helm.
    let layout = Layout::from_env()?;
    cluster::ensure_built(&layout)?;
    // On its own and after the control plane: a failed promtool build leaves the rest usable.
    cluster::ensure_promtool(&layout)?;
    for (name, args) in steps {
        let step = Instant::now();
        eprintln!("==> ci: {name} (cargo {})", args.join(" "));
        process::run(Command::new(cargo).args(args))?;
        eprintln!("    {name} passed in {}", process::minutes(step.elapsed()));
        if name == "clippy" {
            eprintln!("==> ci: helm lint --strict {}", chart::CHART_DIR);
            chart::lint(&codegen::workspace_root().join(chart::CHART_DIR))?;
        }
    }
    eprintln!("==> ci: e2e tests");
    e2e::run(&e2e::Args::default())?;
    eprintln!(
        "==> ci: all checks passed in {}",
        process::minutes(started.elapsed())
    );
    Ok(())
}
