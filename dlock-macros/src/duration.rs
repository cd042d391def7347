//! The duration grammar of `ttl`, `wait` and `max_hold`, checked at compile time.
//!
//! ```text
//! duration := part+              e.g. "10s", "1500ms", "1h30m", "2d12h"
//! part     := digits unit
//! unit     := "d" | "h" | "m" | "s" | "ms"
//! ```
//! Strict on purpose: each unit at most once and in decreasing order (`1h30m`, never `30m1h`
//! or `1s1s`), no bare numbers, no spaces, no fractions, no signs, no other units, and a total
//! above zero. `M` is rejected with the list of units: humantime reads `10M` as ten *months*,
//! which is never what a lock timeout means. Every accepted value is a whole number of
//! milliseconds that fits in a `u64`, so the expansion can use the `const`
//! `Duration::from_millis`.

use std::time::Duration;

/// The units, largest first: the order they must appear in.
const UNITS: [(&str, u64); 5] = [
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
];

/// Why a duration string was rejected. Rendered with [`DurationError::message`], which names
/// the option and the string the user wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum DurationError {
    Empty,
    Whitespace,
    /// A number without a unit (`"10"`, or the trailing `"30"` of `"1m30"`).
    MissingUnit,
    /// Something other than a digit where a number must start (`"s"`, `"-1s"`, `"1.5s"`).
    ExpectedDigits(char),
    UnknownUnit(String),
    RepeatedUnit(&'static str),
    /// Units out of order; carries the same parts in the accepted order.
    Order(String),
    TooLarge,
    Zero,
}

impl DurationError {
    /// The compile error for `option = "text"`, naming the fix.
    pub(crate) fn message(&self, option: &str, text: &str) -> String {
        let at = format!("`{option} = {text:?}`");
        match self {
            Self::Empty => format!("empty duration in {at}; write e.g. \"10s\" or \"500ms\""),
            Self::Whitespace => format!(
                "spaces are not allowed in durations ({at}); write the parts together, e.g. \"1h30m\""
            ),
            Self::MissingUnit => format!(
                "missing unit in {at}; add one of ms, s, m, h, d (e.g. \"10s\"): bare numbers are ambiguous"
            ),
            Self::ExpectedDigits('.') => format!(
                "fractions are not allowed in {at}; use a smaller unit, e.g. \"1500ms\" for 1.5s"
            ),
            Self::ExpectedDigits(c) => format!(
                "unexpected `{c}` in {at}; a duration is a number followed by a unit, e.g. \"10s\""
            ),
            Self::UnknownUnit(unit) => {
                let months = if unit == "M" {
                    " (`M` is not minutes: write `m`)"
                } else {
                    ""
                };
                format!("unknown duration unit `{unit}` in {at}; use ms, s, m, h, d{months}")
            }
            Self::RepeatedUnit(unit) => {
                format!("the unit `{unit}` appears twice in {at}; add the parts up")
            }
            Self::Order(fixed) => {
                format!("units must go from the largest to the smallest in {at}; write \"{fixed}\"")
            }
            Self::TooLarge => too_large(option, text),
            Self::Zero => format!("{at} is zero; give a positive duration such as \"10s\""),
        }
    }
}

/// The longest duration of the grammar, `u64::MAX` milliseconds, as written in it.
pub(crate) const LONGEST: &str = "213503982334d14h25m51s615ms";

/// The message for a duration beyond [`LONGEST`], naming the limit that applies to the option:
/// a lease's (24h) where there is one, else the grammar's, with the way to ask for no limit.
fn too_large(option: &str, text: &str) -> String {
    let at = format!("`{option} = {text:?}`");
    let grammar = format!(
        "{at} is too large: a duration is at most {LONGEST} (u64::MAX milliseconds, about 584 \
         million years)"
    );
    match option {
        "ttl" | "lease" => crate::limits::above_max_ttl(option, text),
        "jitter" => format!(
            "{at} is too large: `jitter` must be shorter than the lease, which is at most 24h \
             (dlock_core::MAX_TTL)"
        ),
        "wait" => format!("{grammar}; to wait as long as it takes, write `wait = \"forever\"`"),
        "max_hold" => format!("{grammar}; to renew for as long as the body runs, omit `max_hold`"),
        "max_run" => format!("{grammar}; to let a run take as long as it needs, omit `max_run`"),
        _ => grammar,
    }
}

/// Parses a duration string of the grammar above.
pub(crate) fn parse(text: &str) -> Result<Duration, DurationError> {
    if text.is_empty() {
        return Err(DurationError::Empty);
    }
    if text.chars().any(char::is_whitespace) {
        return Err(DurationError::Whitespace);
    }
    let parts = split(text)?;
    check_order(&parts)?;
    let mut total: u64 = 0;
    for &(value, unit) in &parts {
        total = value
            .checked_mul(unit_millis(unit))
            .and_then(|ms| total.checked_add(ms))
            .ok_or(DurationError::TooLarge)?;
    }
    if total == 0 {
        return Err(DurationError::Zero);
    }
    Ok(Duration::from_millis(total))
}

/// Splits `"1h30m"` into `[(1, "h"), (30, "m")]`, checking digits and units.
fn split(text: &str) -> Result<Vec<(u64, &'static str)>, DurationError> {
    let mut parts = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 {
            // `rest` is not empty, so there is a first character.
            let c = rest.chars().next().unwrap_or(' ');
            return Err(DurationError::ExpectedDigits(c));
        }
        let value: u64 = rest[..digits]
            .parse()
            .map_err(|_| DurationError::TooLarge)?;
        rest = &rest[digits..];
        let letters = rest.len() - rest.trim_start_matches(|c: char| c.is_alphabetic()).len();
        if letters == 0 {
            return match rest.chars().next() {
                None => Err(DurationError::MissingUnit),
                Some(c) => Err(DurationError::ExpectedDigits(c)),
            };
        }
        let unit = &rest[..letters];
        let known = UNITS
            .iter()
            .find(|(name, _)| *name == unit)
            .map(|(name, _)| *name)
            .ok_or_else(|| DurationError::UnknownUnit(unit.to_owned()))?;
        parts.push((value, known));
        rest = &rest[letters..];
    }
    Ok(parts)
}

/// Each unit at most once, largest first.
fn check_order(parts: &[(u64, &'static str)]) -> Result<(), DurationError> {
    let rank = |unit: &str| UNITS.iter().position(|(name, _)| *name == unit);
    for (i, &(_, unit)) in parts.iter().enumerate() {
        if parts[..i].iter().any(|&(_, seen)| seen == unit) {
            return Err(DurationError::RepeatedUnit(unit));
        }
    }
    if parts.windows(2).any(|w| rank(w[0].1) > rank(w[1].1)) {
        let mut sorted = parts.to_vec();
        sorted.sort_by_key(|&(_, unit)| rank(unit));
        let fixed = sorted.iter().map(|(v, u)| format!("{v}{u}")).collect();
        return Err(DurationError::Order(fixed));
    }
    Ok(())
}

fn unit_millis(unit: &str) -> u64 {
    UNITS
        .iter()
        .find(|(name, _)| *name == unit)
        .map_or(1, |(_, ms)| *ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Renders a duration as the canonical string of the grammar (`1h30m`), for messages.
    fn display(duration: Duration) -> String {
        let mut ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        if ms == 0 {
            return "0ms".to_owned();
        }
        let mut out = String::new();
        for (name, unit) in UNITS {
            if ms >= unit {
                out.push_str(&format!("{}{name}", ms / unit));
                ms %= unit;
            }
        }
        out
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn accepts_the_grammar() {
        assert_eq!(parse("10s"), Ok(ms(10_000)));
        assert_eq!(parse("1500ms"), Ok(ms(1_500)));
        assert_eq!(parse("1h30m"), Ok(ms(5_400_000)));
        assert_eq!(parse("2d12h"), Ok(ms(216_000_000)));
        assert_eq!(parse("1d1h1m1s1ms"), Ok(ms(90_061_001)));
        assert_eq!(parse("1m0s"), Ok(ms(60_000)));
    }

    #[test]
    fn rejects_with_a_reason() {
        use DurationError::*;
        assert_eq!(parse(""), Err(Empty));
        assert_eq!(parse("10 s"), Err(Whitespace));
        assert_eq!(parse("10"), Err(MissingUnit));
        assert_eq!(parse("1m30"), Err(MissingUnit));
        assert_eq!(parse("1.5s"), Err(ExpectedDigits('.')));
        assert_eq!(parse("-1s"), Err(ExpectedDigits('-')));
        assert_eq!(parse("s"), Err(ExpectedDigits('s')));
        assert_eq!(parse("10M"), Err(UnknownUnit("M".into())));
        assert_eq!(parse("10sec"), Err(UnknownUnit("sec".into())));
        assert_eq!(parse("10us"), Err(UnknownUnit("us".into())));
        assert_eq!(parse("1s1s"), Err(RepeatedUnit("s")));
        assert_eq!(parse("30s1m"), Err(Order("1m30s".into())));
        assert_eq!(parse("5ms1s"), Err(Order("1s5ms".into())));
        assert_eq!(parse("0s"), Err(Zero));
        assert_eq!(parse("0h0ms"), Err(Zero));
        assert_eq!(parse("99999999999999999999s"), Err(TooLarge));
        assert_eq!(parse("9999999999999999d"), Err(TooLarge));
        assert_eq!(parse(LONGEST), Ok(ms(u64::MAX)));
        assert_eq!(parse("213503982334d14h25m51s616ms"), Err(TooLarge));
    }

    #[test]
    fn messages_name_the_option_and_the_fix() {
        let err = parse("10M").unwrap_err();
        assert_eq!(
            err.message("ttl", "10M"),
            "unknown duration unit `M` in `ttl = \"10M\"`; use ms, s, m, h, d \
             (`M` is not minutes: write `m`)"
        );
        let err = parse("30s1m").unwrap_err();
        assert!(err.message("wait", "30s1m").contains("write \"1m30s\""));
    }

    #[test]
    fn too_large_names_the_limit() {
        let text = "99999999999999999999s";
        let message = |option| DurationError::TooLarge.message(option, text);
        for option in ["ttl", "lease"] {
            assert!(
                message(option).contains("the longest lease, 24h"),
                "{option}"
            );
        }
        assert!(message("jitter").contains("at most 24h"));
        assert!(message("wait").contains(LONGEST) && message("wait").contains("\"forever\""));
        assert!(message("max_hold").contains("omit `max_hold`"));
        assert!(message("max_run").contains("omit `max_run`"));
        assert!(message("misfire").contains(LONGEST));
    }

    #[test]
    fn display_is_canonical() {
        assert_eq!(display(ms(5_400_000)), "1h30m");
        assert_eq!(display(ms(10)), "10ms");
        assert_eq!(display(ms(86_400_000)), "1d");
    }

    /// A valid duration string with the value it stands for.
    fn valid() -> impl Strategy<Value = (String, u64)> {
        // One optional count per unit (largest first); at least one present and non-zero.
        proptest::collection::vec(proptest::option::of(0u64..10_000), UNITS.len())
            .prop_filter("at least one positive part", |counts| {
                counts.iter().any(|c| c.is_some_and(|c| c > 0))
            })
            .prop_map(|counts| {
                let mut text = String::new();
                let mut total = 0;
                for (count, (name, unit)) in counts.into_iter().zip(UNITS) {
                    if let Some(count) = count {
                        text.push_str(&format!("{count}{name}"));
                        total += count * unit;
                    }
                }
                (text, total)
            })
    }

    proptest! {
        #[test]
        fn every_valid_string_round_trips((text, total) in valid()) {
            prop_assert_eq!(parse(&text), Ok(ms(total)));
            // The canonical rendering parses back to the same value.
            prop_assert_eq!(parse(&display(ms(total))), Ok(ms(total)));
        }

        #[test]
        fn arbitrary_strings_never_panic(text in "\\PC*") {
            let _ = parse(&text);
        }

        #[test]
        fn near_misses_never_panic(text in "[0-9]{0,22}[a-zA-Z.\\- ]{0,3}[0-9]{0,3}[a-z]{0,2}") {
            if let Err(e) = parse(&text) {
                prop_assert!(!e.message("ttl", &text).is_empty());
            }
        }

        #[test]
        fn bare_numbers_are_rejected(n in 0u64..u64::MAX) {
            prop_assert_eq!(parse(&n.to_string()), Err(DurationError::MissingUnit));
        }
    }
}
