//! A reader of the Prometheus text exposition format (the `/metrics` answer): each sample as its
//! metric name, labels and value. The metrics tests and the e2e tests compare values through it
//! instead of searching the text for substrings (`… 1` would also match `… 10`).

use std::collections::BTreeMap;

/// One sample line: `name{label="value",…} value [timestamp]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// The metric name, with its `_total`/`_count`/`_bucket` suffix as written.
    pub name: String,
    /// The labels, unescaped.
    pub labels: BTreeMap<String, String>,
    /// The value (`+Inf`, `-Inf` and `NaN` included).
    pub value: f64,
}

/// Every sample of `text`; comments (`# HELP`, `# TYPE`, `# EOF`) and blank lines are skipped.
/// A malformed line is an error naming it.
pub fn samples(text: &str) -> Result<Vec<Sample>, String> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| sample(line).ok_or_else(|| format!("not a sample line: `{line}`")))
        .collect()
}

/// The value of the one sample named `name` whose labels are exactly `labels`.
pub fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let wanted: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    samples
        .iter()
        .find(|s| s.name == name && s.labels == wanted)
        .map(|s| s.value)
}

fn sample(line: &str) -> Option<Sample> {
    let name_end = line.find(['{', ' '])?;
    let name = &line[..name_end];
    if name.is_empty() {
        return None;
    }
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if let Some(after_brace) = rest.strip_prefix('{') {
        rest = after_brace;
        loop {
            rest = rest.trim_start_matches([' ', ',']);
            if let Some(after) = rest.strip_prefix('}') {
                rest = after;
                break;
            }
            let (key, after_key) = rest.split_once("=\"")?;
            let (value, after_value) = quoted(after_key)?;
            labels.insert(key.trim().to_owned(), value);
            rest = after_value;
        }
    }
    let mut fields = rest.split_whitespace();
    let value = match fields.next()? {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        number => number.parse().ok()?,
    };
    Some(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// The unescaped text up to the closing quote, and what follows it.
fn quoted(text: &str) -> Option<(String, &str)> {
    let mut value = String::new();
    let mut chars = text.char_indices();
    while let Some((at, c)) = chars.next() {
        match c {
            '"' => return Some((value, &text[at + 1..])),
            '\\' => match chars.next()?.1 {
                'n' => value.push('\n'),
                other => value.push(other),
            },
            other => value.push(other),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_names_labels_values_and_escapes() {
        let text = "# HELP x_total X.\n# TYPE x_total counter\nx_total 10\n\
                    y{node=\"a\\\"b\\\\c\",le=\"+Inf\"} 2.5 1700000000\nz +Inf\n# EOF\n";
        let all = samples(text).unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(value(&all, "x_total", &[]), Some(10.0));
        assert_eq!(
            value(&all, "y", &[("node", "a\"b\\c"), ("le", "+Inf")]),
            Some(2.5)
        );
        assert_eq!(value(&all, "z", &[]), Some(f64::INFINITY));
        assert_eq!(
            value(&all, "y", &[("node", "a\"b\\c")]),
            None,
            "labels must match exactly"
        );
    }

    #[test]
    fn a_malformed_line_is_an_error() {
        assert!(samples("x{a=\"1\" 2\n").is_err());
        assert!(samples("x one\n").is_err());
    }

    /// The node status exporter's answer on a real H100 node (the validator's fixtures).
    #[test]
    fn reads_the_node_status_exporters_real_answer() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(
            "../gpu-operator-validator/tests/fixtures/validator-metrics_h100-80gb-hbm3_580.159.04.txt",
        );
        let text = std::fs::read_to_string(path).unwrap();
        let all = samples(&text).unwrap();
        let node = [("node", "gpu-host")];
        assert_eq!(all.len(), 10, "{all:#?}");
        assert_eq!(
            value(&all, "gpu_operator_nvidia_pci_devices_total", &node),
            Some(1.0)
        );
        assert_eq!(
            value(&all, "gpu_operator_node_driver_validation", &node),
            Some(1.0)
        );
        assert_eq!(
            value(&all, "gpu_operator_node_driver_ready", &node),
            Some(1.0)
        );
        assert_eq!(
            value(&all, "gpu_operator_node_toolkit_ready", &node),
            Some(0.0)
        );
        assert_eq!(
            value(&all, "gpu_operator_node_device_plugin_devices_total", &node),
            Some(-1.0)
        );
    }
}
