//! Memory and CPU of a running process, read from `/proc/<pid>/status` and `/proc/<pid>/stat`.

use std::{fs, process::Command};

/// Clock ticks per second of `/proc/<pid>/stat` times (`getconf CLK_TCK`, 100 on Linux).
pub fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8_lossy(&out.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// The machine's load average over 1, 5 and 15 minutes, such as `1.02 0.87 0.60`.
pub fn load_average() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// A `/proc/<pid>/status` field in kB (such as `VmHWM`, `VmRSS`), as MiB.
pub fn status_mib(pid: u32, field: &str) -> Option<f64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_status_kib(&status, field).map(|kib| kib / 1024.0)
}

fn parse_status_kib(status: &str, field: &str) -> Option<f64> {
    status.lines().find_map(|line| {
        let value = line.strip_prefix(field)?.strip_prefix(':')?;
        value.trim().trim_end_matches("kB").trim().parse().ok()
    })
}

/// User plus system CPU seconds the process has used so far.
pub fn cpu_seconds(pid: u32, ticks: f64) -> Option<f64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_cpu_ticks(&stat).map(|t| t / ticks)
}

fn parse_cpu_ticks(stat: &str) -> Option<f64> {
    // After the parenthesised command name: state is field 3, utime 14 and stime 15.
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_memory_fields_in_kib() {
        let status = "Name:\tgpu-operator\nVmHWM:\t   65536 kB\nVmRSS:\t   32768 kB\n";
        assert_eq!(parse_status_kib(status, "VmHWM"), Some(65536.0));
        assert_eq!(parse_status_kib(status, "VmRSS"), Some(32768.0));
        assert_eq!(parse_status_kib(status, "VmSwap"), None);
    }

    #[test]
    fn reads_user_and_system_ticks_past_an_odd_command_name() {
        let stat = "42 (gpu op) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 1 2 3";
        assert_eq!(parse_cpu_ticks(stat), Some(300.0));
    }

    #[test]
    fn this_process_has_memory_and_cpu() {
        let pid = std::process::id();
        assert!(status_mib(pid, "VmHWM").is_some_and(|m| m > 0.0));
        assert!(cpu_seconds(pid, clock_ticks()).is_some());
    }
}
