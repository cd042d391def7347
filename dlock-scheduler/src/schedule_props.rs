//! Property tests for the pure scheduling math: `Schedule` (next/previous occurrence, ranges,
//! daylight-saving rules), which occurrences are due (`misfire`) and `jitter_for`, over
//! generated cron expressions, time zones with unusual transitions, and instants in 2024–2031.
//! In the crate (`#[cfg(test)]`) because the misfire math is private to it. Regressions are
//! kept in `proptest-regressions/schedule_props.txt`.

use std::time::Duration;

use chrono::{DateTime, Datelike, LocalResult, TimeDelta, TimeZone, Timelike, Utc};
use dlock_cron::Schedule;

use crate::jitter::jitter_for;
use crate::misfire::{MAX_DUE, MisfirePolicy, due_occurrences};
use proptest::prelude::*;
use proptest::sample::select;

/// Zones with DST (both hemispheres), 30- and 45-minute offsets and changes, and none.
const ZONES: &[&str] = &[
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Sydney",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
    "America/Santiago",
    "Asia/Kolkata",
    "Europe/London",
];

fn cron_expression() -> impl Strategy<Value = String> {
    let second = select(vec!["", "0 ", "30 ", "*/20 ", "0,45 "]);
    let minute = select(vec!["0", "30", "*/15", "0,30", "*", "5-20/5", "59", "45"]);
    let hour = select(vec![
        "*", "*/2", "*/5", "2", "1,2", "1-3", "0", "23", "9-17", "3",
    ]);
    let day_of_month = select(vec!["*", "*", "1", "15", "L", "1,15", "10-20", "15W"]);
    let month = select(vec!["*", "*", "3", "3,4,10,11", "*/2", "OCT"]);
    let day_of_week = select(vec!["*", "*", "0", "7", "1-5", "5L", "0#1", "SAT,SUN"]);
    (second, minute, hour, day_of_month, month, day_of_week)
        .prop_map(|(s, mi, h, dom, mo, dow)| format!("{s}{mi} {h} {dom} {mo} {dow}"))
}

fn schedule() -> impl Strategy<Value = Schedule> {
    (cron_expression(), select(ZONES)).prop_map(|(cron, zone)| Schedule::new(&cron, zone).unwrap())
}

/// An instant between 2024 and 2031, with sub-second noise half of the time.
fn instant() -> impl Strategy<Value = DateTime<Utc>> {
    let start = Utc
        .with_ymd_and_hms(2024, 1, 1, 0, 0, 0)
        .unwrap()
        .timestamp();
    let end = Utc
        .with_ymd_and_hms(2031, 1, 1, 0, 0, 0)
        .unwrap()
        .timestamp();
    (start..end, prop_oneof![Just(0_u32), 0..1_000_000_000_u32])
        .prop_map(|(secs, nanos)| DateTime::from_timestamp(secs, nanos).unwrap())
}

/// The instants (to the hour) at which `zone`'s UTC offset changes in `year`.
fn transitions(zone: &str, year: i32) -> Vec<DateTime<Utc>> {
    let tz: chrono_tz::Tz = zone.parse().unwrap();
    let offset = |t: DateTime<Utc>| t.with_timezone(&tz).naive_local() - t.naive_utc();
    let mut t = Utc.with_ymd_and_hms(year, 1, 1, 0, 0, 0).unwrap();
    let mut found = Vec::new();
    while t.year() == year {
        let next = t + TimeDelta::hours(1);
        if offset(next) != offset(t) {
            found.push(next);
        }
        t = next;
    }
    found
}

/// A zone and an instant within two days (half of the time: three hours) of one of its offset changes (or any instant, for a
/// zone without changes): where the daylight-saving rules are exercised.
fn zone_and_instant_near_a_change() -> impl Strategy<Value = (&'static str, DateTime<Utc>)> {
    let offset_secs = prop_oneof![-10_800_i64..10_800, -172_800_i64..172_800];
    (
        select(ZONES),
        2024_i32..2031,
        any::<prop::sample::Index>(),
        offset_secs,
    )
        .prop_map(|(zone, year, index, offset_secs)| {
            let changes = transitions(zone, year);
            let base = if changes.is_empty() {
                Utc.with_ymd_and_hms(year, 6, 1, 0, 0, 0).unwrap()
            } else {
                changes[index.index(changes.len())]
            };
            (zone, base + TimeDelta::seconds(offset_secs))
        })
}

fn schedule_near_a_change() -> impl Strategy<Value = (Schedule, DateTime<Utc>)> {
    (cron_expression(), zone_and_instant_near_a_change())
        .prop_map(|(cron, (zone, t))| (Schedule::new(&cron, zone).unwrap(), t))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn near_changes_next_after_is_increasing_and_monotone(
        (schedule, t) in schedule_near_a_change(),
        gap_secs in 0_i64..7200,
    ) {
        let mut previous = t;
        for _ in 0..24 {
            let next = schedule.next_after(previous).unwrap();
            prop_assert!(next > previous, "{schedule}: {next} after {previous}");
            previous = next;
        }
        let later = t + TimeDelta::seconds(gap_secs);
        let (from_t, from_later) = (schedule.next_after(t).unwrap(), schedule.next_after(later).unwrap());
        prop_assert!(from_t <= from_later, "{schedule}: {t} -> {from_t}, {later} -> {from_later}");
        if from_t > later {
            prop_assert_eq!(from_t, from_later);
        }
        let previous = schedule.previous_before(t).unwrap();
        prop_assert!(previous < t && schedule.next_after(previous).unwrap() >= t);
    }

    #[test]
    fn near_changes_daily_wall_clock_times_fire_once_a_day(
        minute in 0_u32..60,
        hour in 0_u32..24,
        (zone, t) in zone_and_instant_near_a_change(),
    ) {
        // Never lost, never doubled: consecutive occurrences of a daily time are a day apart,
        // give or take the change (at most an hour here; Lord Howe's is half an hour).
        let schedule = Schedule::new(&format!("{minute} {hour} * * *"), zone).unwrap();
        let occurrences: Vec<_> =
            schedule.occurrences_between(t - TimeDelta::days(2), t + TimeDelta::days(2)).collect();
        prop_assert!(occurrences.len() >= 3);
        for pair in occurrences.windows(2) {
            let apart = pair[1] - pair[0];
            prop_assert!(
                apart >= TimeDelta::hours(22) && apart <= TimeDelta::hours(26),
                "{}: {} then {}", schedule, pair[0], pair[1]
            );
        }
    }

    #[test]
    fn near_changes_wall_clock_schedules_never_repeat_a_wall_time(
        (schedule, t) in schedule_near_a_change(),
    ) {
        // A schedule whose hour field does not start with `*` fires each wall-clock time at
        // most once; an interval schedule keeps real-time order through repeated hours.
        let hour_field = schedule.cron().split_whitespace().rev().nth(3).unwrap().to_owned();
        let tz = schedule.time_zone();
        let mut walls: Vec<_> = schedule
            .occurrences_between(t - TimeDelta::hours(3), t + TimeDelta::hours(3))
            .take(2000)
            .map(|o| o.with_timezone(&tz).naive_local())
            .collect();
        if !hour_field.starts_with('*') {
            let count = walls.len();
            walls.sort();
            walls.dedup();
            prop_assert_eq!(walls.len(), count, "{} repeated a wall time", schedule);
        }
    }

    #[test]
    fn near_changes_wall_clock_lists_lose_no_day_and_repeat_no_time(
        minutes in select(vec!["0,30", "*/15", "*/20", "15-45/15", "0"]),
        first_hour in 0_u32..4,
        shape in 0_usize..3,
        (zone, t) in zone_and_instant_near_a_change(),
    ) {
        // Lists and steps that croner alone would skip in a gap and run twice in a fold.
        let hours = match shape {
            0 => first_hour.to_string(),
            1 => format!("{first_hour},{}", first_hour + 1),
            _ => format!("{first_hour}-{}", first_hour + 2),
        };
        let schedule = Schedule::new(&format!("{minutes} {hours} * * *"), zone).unwrap();
        let tz = schedule.time_zone();
        let occurrences: Vec<_> =
            schedule.occurrences_between(t - TimeDelta::days(2), t + TimeDelta::days(2)).collect();
        let mut walls: Vec<_> =
            occurrences.iter().map(|o| o.with_timezone(&tz).naive_local()).collect();
        let count = walls.len();
        walls.sort();
        walls.dedup();
        prop_assert_eq!(walls.len(), count, "{} repeated a wall time", schedule);
        // Every local date strictly inside the window has an occurrence.
        let first_day = (t - TimeDelta::days(1)).with_timezone(&tz).date_naive();
        let last_day = (t + TimeDelta::days(1)).with_timezone(&tz).date_naive();
        for day in first_day.iter_days().take_while(|d| *d <= last_day).skip(1) {
            prop_assert!(walls.iter().any(|w| w.date() == day), "{}: nothing on {}", schedule, day);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn next_after_is_strictly_increasing_and_chains(schedule in schedule(), t in instant()) {
        let mut previous = t;
        for _ in 0..12 {
            let next = schedule.next_after(previous).unwrap();
            prop_assert!(next > previous, "{schedule}: {next} after {previous}");
            prop_assert_eq!(next.nanosecond(), 0);
            prop_assert!(schedule.next_after(next).unwrap() > next);
            previous = next;
        }
    }

    #[test]
    fn occurrences_between_agrees_with_chained_next_after(
        schedule in schedule(),
        t in instant(),
        span_hours in 1_i64..72,
    ) {
        let end = t + TimeDelta::hours(span_hours);
        let listed: Vec<_> = schedule.occurrences_between(t, end).take(500).collect();
        let mut chained = Vec::new();
        let mut cursor = t;
        while let Some(next) = schedule.next_after(cursor).filter(|n| *n <= end) {
            if chained.len() == 500 {
                break;
            }
            chained.push(next);
            cursor = next;
        }
        prop_assert_eq!(listed, chained);
    }

    #[test]
    fn next_after_is_monotone_in_its_argument(
        schedule in schedule(),
        t in instant(),
        gap_secs in 0_i64..(3 * 86_400),
    ) {
        // The occurrences form one set: starting later never yields an earlier occurrence, and
        // starting anywhere before an occurrence yields that same occurrence.
        let later = t + TimeDelta::seconds(gap_secs);
        let from_t = schedule.next_after(t).unwrap();
        let from_later = schedule.next_after(later).unwrap();
        prop_assert!(from_t <= from_later, "{schedule}: {t} -> {from_t}, {later} -> {from_later}");
        if from_t > later {
            prop_assert_eq!(from_t, from_later);
        }
    }

    #[test]
    fn previous_before_is_the_inverse_of_next_after(schedule in schedule(), t in instant()) {
        let previous = schedule.previous_before(t).unwrap();
        prop_assert!(previous < t);
        let next = schedule.next_after(previous).unwrap();
        prop_assert!(next >= t, "{schedule}: previous_before({t}) = {previous}, next {next}");
    }

    #[test]
    fn hourly_occurrences_are_on_the_hour_in_their_zone(zone in select(ZONES), t in instant()) {
        let schedule = Schedule::new("0 * * * *", zone).unwrap();
        let tz = schedule.time_zone();
        for occurrence in schedule.occurrences_between(t, t + TimeDelta::hours(30)) {
            let local = occurrence.with_timezone(&tz);
            prop_assert_eq!((local.minute(), local.second()), (0, 0), "{}", local);
        }
    }

    #[test]
    fn wall_clock_occurrences_match_or_follow_a_gap(
        minute in 0_u32..60,
        hour in 0_u32..24,
        zone in select(ZONES),
        t in instant(),
    ) {
        // Each occurrence is at the wall-clock time the expression names, on its first pass,
        // or is the first instant after a gap that swallowed that time. One per local day.
        let schedule = Schedule::new(&format!("{minute} {hour} * * *"), zone).unwrap();
        let tz = schedule.time_zone();
        let occurrences: Vec<_> = schedule.occurrences_between(t, t + TimeDelta::days(5)).collect();
        prop_assert!(occurrences.len() >= 4);
        for occurrence in &occurrences {
            let local = occurrence.with_timezone(&tz);
            let named = (local.hour(), local.minute(), local.second()) == (hour, minute, 0);
            let before = (*occurrence - TimeDelta::seconds(1)).with_timezone(&tz);
            let after_gap = local.naive_local() - before.naive_local() > TimeDelta::seconds(1);
            prop_assert!(named || after_gap, "{schedule}: {local}");
            if named {
                let first_pass = match tz.from_local_datetime(&local.naive_local()) {
                    LocalResult::Ambiguous(earlier, _) => earlier == local,
                    _ => true,
                };
                prop_assert!(first_pass, "{schedule}: second pass {local}");
            }
        }
        let mut days: Vec<_> =
            occurrences.iter().map(|o| o.with_timezone(&tz).date_naive()).collect();
        let count = days.len();
        days.dedup();
        prop_assert_eq!(days.len(), count, "{}: two occurrences on one day", schedule);
    }

    #[test]
    fn due_occurrences_are_sorted_bounded_and_real(
        schedule in schedule(),
        last_seen in instant(),
        late_secs in 0_i64..(2 * 86_400),
        window_secs in 0_u64..86_400,
    ) {
        let now = last_seen + TimeDelta::seconds(late_secs);
        let window = Duration::from_secs(window_secs);
        let skip = due_occurrences(&schedule, Some(last_seen), now, MisfirePolicy::Skip);
        let once = due_occurrences(&schedule, Some(last_seen), now, MisfirePolicy::FireOnce);
        let catch_up =
            due_occurrences(&schedule, Some(last_seen), now, MisfirePolicy::CatchUp { window });
        for due in [&skip, &once, &catch_up] {
            prop_assert!(due.len() <= MAX_DUE);
            prop_assert!(due.windows(2).all(|w| w[0] < w[1]));
            for occurrence in due.iter() {
                prop_assert!(*occurrence > last_seen && *occurrence <= now);
                let just_before = *occurrence - TimeDelta::nanoseconds(1);
                prop_assert_eq!(schedule.next_after(just_before), Some(*occurrence));
            }
        }
        // FireOnce adds at most one (missed) occurrence to Skip's on-time ones.
        prop_assert!(skip.iter().all(|o| once.contains(o)));
        prop_assert!(once.len() <= skip.len() + 1);
        // Start-up: only on-time occurrences, whatever the policy.
        prop_assert_eq!(
            due_occurrences(&schedule, None, now, MisfirePolicy::FireOnce),
            due_occurrences(&schedule, None, now, MisfirePolicy::Skip)
        );
    }

    #[test]
    fn jitter_is_in_range_and_deterministic(
        name in ".{0,40}",
        t in instant(),
        max_nanos in 1_u64..u64::MAX,
    ) {
        let max = Duration::from_nanos(max_nanos);
        let jitter = jitter_for(&name, t, max);
        prop_assert!(jitter < max);
        prop_assert_eq!(jitter, jitter_for(&name, t, max));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_strings_never_panic(cron in any::<String>(), zone in any::<String>()) {
        if let Err(err) = Schedule::new(&cron, &zone) {
            prop_assert!(!err.to_string().is_empty());
        }
    }

    #[test]
    fn cron_like_strings_never_panic(
        cron in "[0-9*,/#LW?+@ A-Za-z-]{0,30}",
        zone in select(ZONES),
        t in instant(),
    ) {
        // Strings from cron's own alphabet reach croner far more often than arbitrary text.
        if let Ok(schedule) = Schedule::new(&cron, zone) {
            let next = schedule.next_after(t);
            prop_assert!(next.is_none_or(|n| n > t));
        }
    }
}
