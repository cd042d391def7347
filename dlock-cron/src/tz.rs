//! Time-zone names: IANA names from the compiled-in tz database, never fixed offsets.

use chrono_tz::{TZ_VARIANTS, Tz};

use crate::error::{ScheduleError, ScheduleErrorKind};

const USE_INSTEAD: &str = "use an IANA name such as `Europe/Berlin` or `UTC`";

/// Abbreviations people type for a zone; none of them is a (DST-following) IANA name.
const ABBREVIATIONS: [(&str, &str); 10] = [
    ("PST", "America/Los_Angeles"),
    ("PDT", "America/Los_Angeles"),
    ("CST", "America/Chicago"),
    ("CDT", "America/Chicago"),
    ("EDT", "America/New_York"),
    ("MDT", "America/Denver"),
    ("BST", "Europe/London"),
    ("CEST", "Europe/Berlin"),
    ("JST", "Asia/Tokyo"),
    ("Z", "UTC"),
];

pub(super) fn parse(name: &str) -> Result<Tz, ScheduleError> {
    match name.parse::<Tz>() {
        Ok(tz) => match fixed_offset_hint(tz) {
            Some(hint) => Err(fixed_offset(name, hint)),
            None => Ok(tz),
        },
        Err(_) if looks_like_offset(name) => Err(fixed_offset(name, "")),
        Err(_) => Err(unknown(name)),
    }
}

/// tz-database names that are fixed offsets: `Etc/GMT±N` (N ≠ 0) and the legacy `EST`,
/// `MST`, `HST`. Zero-offset names (`UTC`, `Etc/GMT`, `GMT+0` …) are fine: UTC is UTC.
fn fixed_offset_hint(tz: Tz) -> Option<&'static str> {
    let name = tz.name();
    if let Some(offset) = name.strip_prefix("Etc/GMT") {
        let digits = offset.trim_start_matches(['+', '-']);
        if !digits.is_empty() && digits.bytes().any(|b| b != b'0') {
            return Some(" (note the POSIX sign: `Etc/GMT-2` means UTC+2)");
        }
        return None;
    }
    match name {
        "EST" => Some(" (`EST` is UTC-5 all year; New York time is `America/New_York`)"),
        "MST" => Some(
            " (`MST` is UTC-7 all year; use `America/Denver`, or `America/Phoenix`, which has no daylight saving)",
        ),
        "HST" => Some(" (`HST` is UTC-10 all year; use `Pacific/Honolulu`)"),
        _ => None,
    }
}

/// `+02:00`, `-0500`, `UTC+2`, `GMT-3`, `utc +02:00` …
fn looks_like_offset(name: &str) -> bool {
    let trimmed = name.trim();
    let rest = ["UTC", "GMT", "UT"]
        .iter()
        .find_map(|prefix| {
            trimmed
                .get(..prefix.len())
                .filter(|head| head.eq_ignore_ascii_case(prefix))
                .map(|_| &trimmed[prefix.len()..])
        })
        .unwrap_or(trimmed)
        .trim_start();
    let mut chars = rest.chars();
    matches!(chars.next(), Some('+' | '-' | '\u{2212}'))
        && chars.next().is_some_and(|c| c.is_ascii_digit())
}

fn fixed_offset(name: &str, hint: &str) -> ScheduleError {
    ScheduleError::new(
        ScheduleErrorKind::FixedOffsetTimeZone,
        format!(
            "time zone `{name}` is a fixed UTC offset{hint}; fixed offsets drift by an hour \
             across daylight-saving changes, so the job would run an hour off for part of the \
             year; use the IANA name of the place, such as `Europe/Berlin` or \
             `America/New_York`, or `UTC`"
        ),
    )
}

fn unknown(name: &str) -> ScheduleError {
    let message = if name.trim().is_empty() {
        format!("time zone `{name}` is empty; {USE_INSTEAD}")
    } else {
        match suggestion(name) {
            Some(close) => {
                format!("unknown time zone `{name}` (did you mean `{close}`?); {USE_INSTEAD}")
            }
            None => format!("unknown time zone `{name}`; {USE_INSTEAD}"),
        }
    };
    ScheduleError::new(ScheduleErrorKind::UnknownTimeZone, message)
}

/// A name the user probably meant: an abbreviation's zone, a case-insensitive match, or the
/// closest accepted name within a small edit distance.
fn suggestion(name: &str) -> Option<&'static str> {
    let trimmed = name.trim();
    if let Some((_, zone)) = ABBREVIATIONS
        .iter()
        .find(|(abbreviation, _)| abbreviation.eq_ignore_ascii_case(trimmed))
    {
        return Some(zone);
    }
    if trimmed.len() > 64 {
        return None;
    }
    let wanted = trimmed.to_ascii_lowercase();
    let max_distance = (wanted.len() / 4).clamp(1, 3);
    TZ_VARIANTS
        .iter()
        .filter(|tz| fixed_offset_hint(**tz).is_none())
        .map(|tz| {
            (
                edit_distance(&wanted, &tz.name().to_ascii_lowercase()),
                tz.name(),
            )
        })
        .filter(|(distance, _)| *distance <= max_distance)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, name)| name)
}

/// Levenshtein distance over bytes (tz names are ASCII).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len() + 1];
    for (i, &ca) in a.iter().enumerate() {
        current[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}
