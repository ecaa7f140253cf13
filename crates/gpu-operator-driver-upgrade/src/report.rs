//! The text of `gpu-operator upgrade status`: one line per GPU node by state (in the order nodes
//! go through them), with its cordon, how long it has been in its state and, for a failed node,
//! why; then the `DriverUpgrade` condition, which names the stuck nodes and the reason.

use std::{fmt::Write as _, time::Duration};

use k8s_openapi::jiff::Timestamp;

use crate::{facts::NodeFacts, state::UpgradeState};

/// The table for `nodes` at `now`, followed by `condition` (the `DriverUpgrade` condition's
/// status, reason and message) when there is one.
pub fn table(nodes: &[NodeFacts], condition: Option<(&str, &str, &str)>, now: Timestamp) -> String {
    let mut rows: Vec<&NodeFacts> = nodes.iter().collect();
    // Nodes in the order of their states, nodes with no state last; then by name.
    rows.sort_by_key(|n| (n.state.map_or(usize::MAX, |s| s as usize), n.name.clone()));
    let width = rows.iter().map(|n| n.name.len()).max().unwrap_or(0).max(4);
    let mut out = format!(
        "{:<width$}  {:<22}  {:<9}  {:>8}  REASON\n",
        "NODE", "STATE", "CORDONED", "FOR"
    );
    for node in rows {
        let state = node.state.map_or(
            if node.skip { "(skipped)" } else { "-" },
            UpgradeState::as_str,
        );
        let cordon = match (node.unschedulable, node.initially_unschedulable) {
            (true, true) => "by user",
            (true, false) => "yes",
            (false, _) => "no",
        };
        let since = node.since.map_or_else(
            || "-".to_owned(),
            |s| short(Duration::try_from(now.duration_since(s)).unwrap_or_default()),
        );
        let reason = node.failure.as_deref().unwrap_or_default();
        let _ = writeln!(
            out,
            "{:<width$}  {state:<22}  {cordon:<9}  {since:>8}  {reason}",
            node.name
        );
    }
    if let Some((status, reason, message)) = condition {
        let _ = write!(out, "\nDriverUpgrade={status} ({reason}): {message}\n");
    }
    out
}

/// `2h5m`, `7m12s`, `40s`.
fn short(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, sec) => format!("{sec}s"),
        (0, min, sec) => format!("{min}m{sec}s"),
        (h, min, _) => format!("{h}h{min}m"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_are_listed_by_state_with_cordon_age_and_failure() {
        let now = Timestamp::from_second(1_700_000_000).unwrap();
        let at = |ago: i64| Some(Timestamp::from_second(1_700_000_000 - ago).unwrap());
        let nodes = [
            NodeFacts {
                name: "gpu-b".into(),
                state: Some(UpgradeState::Done),
                since: at(7200 + 300),
                ..NodeFacts::default()
            },
            NodeFacts {
                name: "gpu-a".into(),
                state: Some(UpgradeState::Failed),
                unschedulable: true,
                since: at(65),
                failure: Some("validator pod v not Ready after 600s".into()),
                ..NodeFacts::default()
            },
            NodeFacts {
                name: "gpu-c".into(),
                state: Some(UpgradeState::PodDeletionRequired),
                unschedulable: true,
                initially_unschedulable: true,
                since: at(40),
                ..NodeFacts::default()
            },
            NodeFacts {
                name: "gpu-d".into(),
                skip: true,
                ..NodeFacts::default()
            },
        ];
        let text = table(
            &nodes,
            Some((
                "False",
                "UpgradeFailed",
                "3/4 GPU nodes on the current driver",
            )),
            now,
        );
        let lines: Vec<&str> = text.lines().collect();
        let words = |i: usize| lines[i].split_whitespace().collect::<Vec<_>>().join(" ");
        assert_eq!(words(0), "NODE STATE CORDONED FOR REASON");
        assert_eq!(words(1), "gpu-c pod-deletion-required by user 40s");
        assert_eq!(words(2), "gpu-b upgrade-done no 2h5m");
        assert_eq!(
            words(3),
            "gpu-a upgrade-failed yes 1m5s validator pod v not Ready after 600s"
        );
        assert_eq!(words(4), "gpu-d (skipped) no -");
        assert_eq!(
            lines[6],
            "DriverUpgrade=False (UpgradeFailed): 3/4 GPU nodes on the current driver"
        );
        // Columns line up: every row's state starts where the header's does.
        let column = lines[0].find("STATE").unwrap();
        assert!(
            lines[1..5]
                .iter()
                .all(|l| l[column - 2..column] == *"  " && &l[column..=column] != " "),
            "{text}"
        );
    }
}
