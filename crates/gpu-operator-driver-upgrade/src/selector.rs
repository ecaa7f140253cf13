//! Label selectors in their string form (`app=training,tier!=batch,gpu,!spot,zone in (a,b)`), as
//! `waitForCompletion.podSelector` and `drain.podSelector` hold them, matched against pod labels.

use std::collections::BTreeMap;

/// One requirement of a selector.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Requirement {
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    Absent(String),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector(Vec<Requirement>);

/// A selector that does not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0:?} is not a label selector: {1}")]
pub struct BadSelector(pub String, pub &'static str);

impl Selector {
    /// Parses `text`.
    pub fn parse(text: &str) -> Result<Self, BadSelector> {
        let bad = |why| BadSelector(text.to_owned(), why);
        let mut requirements = Vec::new();
        for term in split_terms(text) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            let requirement = if let Some(key) = term.strip_prefix('!') {
                Requirement::Absent(key_of(key.trim()).ok_or_else(|| bad("bad key after `!`"))?)
            } else if let Some((key, value)) = term.split_once("!=") {
                Requirement::NotIn(
                    key_of(key).ok_or_else(|| bad("bad key"))?,
                    vec![value.trim().to_owned()],
                )
            } else if let Some((key, value)) =
                term.split_once("==").or_else(|| term.split_once('='))
            {
                Requirement::In(
                    key_of(key).ok_or_else(|| bad("bad key"))?,
                    vec![value.trim().to_owned()],
                )
            } else if let Some((key, values)) = set_term(term, " notin ") {
                Requirement::NotIn(
                    key_of(key).ok_or_else(|| bad("bad key"))?,
                    values.ok_or_else(|| bad("`notin` needs a list in parentheses"))?,
                )
            } else if let Some((key, values)) = set_term(term, " in ") {
                Requirement::In(
                    key_of(key).ok_or_else(|| bad("bad key"))?,
                    values.ok_or_else(|| bad("`in` needs a list in parentheses"))?,
                )
            } else {
                Requirement::Exists(key_of(term).ok_or_else(|| bad("bad key"))?)
            };
            requirements.push(requirement);
        }
        Ok(Self(requirements))
    }

    /// This selector and also `key != value`.
    #[must_use]
    pub fn and_not(mut self, key: &str, value: &str) -> Self {
        self.0
            .push(Requirement::NotIn(key.to_owned(), vec![value.to_owned()]));
        self
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::In(k, values) => labels.get(k).is_some_and(|v| values.contains(v)),
            Requirement::NotIn(k, values) => labels.get(k).is_none_or(|v| !values.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::Absent(k) => !labels.contains_key(k),
        })
    }
}

/// Splits at commas outside parentheses.
fn split_terms(text: &str) -> Vec<&str> {
    let (mut terms, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                terms.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&text[start..]);
    terms
}

/// `key <op> (a, b)`: the key and the values (`None` when the list is malformed).
fn set_term<'a>(term: &'a str, op: &str) -> Option<(&'a str, Option<Vec<String>>)> {
    let (key, rest) = term.split_once(op)?;
    let values = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .map(|list| list.split(',').map(|v| v.trim().to_owned()).collect());
    Some((key, values))
}

/// A label key: non-empty, no spaces or operators.
fn key_of(key: &str) -> Option<String> {
    let key = key.trim();
    let valid = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    valid.then(|| key.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn kubectl_selector_forms_match_as_kubectl_matches_them() {
        // Hand-written table of `kubectl get pods -l …` semantics.
        let pod = labels(&[("app", "training"), ("tier", "gpu"), ("zone", "b")]);
        for (selector, expected) in [
            ("", true),
            ("app=training", true),
            ("app==training", true),
            ("app=serving", false),
            ("app!=serving", true),
            ("missing!=x", true),
            ("tier", true),
            ("!tier", false),
            ("!spot", true),
            ("zone in (a, b)", true),
            ("zone notin (a,b)", false),
            ("app=training,zone in (c)", false),
            ("app = training , tier", true),
        ] {
            let parsed = Selector::parse(selector).unwrap();
            assert_eq!(parsed.matches(&pod), expected, "{selector}");
        }
    }

    #[test]
    fn malformed_selectors_are_refused_with_the_text() {
        for bad in ["app in training", "a b=c", "!", "=x"] {
            let error = Selector::parse(bad).unwrap_err();
            assert_eq!(error.0, bad);
        }
    }

    #[test]
    fn and_not_excludes_the_drain_skip_label() {
        let s = Selector::parse("").unwrap().and_not("skip", "true");
        assert!(!s.matches(&labels(&[("skip", "true")])));
        assert!(s.matches(&labels(&[("skip", "false")])));
        assert!(s.matches(&labels(&[])));
    }
}
