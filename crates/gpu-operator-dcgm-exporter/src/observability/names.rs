//! The list of metric names the rules and dashboards may read, `docs/metrics.txt`, parsed.

/// The list's text, compiled in.
pub const LIST: &str = include_str!("../../../../docs/metrics.txt");

/// The names of `source` (such as `dcgm-default` or `operator`) in the list.
pub fn of(source: &str) -> Vec<&'static str> {
    LIST.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(' '))
        .filter(|(s, _)| *s == source)
        .map(|(_, name)| name.trim())
        .collect()
}

/// Every name in the list.
pub fn all() -> Vec<&'static str> {
    LIST.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(' '))
        .map(|(_, name)| name.trim())
        .collect()
}
