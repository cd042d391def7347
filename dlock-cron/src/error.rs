//! [`ScheduleError`]: why a cron expression or a time zone was refused.
//!
//! One opaque error type with a [`kind()`](ScheduleError::kind) (the house style of the workspace),
//! so that new failure modes can be added without breaking callers that `match`. Every message
//! names the offending input and says how to fix it, because these errors end up in front of the
//! person who typed the cron string, often at start-up of a service far from its config file.

use std::error::Error as StdError;
use std::fmt;

/// What kind of input [`Schedule::new`](crate::Schedule::new) refused.
///
/// `#[non_exhaustive]`: match with a `_` arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ScheduleErrorKind {
    /// The cron expression does not have 5 fields (minute hour day-of-month month day-of-week)
    /// or 6 fields (seconds first), and is not a known nickname such as `@daily`.
    /// Fix: add or remove fields; a year field is not supported.
    FieldCount,
    /// One field of the cron expression (or a `@nickname`) is not valid: a value out of range,
    /// a character that field does not allow, or a malformed step. The message names the field
    /// and lists what it accepts.
    InvalidField,
    /// Every field is valid on its own, but together they match no date at all (e.g.
    /// `0 0 30 2 *`, the 30th of February). Fix the day-of-month / month / day-of-week fields.
    NeverFires,
    /// The time zone is not an IANA time-zone name known to the compiled-in tz database.
    /// Fix: use a name such as `Europe/Berlin`, `America/New_York` or `UTC`.
    UnknownTimeZone,
    /// The time zone is a fixed UTC offset (`+02:00`, `UTC+2`, `Etc/GMT-2`, `EST` …). Fixed
    /// offsets do not follow daylight-saving time, so a job would run an hour off for half of
    /// the year. Fix: use the IANA name of the place, such as `Europe/Berlin`, or `UTC`.
    FixedOffsetTimeZone,
}

/// A cron expression or time zone that [`Schedule::new`](crate::Schedule::new) refused.
///
/// The [`Display`](fmt::Display) text is meant for humans: it quotes the input, says what is
/// wrong and how to fix it. Programs should look at [`kind()`](Self::kind) instead.
///
/// # Examples
///
/// ```
/// use dlock_cron::{Schedule, ScheduleErrorKind};
///
/// let err = Schedule::new("0 12 * *", "UTC").unwrap_err();
/// assert_eq!(err.kind(), ScheduleErrorKind::FieldCount);
/// assert!(err.is_cron());
/// assert_eq!(
///     err.to_string(),
///     "cron expression `0 12 * *` has 4 fields; expected 5 (minute hour day-of-month month \
///      day-of-week) or 6 (with seconds first)"
/// );
/// ```
#[derive(Debug)]
pub struct ScheduleError {
    kind: ScheduleErrorKind,
    message: String,
    source: Option<croner::errors::CronError>,
}

impl ScheduleError {
    pub(crate) fn new(kind: ScheduleErrorKind, message: String) -> Self {
        Self {
            kind,
            message,
            source: None,
        }
    }

    pub(crate) fn with_source(mut self, source: croner::errors::CronError) -> Self {
        self.source = Some(source);
        self
    }

    /// What kind of input was refused.
    ///
    /// # Examples
    ///
    /// ```
    /// use dlock_cron::{Schedule, ScheduleErrorKind};
    ///
    /// let err = Schedule::new("0 12 * * *", "Europe/Berln").unwrap_err();
    /// assert_eq!(err.kind(), ScheduleErrorKind::UnknownTimeZone);
    /// ```
    #[must_use]
    pub fn kind(&self) -> ScheduleErrorKind {
        self.kind
    }

    /// `true` if the cron expression was refused (the time zone was not looked at, or was fine).
    ///
    /// # Examples
    ///
    /// ```
    /// use dlock_cron::Schedule;
    ///
    /// assert!(Schedule::new("61 * * * *", "UTC").unwrap_err().is_cron());
    /// ```
    #[must_use]
    pub fn is_cron(&self) -> bool {
        matches!(
            self.kind,
            ScheduleErrorKind::FieldCount
                | ScheduleErrorKind::InvalidField
                | ScheduleErrorKind::NeverFires
        )
    }

    /// `true` if the time zone was refused.
    ///
    /// # Examples
    ///
    /// ```
    /// use dlock_cron::Schedule;
    ///
    /// assert!(Schedule::new("0 12 * * *", "+02:00").unwrap_err().is_time_zone());
    /// ```
    #[must_use]
    pub fn is_time_zone(&self) -> bool {
        matches!(
            self.kind,
            ScheduleErrorKind::UnknownTimeZone | ScheduleErrorKind::FixedOffsetTimeZone
        )
    }
}

impl fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl StdError for ScheduleError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_ref()
            .map(|source| source as &(dyn StdError + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_split_into_cron_and_time_zone() {
        let cron = ScheduleError::new(ScheduleErrorKind::NeverFires, "never".into());
        assert!(cron.is_cron() && !cron.is_time_zone());
        assert_eq!(cron.to_string(), "never");
        assert!(cron.source().is_none());
        let tz = ScheduleError::new(ScheduleErrorKind::FixedOffsetTimeZone, "fixed".into());
        assert!(tz.is_time_zone() && !tz.is_cron());
        assert_eq!(tz.kind(), ScheduleErrorKind::FixedOffsetTimeZone);
    }
}
