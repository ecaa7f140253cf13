//! `cargo xtask ci`: exactly what CI runs — fmt check, clippy with `-D warnings`, unit tests, e2e.

use std::{process::Command, time::Instant};

use crate::{e2e, process};

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
    for (name, args) in steps {
        let step = Instant::now();
        eprintln!("==> ci: {name} (cargo {})", args.join(" "));
        process::run(Command::new(cargo).args(args))?;
        eprintln!("    {name} passed in {}", process::minutes(step.elapsed()));
    }
    eprintln!("==> ci: e2e tests");
    e2e::run(&e2e::Args::default())?;
    eprintln!(
        "==> ci: all checks passed in {}",
        process::minutes(started.elapsed())
    );
    Ok(())
}
