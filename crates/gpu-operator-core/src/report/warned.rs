//! Which warnings this process has already published as Events, per ClusterPolicy condition, so
//! a finding is published once even when reconciles race on a cached ClusterPolicy that does not
//! show the condition written a moment ago. A warning that goes away is forgotten, so it is
//! published again if it comes back.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Mutex, PoisonError},
};

/// Published warning messages by condition type.
#[derive(Debug, Default)]
pub struct Warned(Mutex<BTreeMap<String, BTreeSet<String>>>);

impl Warned {
    /// Records that `condition` now warns exactly `messages`, and returns those not published
    /// before, in their order.
    pub fn first_seen<'a>(&self, condition: &str, messages: &[&'a str]) -> Vec<&'a str> {
        let mut all = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let known = all.entry(condition.to_owned()).or_default();
        let fresh: Vec<&str> = messages
            .iter()
            .copied()
            .filter(|m| !known.contains(*m))
            .collect();
        *known = messages.iter().map(|m| (*m).to_owned()).collect();
        fresh
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_is_new_once_until_it_goes_away() {
        let warned = Warned::default();
        assert_eq!(warned.first_seen("A", &["x", "y"]), ["x", "y"]);
        assert!(warned.first_seen("A", &["x", "y"]).is_empty());
        assert_eq!(warned.first_seen("B", &["x"]), ["x"], "per condition");
        assert_eq!(warned.first_seen("A", &["y", "z"]), ["z"]);
        assert!(warned.first_seen("A", &[]).is_empty());
        assert_eq!(
            warned.first_seen("A", &["x"]),
            ["x"],
            "back after it went away"
        );
    }
}
