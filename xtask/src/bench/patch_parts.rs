//! Where a patch's latency goes, read from the API server's audit log: the server answering the
//! `kubectl patch`, the operator's reaction until its first request and until its DaemonSet
//! apply, the server answering that apply, and the watch that shows the change. Only the
//! operator's reaction is the operator's own; the rest is the API server and the machine.

use gpu_operator_harness::operator::Write;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde::Serialize;

/// The admin user the bench patches the ClusterPolicy as (the harness's client certificate).
pub const ADMIN: &str = "gpu-operator-e2e-admin";

/// One patch of the series, split into its parts, each in milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PatchParts {
    /// The API server, from receiving the ClusterPolicy patch until its response.
    pub patch_served: f64,
    /// From that response until the operator's first request reached the server.
    pub first_request: f64,
    /// From that response until the operator's DaemonSet apply reached the server (a
    /// `devicePlugin.config` change first copies the ConfigMap).
    pub apply_sent: f64,
    /// The API server, from receiving the DaemonSet apply until its response.
    pub apply_served: f64,
    /// From that response until the bench's watch showed the new DaemonSet generation.
    pub watch: f64,
}

/// One timed patch: when the bench sent it and how long until the DaemonSet changed.
#[derive(Clone, Copy, Debug)]
pub struct Timed {
    /// When the request left the bench.
    pub sent: Timestamp,
    /// Until the bench's watch showed the DaemonSet's new generation, seconds.
    pub latency_s: f64,
}

/// Splits each timed patch of ClusterPolicy `policy` into its parts, from the admin's and the
/// operator's requests in the audit log (each with the time it completed); `None` for a patch
/// whose requests the log lacks.
pub fn split(
    timed: &[Timed],
    admin: &[(Timestamp, Write)],
    operator: &[(Timestamp, Write)],
    policy: &str,
    daemonset: &str,
) -> Vec<Option<PatchParts>> {
    timed
        .iter()
        .map(|patch| one(patch, admin, operator, policy, daemonset))
        .collect()
}

fn one(
    patch: &Timed,
    admin: &[(Timestamp, Write)],
    operator: &[(Timestamp, Write)],
    policy: &str,
    daemonset: &str,
) -> Option<PatchParts> {
    let (accepted, request) = admin.iter().find(|(done, w)| {
        *done >= patch.sent
            && w.verb == "patch"
            && w.resource == "clusterpolicies"
            && w.name == policy
    })?;
    let after = |w: &Write| w.received.is_some_and(|r| r >= *accepted);
    let (_, first) = operator
        .iter()
        .find(|(_, w)| w.resource != "leases" && after(w))?;
    let (applied, apply) = operator
        .iter()
        .find(|(_, w)| w.resource == "daemonsets" && w.name == daemonset && after(w))?;
    let landed = patch
        .sent
        .checked_add(SignedDuration::try_from_secs_f64(patch.latency_s).ok()?)
        .ok()?;
    let ms = |from: Timestamp, to: Timestamp| from.duration_until(to).as_secs_f64() * 1e3;
    Some(PatchParts {
        patch_served: ms(request.received?, *accepted),
        first_request: ms(*accepted, first.received?),
        apply_sent: ms(*accepted, apply.received?),
        apply_served: ms(apply.received?, *applied),
        watch: ms(*applied, landed),
    })
}

/// The report's line: each part's p50 / p95 over the patches it could split.
pub fn line(parts: &[Option<PatchParts>]) -> Option<String> {
    let parts: Vec<&PatchParts> = parts.iter().flatten().collect();
    if parts.is_empty() {
        return None;
    }
    let stat = |get: fn(&PatchParts) -> f64| {
        let values: Vec<f64> = parts.iter().map(|p| get(p)).collect();
        let pct = |p| super::patches::percentile(&values, p).unwrap_or_default();
        format!("{:.0} / {:.0}", pct(50.0), pct(95.0))
    };
    Some(format!(
        "patch → DaemonSet by part, p50 / p95 ms over {} patches: the server answers the patch {}; \
         the operator's first request {}; its DaemonSet apply sent {}; the server answers the apply {}; \
         the watch shows it {}",
        parts.len(),
        stat(|p| p.patch_served),
        stat(|p| p.first_request),
        stat(|p| p.apply_sent),
        stat(|p| p.apply_served),
        stat(|p| p.watch),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn request(resource: &str, name: &str, received: &str, done: &str) -> (Timestamp, Write) {
        (
            at(done),
            Write {
                verb: "patch".into(),
                resource: resource.into(),
                name: name.into(),
                code: 200,
                field_manager: None,
                received: Some(at(received)),
            },
        )
    }

    #[test]
    fn a_patch_splits_into_the_servers_the_operators_and_the_watchs_parts() {
        let timed = [Timed {
            sent: at("2026-11-25T10:00:00.000Z"),
            latency_s: 0.5,
        }];
        let admin = [
            request(
                "clusterpolicies",
                "cluster-policy",
                "2026-11-25T09:59:59.000Z",
                "2026-11-25T09:59:59.100Z",
            ),
            request(
                "clusterpolicies",
                "cluster-policy",
                "2026-11-25T10:00:00.010Z",
                "2026-11-25T10:00:00.060Z",
            ),
        ];
        let operator = [
            request(
                "leases",
                "lock",
                "2026-11-25T10:00:00.070Z",
                "2026-11-25T10:00:00.071Z",
            ),
            request(
                "daemonsets",
                "other",
                "2026-11-25T10:00:00.050Z",
                "2026-11-25T10:00:00.055Z",
            ),
            request(
                "configmaps",
                "copy",
                "2026-11-25T10:00:00.080Z",
                "2026-11-25T10:00:00.100Z",
            ),
            request(
                "daemonsets",
                "plugin",
                "2026-11-25T10:00:00.160Z",
                "2026-11-25T10:00:00.400Z",
            ),
        ];
        let parts = split(&timed, &admin, &operator, "cluster-policy", "plugin");
        let p = parts[0].as_ref().unwrap();
        let close = |a: f64, b: f64| (a - b).abs() < 0.01;
        assert!(close(p.patch_served, 50.0), "{p:?}");
        assert!(close(p.first_request, 20.0), "{p:?}");
        assert!(close(p.apply_sent, 100.0), "{p:?}");
        assert!(close(p.apply_served, 240.0), "{p:?}");
        assert!(close(p.watch, 100.0), "{p:?}");
        let line = line(&parts).unwrap();
        assert!(
            line.contains("the operator's first request 20 / 20"),
            "{line}"
        );
    }

    #[test]
    fn a_patch_without_the_operators_apply_in_the_log_is_not_split() {
        let timed = [Timed {
            sent: at("2026-11-25T10:00:00Z"),
            latency_s: 0.2,
        }];
        let admin = [request(
            "clusterpolicies",
            "p",
            "2026-11-25T10:00:00.01Z",
            "2026-11-25T10:00:00.02Z",
        )];
        let operator = [request(
            "configmaps",
            "copy",
            "2026-11-25T10:00:00.03Z",
            "2026-11-25T10:00:00.04Z",
        )];
        assert_eq!(split(&timed, &admin, &operator, "p", "plugin"), [None]);
        assert_eq!(line(&[None]), None);
    }
}
