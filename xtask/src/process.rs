//! Running other programs: checked foreground commands, long builds with progress, and detached daemons.

use std::{
    fs::{self, File},
    io::{BufRead as _, BufReader, Read as _, Seek as _, SeekFrom},
    os::unix::process::CommandExt as _,
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};

/// Runs `command` in the foreground, inheriting the terminal; fails if it exits non-zero.
pub fn run(command: &mut Command) -> anyhow::Result<()> {
    let status = command
        .status()
        .with_context(|| format!("starting {}", describe(command)))?;
    if !status.success() {
        bail!("`{}` failed ({status})", describe(command));
    }
    Ok(())
}

/// Runs `command` and returns its stdout; on failure the error carries stderr.
pub fn output(command: &mut Command) -> anyhow::Result<String> {
    let out = command
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("starting {}", describe(command)))?;
    if !out.status.success() {
        bail!(
            "`{}` failed ({}): {}",
            describe(command),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs a long `command` with its output going to `log`, printing a progress line every 30 s
/// (elapsed time and how many lines the log has, e.g. packages compiled by `go build -v`).
/// On failure the last lines of the log are shown.
pub fn run_logged(what: &str, command: &mut Command, log: &Path) -> anyhow::Result<()> {
    if let Some(dir) = log.parent() {
        fs::create_dir_all(dir)?;
    }
    let file = File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file)
        .spawn()
        .with_context(|| format!("starting {}", describe(command)))?;
    let started = Instant::now();
    let mut next_report = Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        let elapsed = started.elapsed();
        if elapsed >= next_report {
            let lines = count_lines(log);
            eprintln!(
                "    … {what}: {} elapsed, {lines} log lines ({})",
                minutes(elapsed),
                log.display()
            );
            next_report += Duration::from_secs(30);
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    if !status.success() {
        bail!(
            "{what} failed ({status}); last lines of {}:\n{}",
            log.display(),
            tail(log, 30)
        );
    }
    Ok(())
}

/// Starts `command` as a daemon in its own process group, detached from the terminal, with
/// stdout and stderr appended to `log`, and records its pid in `pid_file`.
pub fn spawn_daemon(command: &mut Command, log: &Path, pid_file: &Path) -> anyhow::Result<u32> {
    for path in [log, pid_file] {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir)?;
        }
    }
    let file = File::options().create(true).append(true).open(log)?;
    let child = command
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file)
        .process_group(0)
        .spawn()
        .with_context(|| format!("starting {}", describe(command)))?;
    let pid = child.id();
    fs::write(pid_file, pid.to_string())?;
    Ok(pid)
}

/// Whether a process with this pid exists (and is not a zombie).
pub fn alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state is the field after the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Sends SIGTERM to the process group `pid`, waits up to `grace`, then SIGKILL. Idempotent.
pub fn stop_group(pid: u32, grace: Duration) -> anyhow::Result<()> {
    if !alive(pid) {
        return Ok(());
    }
    signal_group(pid, "TERM")?;
    let deadline = Instant::now() + grace;
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    if alive(pid) {
        signal_group(pid, "KILL")?;
    }
    Ok(())
}

fn signal_group(pid: u32, signal: &str) -> anyhow::Result<()> {
    // `kill` from util-linux/procps: a negative pid names the process group.
    Command::new("kill")
        .args([format!("-{signal}"), "--".to_owned(), format!("-{pid}")])
        .stderr(Stdio::null())
        .status()
        .context("running kill")?;
    Ok(())
}

/// The last `n` lines of a text file (empty if unreadable).
pub fn tail(path: &Path, n: usize) -> String {
    let Ok(mut file) = File::open(path) else {
        return String::new();
    };
    let len = file.metadata().map_or(0, |m| m.len());
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(64 * 1024)));
    let mut text = String::new();
    let _ = file.read_to_string(&mut text);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn count_lines(path: &Path) -> usize {
    File::open(path).map_or(0, |f| BufReader::new(f).lines().count())
}

/// `3m05s`-style duration.
pub fn minutes(d: Duration) -> String {
    let secs = d.as_secs();
    if secs >= 60 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

fn describe(command: &Command) -> String {
    let mut text = command.get_program().to_string_lossy().into_owned();
    for arg in command.get_args() {
        text.push(' ');
        text.push_str(&arg.to_string_lossy());
    }
    text
}
