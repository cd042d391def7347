//! Cron syntax checks in front of croner, so that every refusal names the field and the fix.

use chrono::NaiveDate;
use croner::Cron;
use croner::errors::CronError;
use croner::parser::{CronParser, Seconds, Year};

use crate::error::{ScheduleError, ScheduleErrorKind};

/// A parsed expression, and whether its hour field makes it interval-style for DST.
pub(super) struct Parsed {
    pub(super) cron: Cron,
    pub(super) hour_is_interval: bool,
}

const NICKNAMES: [(&str, &str); 6] = [
    ("@yearly", "0 0 1 1 *"),
    ("@annually", "0 0 1 1 *"),
    ("@monthly", "0 0 1 * *"),
    ("@weekly", "0 0 * * 0"),
    ("@daily", "0 0 * * *"),
    ("@hourly", "0 * * * *"),
];

const FIELDS_HELP: &str =
    "5 (minute hour day-of-month month day-of-week) or 6 (with seconds first)";

/// One cron field: its name for messages, the words and punctuation it may hold besides
/// digits and `* , - /`, and what it accepts, for the fix in a message.
struct Field {
    name: &'static str,
    words: &'static [&'static str],
    extra: &'static str,
    accepts: &'static str,
}

const fn field(
    name: &'static str,
    words: &'static [&'static str],
    extra: &'static str,
    accepts: &'static str,
) -> Field {
    Field {
        name,
        words,
        extra,
        accepts,
    }
}

const STEPS: &str = "`*`, lists `1,5`, ranges `1-5` and steps `*/5` or `0-30/5`";
const MONTHS: &[&str] = &[
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const WEEKDAYS: &[&str] = &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT", "L"];
const SECOND: Field = field("second", &[], "", "0-59");
const MINUTE: Field = field("minute", &[], "", "0-59");
const HOUR: Field = field("hour", &[], "", "0-23");
const DAY_OF_MONTH: Field = field(
    "day-of-month",
    &["L", "W", "LW"],
    "?",
    "1-31, `L` (last day), `15W` (weekday nearest the 15th), `?`",
);
const MONTH: Field = field("month", MONTHS, "", "1-12 or JAN-DEC");
const DAY_OF_WEEK: Field = field(
    "day-of-week",
    WEEKDAYS,
    "?#+",
    "0-7 (0 and 7 are Sunday) or SUN-SAT, `5#2` (second Friday), `5L` (last Friday), `?`, \
     a leading `+` to require day-of-month AND day-of-week",
);
const FIVE: [Field; 5] = [MINUTE, HOUR, DAY_OF_MONTH, MONTH, DAY_OF_WEEK];
const SIX: [Field; 6] = [SECOND, MINUTE, HOUR, DAY_OF_MONTH, MONTH, DAY_OF_WEEK];

fn parser() -> CronParser {
    // POSIX weekdays (Sunday = 0 or 7), day-of-month OR day-of-week unless `+`, strict
    // steps (`5/5` refused): croner's defaults, spelled out because they are our contract.
    CronParser::builder()
        .seconds(Seconds::Optional)
        .year(Year::Disallowed)
        .dom_and_dow(false)
        .alternative_weekdays(false)
        .sloppy_ranges(false)
        .build()
}

pub(super) fn parse(expression: &str) -> Result<Parsed, ScheduleError> {
    let trimmed = expression.trim();
    let expanded = if trimmed.starts_with('@') {
        expand_nickname(trimmed)?
    } else {
        trimmed
    };
    let parts: Vec<&str> = expanded.split_whitespace().collect();
    let specs: &[Field] = match parts.len() {
        5 => &FIVE,
        6 => &SIX,
        n => return Err(field_count(expression, n)),
    };
    for (part, spec) in parts.iter().zip(specs) {
        check_characters(expression, part, spec)?;
    }
    let cron = parser()
        .parse(expanded)
        .map_err(|err| blame(expression, &parts, specs, err))?;
    never_fires_check(expression, &cron)?;
    // parts.len() is 5 or 6, so the hour field is the third from the end of the time
    // fields: index len - 4.
    let hour_is_interval = parts
        .get(parts.len() - 4)
        .is_some_and(|hour| hour.starts_with('*'));
    Ok(Parsed {
        cron,
        hour_is_interval,
    })
}

fn expand_nickname(trimmed: &str) -> Result<&'static str, ScheduleError> {
    NICKNAMES
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(trimmed))
        .map(|(_, fields)| *fields)
        .ok_or_else(|| {
            let names: Vec<&str> = NICKNAMES.iter().map(|(name, _)| *name).collect();
            ScheduleError::new(
                ScheduleErrorKind::InvalidField,
                format!(
                    "unknown cron nickname `{trimmed}`; use one of {}, or write {FIELDS_HELP} fields",
                    names.join(", ")
                ),
            )
        })
}

fn field_count(expression: &str, count: usize) -> ScheduleError {
    let message = match count {
        0 => format!(
            "cron expression `{expression}` is empty; expected {FIELDS_HELP} fields, such as `0 12 * * *`"
        ),
        7 => format!(
            "cron expression `{expression}` has 7 fields; expected {FIELDS_HELP}; a year field is not supported"
        ),
        1 => format!("cron expression `{expression}` has 1 field; expected {FIELDS_HELP}"),
        n => format!("cron expression `{expression}` has {n} fields; expected {FIELDS_HELP}"),
    };
    ScheduleError::new(ScheduleErrorKind::FieldCount, message)
}

/// Refuses characters and words a field cannot hold. croner replaces month and weekday
/// names anywhere in the expression (`MON` in the month field would become January) and
/// upper-cases non-ASCII text, so only ASCII and names in their own field get through.
fn check_characters(expression: &str, part: &str, spec: &Field) -> Result<(), ScheduleError> {
    let refuse = |what: &str| {
        ScheduleError::new(
            ScheduleErrorKind::InvalidField,
            format!(
                "cron expression `{expression}`: the {} field `{part}` contains {what}; it accepts {}, {STEPS}",
                spec.name, spec.accepts
            ),
        )
    };
    if let Some(bad) = part.chars().find(|c| {
        !(c.is_ascii_digit()
            || c.is_ascii_alphabetic()
            || "*,-/".contains(*c)
            || spec.extra.contains(*c))
    }) {
        return Err(refuse(&format!("`{bad}`, which that field does not allow")));
    }
    for word in part
        .split(|c: char| !c.is_ascii_alphabetic())
        .filter(|word| !word.is_empty())
    {
        if !spec.words.contains(&word.to_ascii_uppercase().as_str()) {
            return Err(refuse(&format!(
                "`{word}`, which is not a word that field knows"
            )));
        }
    }
    Ok(())
}

/// Finds which field croner refused, by parsing each one alone (the others set to `*`).
fn blame(expression: &str, parts: &[&str], specs: &[Field], err: CronError) -> ScheduleError {
    let parser = parser();
    for (index, spec) in specs.iter().enumerate() {
        let alone: Vec<&str> = (0..parts.len())
            .map(|i| if i == index { parts[i] } else { "*" })
            .collect();
        if let Err(field_err) = parser.parse(&alone.join(" ")) {
            return ScheduleError::new(
                ScheduleErrorKind::InvalidField,
                format!(
                    "cron expression `{expression}`: the {} field `{}` is invalid ({}); it accepts {}, {STEPS}",
                    spec.name,
                    parts[index],
                    detail(&field_err),
                    spec.accepts
                ),
            )
            .with_source(err);
        }
    }
    ScheduleError::new(
        ScheduleErrorKind::InvalidField,
        format!(
            "cron expression `{expression}` is invalid ({})",
            detail(&err)
        ),
    )
    .with_source(err)
}

fn detail(err: &CronError) -> String {
    match err {
        CronError::ComponentError(message)
        | CronError::InvalidPattern(message)
        | CronError::IllegalCharacters(message) => message.trim_end_matches('.').to_owned(),
        other => other.to_string().trim_end_matches('.').to_owned(),
    }
}

/// Valid fields can still describe no date (`0 0 30 2 *`). croner's search then runs to the
/// year 5000 and gives up (about 20 ms, once, at construction). The calendar repeats every
/// 400 years, so a pattern without a match by then has none at all.
fn never_fires_check(expression: &str, cron: &Cron) -> Result<(), ScheduleError> {
    let Some(origin) = NaiveDate::from_ymd_opt(2000, 1, 1).and_then(|d| d.and_hms_opt(0, 0, 0))
    else {
        return Ok(());
    };
    match cron.find_next_occurrence(&origin, false) {
        Ok(_) => Ok(()),
        Err(err) => Err(ScheduleError::new(
            ScheduleErrorKind::NeverFires,
            format!(
                "cron expression `{expression}` never fires: no date matches its day-of-month, \
                 month and day-of-week fields together; check those fields (a leading `+` in \
                 day-of-week requires both day fields to match)"
            ),
        )
        .with_source(err)),
    }
}
