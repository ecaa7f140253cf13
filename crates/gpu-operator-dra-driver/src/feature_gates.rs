//! The DRA driver's feature gates (`draDriver.featureGates`) checked as the driver checks them at
//! start-up (`pkg/featuregates` of NVIDIA's k8s-dra-driver-gpu): the gates it knows, their
//! defaults and maturity, and the combinations it refuses, so a spec the driver would crash on is
//! refused here, naming the gates, instead of crash-looping on every GPU node. A gate no driver
//! release we know has is refused only when it looks like a misspelt known one; any other unknown
//! name is a warning, as a newer driver may know it. Pure.

use std::collections::BTreeMap;

/// Maturity of a gate, which `AllAlpha`/`AllBeta` switch as a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Alpha,
    Beta,
    /// Component-base's logging gates: never switched by `AllAlpha`/`AllBeta` here.
    Logging,
}

/// Every gate of the driver (v0.5) and of the Kubernetes logging options it registers, with its
/// default.
const KNOWN: [(&str, bool, Stage); 13] = [
    ("TimeSlicingSettings", false, Stage::Alpha),
    ("MPSSupport", false, Stage::Alpha),
    ("IMEXDaemonsWithDNSNames", true, Stage::Beta),
    ("PassthroughSupport", false, Stage::Alpha),
    ("DynamicMIG", false, Stage::Alpha),
    ("NVMLDeviceHealthCheck", false, Stage::Alpha),
    ("ComputeDomainCliques", true, Stage::Beta),
    ("CrashOnNVLinkFabricErrors", true, Stage::Beta),
    ("DeviceMetadata", false, Stage::Alpha),
    ("ContextualLogging", true, Stage::Logging),
    ("LoggingAlphaOptions", false, Stage::Logging),
    ("LoggingBetaOptions", true, Stage::Logging),
    ("LoggingStableOptions", true, Stage::Logging),
];
/// Component-base's switches of every alpha or beta gate not set by name.
const ALL_ALPHA: &str = "AllAlpha";
const ALL_BETA: &str = "AllBeta";

/// Pairs the driver refuses together (both on).
const EXCLUSIVE: [(&str, &str); 4] = [
    ("DynamicMIG", "PassthroughSupport"),
    ("DynamicMIG", "NVMLDeviceHealthCheck"),
    ("DynamicMIG", "MPSSupport"),
    ("PassthroughSupport", "NVMLDeviceHealthCheck"),
];
/// `(gate, needs)`: the driver refuses `gate` on without `needs` on.
const REQUIRES: [(&str, &str); 2] = [
    ("ComputeDomainCliques", "IMEXDaemonsWithDNSNames"),
    ("DeviceMetadata", "PassthroughSupport"),
];

/// What is wrong with a set of gates.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Findings {
    /// What the driver refuses, one sentence each (the spec is refused).
    pub refused: Vec<String>,
    /// Names no driver release we know has (warned about).
    pub unknown: Vec<String>,
}

/// Checks `gates` (`draDriver.featureGates`) as the driver would.
pub fn check(gates: &BTreeMap<String, bool>) -> Findings {
    let mut findings = Findings::default();
    for name in gates.keys() {
        if is_known(name) {
            continue;
        }
        match misspelt(name) {
            Some(known) => findings.refused.push(format!(
                "{name} is not a feature gate of the DRA driver (did you mean {known}?); the \
                 driver refuses unknown gates at start-up"
            )),
            None => findings.unknown.push(name.clone()),
        }
    }
    let on = |gate: &str| enabled(gates, gate);
    for (a, b) in EXCLUSIVE {
        if on(a) && on(b) {
            findings.refused.push(format!(
                "{a} and {b} are mutually exclusive in the DRA driver: switch one off"
            ));
        }
    }
    for (gate, needs) in REQUIRES {
        if on(gate) && !on(needs) {
            let default = if default_of(gate) && !gates.contains_key(gate) {
                " (on by default)"
            } else {
                ""
            };
            findings.refused.push(format!(
                "{gate}{default} requires {needs}: set {needs}: true, or {gate}: false"
            ));
        }
    }
    findings
}

/// Whether `gate` is on: set by name, else by `AllAlpha`/`AllBeta` for its stage, else its
/// default.
fn enabled(gates: &BTreeMap<String, bool>, gate: &str) -> bool {
    if let Some(value) = gates.get(gate) {
        return *value;
    }
    let group = match KNOWN.iter().find(|(name, ..)| *name == gate) {
        Some((_, _, Stage::Alpha)) => gates.get(ALL_ALPHA),
        Some((_, _, Stage::Beta)) => gates.get(ALL_BETA),
        _ => None,
    };
    group.copied().unwrap_or_else(|| default_of(gate))
}

fn default_of(gate: &str) -> bool {
    KNOWN
        .iter()
        .find(|(name, ..)| *name == gate)
        .is_some_and(|(_, default, _)| *default)
}

fn is_known(name: &str) -> bool {
    name == ALL_ALPHA || name == ALL_BETA || KNOWN.iter().any(|(known, ..)| *known == name)
}

/// The known gate `name` is a misspelling of: the same but for case, or at most two edits away.
fn misspelt(name: &str) -> Option<&'static str> {
    KNOWN
        .iter()
        .map(|(known, ..)| *known)
        .chain([ALL_ALPHA, ALL_BETA])
        .find(|known| known.eq_ignore_ascii_case(name) || edit_distance(known, name) <= 2)
}

/// Levenshtein distance of `a` and `b` (ASCII case-insensitive).
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().map(|c| c.to_ascii_lowercase()).collect();
    let b: Vec<char> = b.chars().map(|c| c.to_ascii_lowercase()).collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(ca != cb);
            current.push(substitute.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

/// `FEATURE_GATES` as the driver reads it: `Name=bool` by name, comma-separated.
pub fn env_value(gates: &BTreeMap<String, bool>) -> String {
    gates
        .iter()
        .map(|(name, on)| format!("{name}={on}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gates(pairs: &[(&str, bool)]) -> BTreeMap<String, bool> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    #[test]
    fn nvidias_sample_gates_pass_and_render_sorted() {
        let sample = gates(&[("MPSSupport", true), ("PassthroughSupport", true)]);
        assert_eq!(check(&sample), Findings::default());
        assert_eq!(
            env_value(&sample),
            "MPSSupport=true,PassthroughSupport=true"
        );
    }

    #[test]
    fn the_pairs_the_driver_refuses_are_refused_naming_both_gates() {
        for (a, b) in EXCLUSIVE {
            let findings = check(&gates(&[(a, true), (b, true)]));
            assert_eq!(findings.refused.len(), 1, "{a} {b}: {findings:?}");
            assert!(findings.refused[0].contains(a) && findings.refused[0].contains(b));
        }
        assert!(check(&gates(&[("DynamicMIG", true)])).refused.is_empty());
    }

    #[test]
    fn dependencies_count_the_defaults() {
        // ComputeDomainCliques is on by default and needs IMEXDaemonsWithDNSNames.
        let findings = check(&gates(&[("IMEXDaemonsWithDNSNames", false)]));
        assert_eq!(findings.refused.len(), 1);
        assert!(findings.refused[0].contains("ComputeDomainCliques (on by default)"));
        let both_off = gates(&[
            ("IMEXDaemonsWithDNSNames", false),
            ("ComputeDomainCliques", false),
        ]);
        assert!(check(&both_off).refused.is_empty());
        let metadata = check(&gates(&[("DeviceMetadata", true)]));
        assert!(metadata.refused[0].contains("requires PassthroughSupport"));
    }

    #[test]
    fn all_alpha_switches_the_alpha_gates_together() {
        // Every alpha gate on: DynamicMIG meets PassthroughSupport, MPSSupport and NVML.
        let findings = check(&gates(&[("AllAlpha", true)]));
        assert_eq!(findings.refused.len(), 4, "{findings:?}");
        let named = check(&gates(&[("AllAlpha", true), ("DynamicMIG", false)]));
        assert_eq!(named.refused.len(), 1, "{named:?}");
    }

    #[test]
    fn misspelt_gates_are_refused_and_strangers_only_reported() {
        let findings = check(&gates(&[("MPSsupport", true), ("PasthroughSupport", true)]));
        assert_eq!(findings.refused.len(), 2, "{findings:?}");
        assert!(findings.refused[0].contains("did you mean MPSSupport?"));
        // NVIDIA's own samples set AdminAccess, which no driver release knows.
        let findings = check(&gates(&[("AdminAccess", false)]));
        assert!(findings.refused.is_empty());
        assert_eq!(findings.unknown, ["AdminAccess"]);
    }

    #[test]
    fn edit_distance_counts_edits() {
        assert_eq!(edit_distance("MPSSupport", "MPSSupport"), 0);
        assert_eq!(edit_distance("DynamicMIG", "DynamicMig"), 0);
        assert_eq!(edit_distance("abc", "abd"), 1);
        assert_eq!(edit_distance("abc", ""), 3);
    }
}
