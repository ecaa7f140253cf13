//! The metric names a PromQL expression reads, found without a full parser: string literals,
//! label matchers (`{…}`), ranges and subqueries (`[…]`) and label lists of `by`, `without`,
//! `on`, `ignoring`, `group_left` and `group_right` are removed; of the identifiers left, those
//! followed by `(` must be PromQL functions or aggregations, keywords are skipped, and the rest
//! are metric names. Enough for the expressions we write; promtool checks that they parse.

/// PromQL functions and aggregation operators our expressions may call.
const FUNCTIONS: [&str; 30] = [
    "abs",
    "avg",
    "avg_over_time",
    "ceil",
    "changes",
    "clamp_min",
    "count",
    "count_over_time",
    "delta",
    "deriv",
    "floor",
    "histogram_quantile",
    "increase",
    "irate",
    "label_replace",
    "last_over_time",
    "max",
    "max_over_time",
    "min",
    "min_over_time",
    "predict_linear",
    "quantile",
    "rate",
    "round",
    "scalar",
    "sum",
    "sum_over_time",
    "time",
    "topk",
    "vector",
];

/// Keywords and grouping modifiers.
const KEYWORDS: [&str; 11] = [
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// Words whose parenthesised list that follows is label names, not an expression.
const LABEL_LISTS: [&str; 6] = [
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// The metric names `expr` reads, or an error naming a call of an unknown function.
pub fn metric_names(expr: &str) -> Result<Vec<String>, String> {
    let stripped = strip(expr);
    let chars: Vec<char> = stripped.chars().collect();
    let mut names = Vec::new();
    let mut i = 0;
    let mut skip_list = false;
    while i < chars.len() {
        let c = chars[i];
        if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) {
            // A number (`1e9`, `0x1f`, `.5`) or a duration (`5m`): no names in it.
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let next = chars[i..].iter().find(|c| !c.is_whitespace());
            if LABEL_LISTS.contains(&word.as_str()) {
                skip_list = next == Some(&'(');
            } else if KEYWORDS.contains(&word.as_str()) {
            } else if next == Some(&'(') {
                if !FUNCTIONS.contains(&word.as_str()) {
                    return Err(format!(
                        "`{word}(` is not a known PromQL function in {expr}"
                    ));
                }
            } else if !FUNCTIONS.contains(&word.as_str()) {
                names.push(word);
            }
            continue;
        }
        if c == '(' && skip_list {
            skip_list = false;
            while i < chars.len() && chars[i] != ')' {
                i += 1;
            }
        }
        i += 1;
    }
    names.sort();
    names.dedup();
    Ok(names)
}

/// `expr` without string literals, `{…}` and `[…]`.
fn strip(expr: &str) -> String {
    let mut out = String::with_capacity(expr.len());
    let mut depth = 0_u32;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in expr.chars() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '"' | '\'' | '`' => quote = Some(c),
            '{' | '[' => depth += 1,
            '}' | ']' => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_found_and_everything_else_is_not() {
        let expr = r#"sum by (reconciler, error) (rate(gpu_operator_x_count{error!="a{b}"}[5m])) > 1e9 unless on (node) DCGM_FI_DEV_GPU_UTIL > 80 and ignoring(x) max_over_time(up[1h:5m]) or vector(1)"#;
        assert_eq!(
            metric_names(expr).unwrap(),
            vec!["DCGM_FI_DEV_GPU_UTIL", "gpu_operator_x_count", "up"]
        );
        assert!(
            metric_names("nonsense_fn(x)")
                .unwrap_err()
                .contains("nonsense_fn")
        );
    }
}
