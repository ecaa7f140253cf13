//! Running `cargo test` while counting what ran: its output passes through unchanged, and the
//! `test result:` line of every test binary is added up, so CI can say how many tests of each tier
//! ran, failed and were ignored (a tier that ran nothing is visible).

use std::{
    fmt,
    io::{BufRead as _, BufReader, Write as _},
    process::{Command, Stdio},
};

use anyhow::{Context as _, bail};

/// Tests counted over the binaries of one `cargo test` run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Tests that passed.
    pub passed: u64,
    /// Tests that failed.
    pub failed: u64,
    /// Tests that were ignored (`#[ignore]`, not asked for).
    pub ignored: u64,
    /// Test binaries (and doc-test runs) that reported.
    pub binaries: u64,
}

impl Counts {
    fn add(&mut self, other: Self) {
        self.passed += other.passed;
        self.failed += other.failed;
        self.ignored += other.ignored;
        self.binaries += other.binaries;
    }
}

impl fmt::Display for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} passed, {} failed, {} ignored ({} test binaries)",
            self.passed, self.failed, self.ignored, self.binaries
        )
    }
}

/// Runs `command` (a `cargo test`), passing its stdout through, and counts its tests. Fails when it
/// exits non-zero, with the counts in the message.
pub fn run(command: &mut Command) -> anyhow::Result<Counts> {
    let mut child = command
        .stdout(Stdio::piped())
        .spawn()
        .context("starting cargo test")?;
    let stdout = child.stdout.take().context("cargo test has no stdout")?;
    let mut counts = Counts::default();
    let mut out = std::io::stdout();
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        writeln!(out, "{line}")?;
        if let Some(result) = parse(&line) {
            counts.add(result);
        }
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("cargo test failed ({status}): {counts}");
    }
    Ok(counts)
}

/// The counts of one libtest summary line, such as
/// `test result: ok. 12 passed; 0 failed; 1 ignored; 0 measured; 3 filtered out; finished in 0.01s`.
fn parse(line: &str) -> Option<Counts> {
    let rest = line.trim().strip_prefix("test result: ")?;
    let (_, numbers) = rest.split_once(". ")?;
    let mut counts = Counts {
        binaries: 1,
        ..Counts::default()
    };
    for part in numbers.split("; ") {
        let Some((number, what)) = part.split_once(' ') else {
            continue;
        };
        let Ok(number) = number.parse::<u64>() else {
            continue;
        };
        match what {
            "passed" => counts.passed = number,
            "failed" => counts.failed = number,
            "ignored" => counts.ignored = number,
            _ => {}
        }
    }
    Some(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_summary_lines_of_libtest() {
        let ok = "test result: ok. 12 passed; 0 failed; 3 ignored; 0 measured; 5 filtered out; finished in 0.41s";
        assert_eq!(
            parse(ok),
            Some(Counts {
                passed: 12,
                failed: 0,
                ignored: 3,
                binaries: 1
            })
        );
        let failed = "test result: FAILED. 7 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out; finished in 61.02s";
        assert_eq!(parse(failed).map(|c| (c.passed, c.failed)), Some((7, 2)));
        assert_eq!(parse("test a::b ... ok"), None);
        assert_eq!(parse("running 12 tests"), None);
    }
}
