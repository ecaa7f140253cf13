//! Tests of the device plugin configuration checker against the fixtures of the ecosystem
//! notes (§9.1 valid, §9.2 refused, §9.3 accepted but wrong), each asserting the field path and
//! a key phrase of the message.

mod invalid;
mod valid;
mod warnings;

use super::{Finding, Findings, check};

/// A GPU UUID for device lists.
const UUID: &str = "b1028956-cfa2-0990-bf4a-5da9abb51763";

fn has(findings: &[Finding], field: &str, phrase: &str) -> bool {
    findings
        .iter()
        .any(|finding| finding.field == field && finding.message.contains(phrase))
}

/// Checks `text` and asserts neither errors nor warnings.
fn assert_clean(text: &str) {
    let findings = check(text);
    assert_eq!(findings, Findings::default(), "for:\n{text}");
}

/// Checks `text` and asserts an error at `field` whose message contains `phrase`.
fn assert_error(text: &str, field: &str, phrase: &str) -> Findings {
    let findings = check(text);
    assert!(
        has(&findings.errors, field, phrase),
        "no error at {field:?} saying {phrase:?} for:\n{text}\nfound {findings:#?}"
    );
    findings
}

/// Checks `text` and asserts no error and a warning at `field` whose message contains `phrase`.
fn assert_warning(text: &str, field: &str, phrase: &str) -> Findings {
    let findings = check(text);
    assert!(
        findings.errors.is_empty(),
        "errors for:\n{text}\n{findings:#?}"
    );
    assert!(
        has(&findings.warnings, field, phrase),
        "no warning at {field:?} saying {phrase:?} for:\n{text}\nfound {findings:#?}"
    );
    findings
}

#[test]
fn a_finding_shows_its_field_then_its_message() {
    let finding = |field: &str| Finding {
        field: field.to_owned(),
        message: "unknown version `v2`".to_owned(),
    };
    assert_eq!(
        finding("version").to_string(),
        "version: unknown version `v2`"
    );
    assert_eq!(finding("").to_string(), "unknown version `v2`");
}
