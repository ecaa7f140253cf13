//! `cargo xtask ci`: exactly what CI runs — the harness binaries (helm among them), promtool and
//! mdbook built if missing, fmt check, clippy with `-D warnings`, `helm lint` of the chart, the
//! book (its links checked, `mdbook build`), unit tests
//! (with the `#[ignore]`d ones that need helm; the alert-rule and dashboard tests run promtool),
//! e2e with the real node (`--real-node`, so as root), the short chaos profile — and at the end
//! how many tests each tier ran.

use std::{process::Command, time::Instant};

use crate::{
    chaos, chart,
    cluster::{self, Layout},
    codegen, docs, e2e, process, test_counts,
};

/// Runs every check in order and stops at the first failure.
pub fn run() -> anyhow::Result<()> {
    let cargo = env!("CARGO");
    let steps: [(&str, &[&str]); 2] = [
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
    ];
    let started = Instant::now();
    // The chart tests and the static-manifest drift check render with the harness's helm.
    let layout = Layout::from_env()?;
    cluster::ensure_built(&layout)?;
    // On its own and after the control plane: a failed promtool build leaves the rest usable.
    cluster::ensure_promtool(&layout)?;
    let mdbook = docs::ensure_mdbook(&layout)?;
    for (name, args) in steps {
        let step = Instant::now();
        eprintln!("==> ci: {name} (cargo {})", args.join(" "));
        process::run(Command::new(cargo).args(args))?;
        eprintln!("    {name} passed in {}", process::minutes(step.elapsed()));
        if name == "clippy" {
            eprintln!("==> ci: helm lint --strict {}", chart::CHART_DIR);
            chart::lint(&codegen::workspace_root().join(chart::CHART_DIR))?;
            eprintln!("==> ci: the book (link check, mdbook build)");
            docs::build(&codegen::workspace_root(), &mdbook)?;
        }
    }
    // The tests that need helm are `#[ignore]`d for a plain `cargo test`; here helm is built.
    let unit_args = ["test", "--workspace", "--", "--include-ignored"];
    eprintln!("==> ci: unit tests (cargo {})", unit_args.join(" "));
    let step = Instant::now();
    let unit = test_counts::run(Command::new(cargo).args(unit_args))?;
    eprintln!(
        "    unit tests passed in {}: {unit}",
        process::minutes(step.elapsed())
    );
    eprintln!("==> ci: e2e tests, the real node's among them");
    // The real node (root: containerd and a kubelet) builds the release image first; measured
    // from a cold target it adds about 10 minutes uncontended (18.5 on a loaded machine).
    let e2e = e2e::run(&e2e::Args {
        real_node: true,
        ..e2e::Args::default()
    })?;
    // On a cluster of its own (the e2e tier stopped its own): 5 SIGKILLs and 1 leader failover.
    eprintln!("==> ci: chaos, short profile (cargo xtask chaos)");
    let step = Instant::now();
    chaos::run(&chaos::Args::default())?;
    eprintln!("    chaos passed in {}", process::minutes(step.elapsed()));
    eprintln!(
        "==> ci: all checks passed in {}\n    tests per tier: unit {unit}; e2e {e2e}; chaos: short profile passed",
        process::minutes(started.elapsed())
    );
    Ok(())
}
