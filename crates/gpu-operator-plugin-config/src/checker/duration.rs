//! Go duration strings as GPU Feature Discovery's `sleepInterval` takes them: a sequence of
//! decimal numbers, each with a unit (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`), such as `90s`,
//! `1m30s` or `0.5h`, with an optional sign; `0` alone; or the word `infinite`.

/// A parsed sleep interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Duration {
    /// This many nanoseconds.
    Finite(i64),
    /// Label once and never again.
    Infinite,
}

/// Nanoseconds per unit.
const UNITS: &[(&str, u64)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("μs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// The largest magnitude a duration can have: that of `i64::MIN` nanoseconds.
const LIMIT: u64 = 1 << 63;

/// Parses a sleep interval, with an error message naming the fix.
pub(super) fn parse_interval(text: &str) -> Result<Duration, String> {
    if text == "infinite" {
        return Ok(Duration::Infinite);
    }
    parse(text).map(Duration::Finite).map_err(|why| {
        format!(
            "invalid duration \"{text}\" ({why}): write a duration such as \"90s\", \"1m30s\" \
             or \"0.5h\" (units ns, us, ms, s, m, h), a number of nanoseconds, or \"infinite\""
        )
    })
}

/// Parses a Go duration string into nanoseconds.
fn parse(text: &str) -> Result<i64, &'static str> {
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err("it is empty");
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let (nanos, after) = parse_term(rest)?;
        total = total.checked_add(nanos).ok_or("it is too long")?;
        if total > LIMIT {
            return Err("it is too long");
        }
        rest = after;
    }
    if negative {
        // `total` is at most 2^63, so this is exact.
        Ok(0_i64.wrapping_sub_unsigned(total))
    } else {
        i64::try_from(total).map_err(|_| "it is too long")
    }
}

/// Parses one `<number><unit>` term at the start of `text`: its nanoseconds and the rest.
fn parse_term(text: &str) -> Result<(u64, &str), &'static str> {
    let (whole, whole_digits, rest) = leading_int(text)?;
    let (fraction, scale, fraction_digits, rest) = match rest.strip_prefix('.') {
        Some(rest) => leading_fraction(rest),
        None => (0, 1, 0, rest),
    };
    if whole_digits == 0 && fraction_digits == 0 {
        return Err("a number is expected before each unit");
    }
    let unit_end = rest
        .find(|c: char| c == '.' || c.is_ascii_digit())
        .unwrap_or(rest.len());
    let (unit, rest) = rest.split_at(unit_end);
    if unit.is_empty() {
        return Err("a number has no unit");
    }
    let per_unit = UNITS
        .iter()
        .find(|(name, _)| *name == unit)
        .map(|(_, nanos)| *nanos)
        .ok_or("it has an unknown unit")?;
    let mut nanos = whole.checked_mul(per_unit).ok_or("it is too long")?;
    if fraction > 0 {
        // Go adds the fraction in floating point and truncates.
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_precision_loss,
            clippy::cast_sign_loss
        )]
        let extra = (fraction as f64 * (per_unit as f64 / scale as f64)) as u64;
        nanos = nanos.checked_add(extra).ok_or("it is too long")?;
    }
    if nanos > LIMIT {
        return Err("it is too long");
    }
    Ok((nanos, rest))
}

/// The decimal integer at the start of `text`, how many digits it has, and the rest.
fn leading_int(text: &str) -> Result<(u64, usize, &str), &'static str> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let mut value: u64 = 0;
    for digit in text[..digits].bytes() {
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(digit - b'0')))
            .filter(|v| *v <= LIMIT)
            .ok_or("it is too long")?;
    }
    Ok((value, digits, &text[digits..]))
}

/// The decimal fraction digits at the start of `text`: their value, the power of ten they are
/// over, how many digits there are, and the rest. Digits beyond what fits are dropped.
fn leading_fraction(text: &str) -> (u64, u64, usize, &str) {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (mut value, mut scale, mut overflowed) = (0_u64, 1_u64, false);
    for digit in text[..digits].bytes() {
        if overflowed {
            continue;
        }
        match (
            value
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(digit - b'0'))),
            scale.checked_mul(10),
        ) {
            (Some(v), Some(s)) if v <= LIMIT => (value, scale) = (v, s),
            _ => overflowed = true,
        }
    }
    (value, scale, digits, &text[digits..])
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: i64 = 1_000_000_000;

    #[test]
    fn go_durations_parse() {
        assert_eq!(parse("90s"), Ok(90 * SECOND));
        assert_eq!(parse("1m30s"), Ok(90 * SECOND));
        assert_eq!(parse("0.5h"), Ok(1800 * SECOND));
        assert_eq!(parse(".5m"), Ok(30 * SECOND));
        assert_eq!(parse("5.m"), Ok(300 * SECOND));
        assert_eq!(parse("1h2m3s4ms5us6µs7ns"), Ok(3_723_004_011_007));
        assert_eq!(parse("0"), Ok(0));
        assert_eq!(parse("-1.5s"), Ok(-1_500_000_000));
        assert_eq!(parse("+2ms"), Ok(2_000_000));
        assert_eq!(parse("-9223372036854775808ns"), Ok(i64::MIN));
        assert_eq!(parse("9223372036854775807ns"), Ok(i64::MAX));
    }

    #[test]
    fn bad_durations_are_refused() {
        for bad in [
            "",
            "-",
            "5",
            "5 minutes",
            "1d",
            "s",
            ".s",
            "1.5",
            "10M",
            "9223372036854775808ns",
            "3000000h",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn infinite_is_a_word_not_a_duration() {
        assert_eq!(parse_interval("infinite"), Ok(Duration::Infinite));
        assert_eq!(parse_interval("60s"), Ok(Duration::Finite(60 * SECOND)));
        let error = parse_interval("5 minutes").unwrap_err();
        assert!(error.contains("invalid duration \"5 minutes\""), "{error}");
        assert!(error.contains("unknown unit"), "{error}");
    }
}
