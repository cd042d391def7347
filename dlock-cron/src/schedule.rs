//! [`Schedule`]: a cron expression in an IANA time zone, and the instants at which it fires.
//!
//! This is the pure, Redis-free half of the scheduler. Every replica of a service computes the
//! same occurrences from the same `(cron, time zone)` pair, and the scheduler claims each one in
//! Redis under a key built from the job name and the occurrence's nominal instant in UTC. So the
//! functions here must be deterministic (no clock reads, no randomness, no dependence on the
//! machine's local time zone), and daylight-saving transitions must follow one written rule:
//! the table on [`Schedule`].
//!
//! Cron parsing and the calendar search are croner's; daylight-saving handling is croner's too,
//! adjusted where croner's classification of a schedule would drop or double an occurrence
//! (see "How this is built on croner" on [`Schedule`]). Two private modules check the input
//! before croner sees it: `fields` (cron syntax, with messages that name the offending field)
//! and `tz` (IANA names only, never fixed offsets).

use std::fmt;
use std::iter::FusedIterator;

use chrono::offset::LocalResult;
use chrono::{DateTime, NaiveDate, NaiveDateTime, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;

use crate::error::ScheduleError;
use crate::{fields, tz};

/// A cron expression evaluated in an IANA time zone.
///
/// Build one with [`Schedule::new`]; ask it for the [next occurrence](Self::next_after), the
/// [previous one](Self::previous_before) or [all occurrences in a range](Self::occurrences_between).
/// An occurrence is identified by its *nominal instant* in UTC, a whole second: the instant the
/// cron expression names, before any jitter or lateness. It is the same on every replica that
/// runs the same build (the tz database is compiled in through `chrono-tz`, so replicas must
/// agree on its version, as they do when they run one release).
///
/// # Cron syntax
///
/// Five fields `minute hour day-of-month month day-of-week`, or six with `second` first. Sunday
/// is `0` (and `7`), as in Vixie cron; names `JAN`–`DEC` and `SUN`–`SAT` work in their own
/// fields; `L` (last day of month, `5L` last Friday), `15W` (weekday nearest the 15th), `5#2`
/// (second Friday), `?` (same as `*`) and a leading `+` in day-of-week (day-of-month AND
/// day-of-week; without it either one matching is enough, as in Vixie cron) are croner's
/// extensions. Steps are `*/n` or `a-b/n` (`5/5` is refused: write `5-59/5`). The nicknames
/// `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily` and `@hourly` are accepted.
///
/// # Daylight-saving time
///
/// What happens to a wall-clock time that a daylight-saving change skips or repeats depends on
/// the **hour field** only:
///
/// - an *interval* schedule has an hour field that starts with `*` (`*`, `*/2`), such as
///   `*/15 * * * *` or `0 * * * *`: it is about elapsed time, so it keeps its rhythm in real time;
/// - a *wall-clock* schedule has any other hour field (`2`, `1-3`, `9,17`), such as
///   `30 2 * * *` or `*/15 2 * * *`: it is about the time on the clock, so each wall-clock time
///   fires once a day, never twice and never zero times.
///
/// | situation | interval schedule (hour `*`, `*/n`) | wall-clock schedule (any other hour) |
/// |---|---|---|
/// | normal day | every matching wall-clock time fires once | every matching wall-clock time fires once |
/// | **spring forward** (gap): the wall-clock time does not exist that day, e.g. 02:30 in Europe/Berlin on the last Sunday of March | skipped: the clock jumps over it, the rhythm goes on (`*/15`: 01:45 CET then 03:00 CEST, 15 real minutes apart) | fires **once, at the first instant after the gap** (03:00 CEST = 01:00 UTC); several skipped times (`0,30 2 * * *`) collapse into that one occurrence, which is also the same as a 03:00 occurrence if the schedule has one |
/// | **fall back** (repeat): the wall-clock time happens twice, e.g. 02:30 in Europe/Berlin on the last Sunday of October | fires **on both passes** (`*/15` keeps firing every 15 real minutes through the repeated hour) | fires **once, on the first pass** (02:30 CEST = 00:30 UTC); the second pass (02:30 CET) is not an occurrence |
///
/// This is Vixie cron's rule with one deliberate difference: Vixie also treats a `*` *minute*
/// field as interval-style, so `*/15 2 * * *` would run eight times on a fall-back night and not
/// at all on a spring-forward night; here it runs four times and once (at 03:00). An occurrence
/// is never silently lost: a wall-clock schedule's skipped times run after the gap, and an
/// interval schedule has no skipped *time* (only skipped labels).
///
/// ## How this is built on croner
///
/// croner documents the same two behaviours but classifies schedules differently: it calls a
/// schedule *fixed-time* only when second, minute and hour are each a single value, and treats
/// every other schedule as interval-style. For `30 2 * * *` or `0 * * * *` both rules agree and
/// croner's answer is used as is. For wall-clock schedules that croner calls interval-style
/// (`0,30 2 * * *`, `*/15 2 * * *`, `0 1-3 * * *`) croner would skip the gap entirely (a lost
/// run) and fire the repeated hour twice; [`next_after`](Self::next_after) drops croner's
/// second-pass answers for them and adds the after-the-gap occurrence that croner skipped.
///
/// # Examples
///
/// ```
/// use chrono::{TimeZone, Utc};
/// use dlock_cron::Schedule;
///
/// let noon = Schedule::new("0 12 * * *", "Europe/Berlin")?;
/// assert_eq!(noon.to_string(), "`0 12 * * *` in Europe/Berlin");
///
/// // Noon in Berlin is 11:00 UTC in winter and 10:00 UTC in summer.
/// let winter = Utc.with_ymd_and_hms(2026, 1, 15, 9, 0, 0).unwrap();
/// assert_eq!(noon.next_after(winter), Some(Utc.with_ymd_and_hms(2026, 1, 15, 11, 0, 0).unwrap()));
/// let summer = Utc.with_ymd_and_hms(2026, 7, 15, 9, 0, 0).unwrap();
/// assert_eq!(noon.next_after(summer), Some(Utc.with_ymd_and_hms(2026, 7, 15, 10, 0, 0).unwrap()));
///
/// // Spring forward: 02:30 does not exist on 2026-03-29 in Berlin; it runs at 03:00 CEST.
/// let nightly = Schedule::new("30 2 * * *", "Europe/Berlin")?;
/// let saturday = Utc.with_ymd_and_hms(2026, 3, 28, 12, 0, 0).unwrap();
/// assert_eq!(nightly.next_after(saturday), Some(Utc.with_ymd_and_hms(2026, 3, 29, 1, 0, 0).unwrap()));
/// # Ok::<(), dlock_cron::ScheduleError>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Schedule {
    /// The expression as the caller wrote it (shown in messages and `Display`).
    expression: String,
    time_zone: Tz,
    cron: Cron,
    /// The hour field does not start with `*`: the "wall-clock" column of the DST table.
    wall_clock: bool,
}

impl Schedule {
    /// Parses a cron expression and an IANA time-zone name.
    ///
    /// The expression has 5 fields (minute precision) or 6 (seconds first), or is a nickname
    /// such as `@daily`; see [`Schedule`] for the syntax. The time zone must be an IANA name
    /// such as `Europe/Berlin`, `America/New_York` or `UTC`, matched case-sensitively.
    ///
    /// # Errors
    ///
    /// A [`ScheduleError`] whose message quotes the input and says how to fix it:
    /// - [`FieldCount`](crate::ScheduleErrorKind::FieldCount): not 5 or 6 fields (a year field
    ///   is not supported), or empty;
    /// - [`InvalidField`](crate::ScheduleErrorKind::InvalidField): a field is out of range or
    ///   malformed, or the nickname is unknown (`@reboot`); the message names the field;
    /// - [`NeverFires`](crate::ScheduleErrorKind::NeverFires): valid fields that no date ever
    ///   matches (`0 0 30 2 *`);
    /// - [`UnknownTimeZone`](crate::ScheduleErrorKind::UnknownTimeZone): not in the tz database
    ///   (a close name is suggested);
    /// - [`FixedOffsetTimeZone`](crate::ScheduleErrorKind::FixedOffsetTimeZone): a fixed UTC
    ///   offset such as `+02:00`, `UTC+2`, `Etc/GMT-2` or `EST`, which would drift by an hour
    ///   across daylight-saving changes.
    ///
    /// # Examples
    ///
    /// ```
    /// use dlock_cron::{Schedule, ScheduleErrorKind};
    ///
    /// let every_second = Schedule::new("* * * * * *", "UTC")?;
    /// assert_eq!(every_second.cron(), "* * * * * *");
    ///
    /// let err = Schedule::new("0 12 * * *", "Europe/Berln").unwrap_err();
    /// assert_eq!(err.kind(), ScheduleErrorKind::UnknownTimeZone);
    /// assert!(err.to_string().contains("Europe/Berlin"));
    ///
    /// let err = Schedule::new("0 12 * * *", "UTC+2").unwrap_err();
    /// assert_eq!(err.kind(), ScheduleErrorKind::FixedOffsetTimeZone);
    /// # Ok::<(), dlock_cron::ScheduleError>(())
    /// ```
    pub fn new(cron: &str, tz: &str) -> Result<Schedule, ScheduleError> {
        let parsed = fields::parse(cron)?;
        let time_zone = tz::parse(tz)?;
        Ok(Schedule {
            expression: cron.to_owned(),
            time_zone,
            cron: parsed.cron,
            wall_clock: !parsed.hour_is_interval,
        })
    }

    /// The cron expression, exactly as given to [`Schedule::new`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dlock_cron::Schedule;
    ///
    /// assert_eq!(Schedule::new("@daily", "UTC")?.cron(), "@daily");
    /// # Ok::<(), dlock_cron::ScheduleError>(())
    /// ```
    #[must_use]
    pub fn cron(&self) -> &str {
        &self.expression
    }

    /// The time zone the expression is evaluated in.
    ///
    /// # Examples
    ///
    /// ```
    /// use dlock_cron::Schedule;
    ///
    /// let schedule = Schedule::new("0 12 * * *", "America/New_York")?;
    /// assert_eq!(schedule.time_zone(), chrono_tz::America::New_York);
    /// assert_eq!(schedule.time_zone().name(), "America/New_York");
    /// # Ok::<(), dlock_cron::ScheduleError>(())
    /// ```
    #[must_use]
    pub fn time_zone(&self) -> Tz {
        self.time_zone
    }

    /// The first occurrence strictly after `after`, as its nominal instant in UTC (a whole
    /// second), or `None` if there is none before the year 5000 (croner's calendar covers the
    /// years 1 to 4999; an `after` before that searches from the year 1).
    ///
    /// Deterministic: the answer depends only on the schedule and `after`. Chaining it
    /// (`next_after(next_after(t))`) walks the occurrences in order, through daylight-saving
    /// changes, as the table on [`Schedule`] describes.
    ///
    /// # Examples
    ///
    /// ```
    /// use chrono::{TimeZone, Utc};
    /// use dlock_cron::Schedule;
    ///
    /// let quarter_hours = Schedule::new("*/15 * * * *", "UTC")?;
    /// let t = Utc.with_ymd_and_hms(2026, 5, 1, 10, 15, 0).unwrap();
    /// // Strictly after: an occurrence equal to `after` is not returned.
    /// assert_eq!(quarter_hours.next_after(t), Some(Utc.with_ymd_and_hms(2026, 5, 1, 10, 30, 0).unwrap()));
    /// # Ok::<(), dlock_cron::ScheduleError>(())
    /// ```
    #[must_use]
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        // croner's calendar covers the years 1 to 4999 (and chrono panics on local times past
        // its own range, which croner would ask for): nothing fires outside.
        let (earliest, latest) = search_range();
        if after >= latest {
            return None;
        }
        let after = after.max(earliest);
        let mut from = after.with_timezone(&self.time_zone);
        let candidate = loop {
            let next = match self.cron.find_next_occurrence(&from, false) {
                Ok(next) => next,
                Err(_) => {
                    return self
                        .after_long_gap(&from)
                        .filter(|shifted| *shifted > after);
                }
            };
            // croner fires interval-style schedules on both passes of a repeated hour; a
            // wall-clock schedule fires only on the first. Each step moves `from` forward, and
            // only instants inside a repeated hour are skipped, so this ends.
            if self.wall_clock && is_second_pass(&next) {
                from = next;
                continue;
            }
            break next.with_timezone(&Utc);
        };
        let shifted = if self.wall_clock {
            self.gap_occurrence(after, candidate)
        } else {
            None
        };
        Some(shifted.unwrap_or(candidate))
    }

    /// The last occurrence strictly before `before`, or `None` if there is none within about
    /// 500 years (a schedule that fires at all fires at least once every 400 years).
    ///
    /// It is defined through [`next_after`](Self::next_after), so the two always agree:
    /// `next_after(previous_before(t)?)` is the first occurrence at or after `t`.
    ///
    /// # Examples
    ///
    /// ```
    /// use chrono::{TimeZone, Utc};
    /// use dlock_cron::Schedule;
    ///
    /// let noon = Schedule::new("0 12 * * *", "UTC")?;
    /// let t = Utc.with_ymd_and_hms(2026, 5, 1, 9, 0, 0).unwrap();
    /// assert_eq!(noon.previous_before(t), Some(Utc.with_ymd_and_hms(2026, 4, 30, 12, 0, 0).unwrap()));
    /// # Ok::<(), dlock_cron::ScheduleError>(())
    /// ```
    #[must_use]
    pub fn previous_before(&self, before: DateTime<Utc>) -> Option<DateTime<Utc>> {
        // `next_after` is monotone in its argument. Find `lo` with next_after(lo) < before by
        // doubling the look-back, then narrow [lo, hi] (next_after(hi) >= before) to one
        // second: occurrences are whole seconds apart, so next_after(lo) is then the last one.
        const MAX_LOOKBACK_DOUBLINGS: u32 = 34; // 2^34 s ≈ 544 years
        let found_from = |probe: DateTime<Utc>| self.next_after(probe).filter(|o| *o < before);
        let mut hi = before;
        let mut step = TimeDelta::seconds(1);
        let mut lo = None;
        for _ in 0..=MAX_LOOKBACK_DOUBLINGS {
            let probe = before.checked_sub_signed(step)?;
            if found_from(probe).is_some() {
                lo = Some(probe);
                break;
            }
            hi = probe;
            step = step.checked_mul(2)?;
        }
        let mut lo = lo?;
        while hi - lo > TimeDelta::seconds(1) {
            let mid = lo + (hi - lo) / 2;
            if found_from(mid).is_some() {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        found_from(lo)
    }

    /// The occurrences in `(from_exclusive, to_inclusive]`, oldest first.
    ///
    /// The iterator is lazy and ends at `to_inclusive`; each step is one
    /// [`next_after`](Self::next_after). It yields exactly what chaining `next_after` from
    /// `from_exclusive` yields. Misfire catch-up (`dlock_scheduler::due_occurrences`)
    /// uses it with a cap, since a fine-grained schedule over a long range is a long list.
    ///
    /// # Examples
    ///
    /// ```
    /// use chrono::{TimeZone, Utc};
    /// use dlock_cron::Schedule;
    ///
    /// let hourly = Schedule::new("@hourly", "UTC")?;
    /// let from = Utc.with_ymd_and_hms(2026, 5, 1, 10, 0, 0).unwrap();
    /// let to = Utc.with_ymd_and_hms(2026, 5, 1, 13, 0, 0).unwrap();
    /// let hours: Vec<u32> = hourly
    ///     .occurrences_between(from, to)
    ///     .map(|o| chrono::Timelike::hour(&o))
    ///     .collect();
    /// assert_eq!(hours, [11, 12, 13]);
    /// # Ok::<(), dlock_cron::ScheduleError>(())
    /// ```
    #[must_use]
    pub fn occurrences_between(
        &self,
        from_exclusive: DateTime<Utc>,
        to_inclusive: DateTime<Utc>,
    ) -> Occurrences<'_> {
        Occurrences {
            schedule: self,
            cursor: Some(from_exclusive),
            to_inclusive,
        }
    }

    /// The shortest time between two consecutive occurrences, looked for over the next
    /// 10,000 occurrences (a dense schedule shows its shortest gap within them) or 5 years (a
    /// sparse one repeats within them, leap days included), whichever comes first; `None` if
    /// it fires less than twice in that span. Used to check that a jitter cannot push an
    /// occurrence past the next one (by the scheduler at run time and by `#[scheduled]` at
    /// compile time).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use dlock_cron::Schedule;
    ///
    /// let twice_an_hour = Schedule::new("0,10 * * * *", "UTC")?;
    /// assert_eq!(twice_an_hour.shortest_interval(), Some(Duration::from_secs(600)));
    /// # Ok::<(), dlock_cron::ScheduleError>(())
    /// ```
    #[must_use]
    pub fn shortest_interval(&self) -> Option<std::time::Duration> {
        const SCAN: usize = 10_000;
        const SCAN_DAYS: i64 = 366 * 5;
        // `Utc::now` needs chrono's `clock` feature; the system clock does the same here.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?;
        let from = DateTime::<Utc>::from_timestamp(i64::try_from(now.as_secs()).ok()?, 0)?;
        let to = from.checked_add_signed(TimeDelta::days(SCAN_DAYS))?;
        let mut previous: Option<DateTime<Utc>> = None;
        let mut shortest: Option<std::time::Duration> = None;
        for occurrence in self.occurrences_between(from, to).take(SCAN) {
            if let Some(previous) = previous
                && let Ok(gap) = (occurrence - previous).to_std()
            {
                shortest = Some(shortest.map_or(gap, |s| s.min(gap)));
            }
            previous = Some(occurrence);
        }
        shortest
    }

    /// croner looks at most two hours past a wall-clock time that a gap skipped, and fails on
    /// longer gaps (Pacific/Apia skipped all of 2011-12-30). If the pattern's next wall-clock
    /// time after `from` lies in such a gap, the occurrence is the first instant after it.
    fn after_long_gap(&self, from: &DateTime<Tz>) -> Option<DateTime<Utc>> {
        if !self.wall_clock {
            return None;
        }
        let matched: NaiveDateTime = self
            .cron
            .find_next_occurrence(&from.naive_local(), false)
            .ok()?;
        match self.time_zone.from_local_datetime(&matched) {
            LocalResult::None => first_instant_after_gap(self.time_zone, matched),
            LocalResult::Single(_) | LocalResult::Ambiguous(..) => None,
        }
    }

    /// For a wall-clock schedule: the occurrence that a spring-forward gap moved to the first
    /// instant after the gap, if one lies in `(after, candidate]`.
    ///
    /// croner only does this for single-valued schedules (`30 2 * * *`) and silently skips the
    /// gap for others (`0,30 2 * * *`). Any wall-clock time that the pattern matches between
    /// `after` and croner's answer either does not exist (a gap: handled here) or is the second
    /// pass of a repeated hour (not an occurrence of a wall-clock schedule); otherwise croner
    /// would have returned it. So walking those few matches is cheap.
    fn gap_occurrence(
        &self,
        after: DateTime<Utc>,
        candidate: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        let end = candidate.with_timezone(&self.time_zone).naive_local();
        let mut wall = after.with_timezone(&self.time_zone).naive_local();
        loop {
            let matched: NaiveDateTime = self.cron.find_next_occurrence(&wall, false).ok()?;
            if matched >= end {
                return None;
            }
            if let LocalResult::None = self.time_zone.from_local_datetime(&matched) {
                let shifted = first_instant_after_gap(self.time_zone, matched)?;
                if shifted > after && shifted <= candidate {
                    return Some(shifted);
                }
            }
            wall = matched;
        }
    }
}

/// The instants `next_after` searches: croner's calendar (the years 1 to 4999), with a day to
/// spare at each end for time-zone offsets.
fn search_range() -> (DateTime<Utc>, DateTime<Utc>) {
    let midnight = |year, month, day| {
        NaiveDate::from_ymd_opt(year, month, day)
            .and_then(|date| date.and_hms_opt(0, 0, 0))
            .map(|start| start.and_utc())
    };
    (
        midnight(1, 1, 2).unwrap_or(DateTime::<Utc>::MIN_UTC),
        midnight(4999, 12, 31).unwrap_or(DateTime::<Utc>::MAX_UTC),
    )
}

/// `true` if `instant` is the later of two instants that show the same wall-clock time (the
/// second pass through an hour repeated by a fall-back change).
fn is_second_pass(instant: &DateTime<Tz>) -> bool {
    match instant
        .timezone()
        .from_local_datetime(&instant.naive_local())
    {
        LocalResult::Ambiguous(earlier, later) => earlier != later && *instant == later,
        LocalResult::Single(_) | LocalResult::None => false,
    }
}

/// The first instant whose wall-clock time is after `missing`, a wall-clock time inside a
/// spring-forward gap: the instant of the change itself (03:00 CEST for 02:30 in Berlin).
fn first_instant_after_gap(time_zone: Tz, missing: NaiveDateTime) -> Option<DateTime<Utc>> {
    // Gaps are at most a day long (Pacific/Apia skipped 2011-12-30) and start and end on whole
    // seconds. Find the first existing minute, then step back to the first existing second.
    const MAX_GAP_MINUTES: u32 = 48 * 60;
    let exists = |wall: NaiveDateTime| match time_zone.from_local_datetime(&wall) {
        LocalResult::Single(instant) | LocalResult::Ambiguous(instant, _) => Some(instant),
        LocalResult::None => None,
    };
    let mut wall = missing;
    for _ in 0..MAX_GAP_MINUTES {
        wall = wall.checked_add_signed(TimeDelta::minutes(1))?;
        if let Some(mut instant) = exists(wall) {
            for _ in 0..60 {
                let earlier = wall.checked_sub_signed(TimeDelta::seconds(1))?;
                if earlier <= missing {
                    break;
                }
                match exists(earlier) {
                    Some(earlier_instant) => {
                        wall = earlier;
                        instant = earlier_instant;
                    }
                    None => break,
                }
            }
            return Some(instant.with_timezone(&Utc));
        }
    }
    None
}

impl fmt::Debug for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            expression,
            time_zone,
            cron: _,
            wall_clock,
        } = self;
        f.debug_struct("Schedule")
            .field("cron", expression)
            .field("time_zone", &time_zone.name())
            .field(
                "dst_rule",
                &if *wall_clock {
                    "wall-clock"
                } else {
                    "interval"
                },
            )
            .finish()
    }
}

impl fmt::Display for Schedule {
    /// ``"`<cron>` in <time zone>"``, e.g. ``"`0 12 * * *` in Europe/Berlin"``.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` in {}", self.expression, self.time_zone.name())
    }
}

/// The occurrences of a [`Schedule`] in a range, oldest first: see
/// [`Schedule::occurrences_between`].
#[derive(Debug, Clone)]
pub struct Occurrences<'a> {
    schedule: &'a Schedule,
    /// The last instant handed out (or the range start); `None` once the range is exhausted.
    cursor: Option<DateTime<Utc>>,
    to_inclusive: DateTime<Utc>,
}

impl Iterator for Occurrences<'_> {
    type Item = DateTime<Utc>;

    fn next(&mut self) -> Option<DateTime<Utc>> {
        let after = self.cursor.take()?;
        let next = self
            .schedule
            .next_after(after)
            .filter(|next| *next <= self.to_inclusive)?;
        self.cursor = Some(next);
        Some(next)
    }
}

impl FusedIterator for Occurrences<'_> {}
