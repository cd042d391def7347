//! `Schedule`'s public API on ordinary (daylight-saving-free) cases: strictness, seconds,
//! weekday numbering, croner's extensions, previous/next, ranges, formatting, extremes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use dlock_cron::Schedule;
use std::time::Duration;

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap()
}

#[test]
fn next_after_is_strict_and_whole_seconds() {
    let s = Schedule::new("0 12 * * *", "UTC").unwrap();
    let noon = utc(2026, 1, 1, 12, 0, 0);
    assert_eq!(s.next_after(noon), Some(utc(2026, 1, 2, 12, 0, 0)));
    let just_before = noon - TimeDelta::nanoseconds(1);
    assert_eq!(s.next_after(just_before), Some(noon));
    let half_past = utc(2026, 1, 1, 11, 59, 59) + TimeDelta::milliseconds(500);
    assert_eq!(s.next_after(half_past), Some(noon));
}

#[test]
fn seconds_field_is_optional() {
    let s = Schedule::new("*/10 * * * * *", "UTC").unwrap();
    let t = utc(2026, 1, 1, 0, 0, 5);
    assert_eq!(s.next_after(t), Some(utc(2026, 1, 1, 0, 0, 10)));
}

#[test]
fn sunday_is_zero_and_seven() {
    // 2026-01-04 is a Sunday.
    let from = utc(2026, 1, 1, 0, 0, 0);
    for dow in ["0", "7", "SUN", "sun"] {
        let s = Schedule::new(&format!("0 0 * * {dow}"), "UTC").unwrap();
        assert_eq!(s.next_after(from), Some(utc(2026, 1, 4, 0, 0, 0)), "{dow}");
    }
}

#[test]
fn croner_extensions_work() {
    let from = utc(2026, 1, 1, 0, 0, 0);
    let cases = [
        ("0 0 L * *", utc(2026, 1, 31, 0, 0, 0)),
        ("0 0 * * 5#L", utc(2026, 1, 30, 0, 0, 0)),
        ("0 0 * * 5L", utc(2026, 1, 30, 0, 0, 0)),
        ("0 0 * * 5#3", utc(2026, 1, 16, 0, 0, 0)),
        // 2026-02-15 is a Sunday: the nearest weekday is Monday the 16th.
        ("0 0 15W 2 *", utc(2026, 2, 16, 0, 0, 0)),
        ("0 0 1 * +MON", utc(2026, 6, 1, 0, 0, 0)),
        ("0 0 ? * *", utc(2026, 1, 2, 0, 0, 0)),
        ("@monthly", utc(2026, 2, 1, 0, 0, 0)),
        ("@weekly", utc(2026, 1, 4, 0, 0, 0)),
    ];
    for (cron, expected) in cases {
        let s = Schedule::new(cron, "UTC").unwrap();
        assert_eq!(s.next_after(from), Some(expected), "{cron}");
    }
}

#[test]
fn previous_before_finds_the_last_occurrence() {
    let s = Schedule::new("0 12 * * *", "Europe/Berlin").unwrap();
    let t = utc(2026, 7, 1, 10, 0, 0); // exactly noon CEST
    assert_eq!(s.previous_before(t), Some(utc(2026, 6, 30, 10, 0, 0)));
    let t = t + TimeDelta::nanoseconds(1);
    assert_eq!(s.previous_before(t), Some(utc(2026, 7, 1, 10, 0, 0)));
    // Sparse: leap days that are Mondays (2016-02-29, then 2044-02-29).
    let leap_monday = Schedule::new("0 0 29 2 +MON", "UTC").unwrap();
    let t = utc(2040, 1, 1, 0, 0, 0);
    assert_eq!(
        leap_monday.previous_before(t),
        Some(utc(2016, 2, 29, 0, 0, 0))
    );
}

#[test]
fn occurrences_between_is_bounded_and_fused() {
    let s = Schedule::new("*/20 * * * *", "UTC").unwrap();
    let from = utc(2026, 1, 1, 0, 0, 0);
    let mut it = s.occurrences_between(from, utc(2026, 1, 1, 1, 0, 0));
    let got: Vec<_> = it.by_ref().collect();
    assert_eq!(
        got,
        [
            utc(2026, 1, 1, 0, 20, 0),
            utc(2026, 1, 1, 0, 40, 0),
            utc(2026, 1, 1, 1, 0, 0)
        ]
    );
    assert_eq!(it.next(), None);
    assert_eq!(s.occurrences_between(from, from).count(), 0);
    assert_eq!(
        s.occurrences_between(from, from - TimeDelta::hours(1))
            .count(),
        0
    );
}

#[test]
fn display_and_debug() {
    let s = Schedule::new("*/15 * * * *", "Europe/Berlin").unwrap();
    assert_eq!(s.to_string(), "`*/15 * * * *` in Europe/Berlin");
    let debug = format!("{s:?}");
    assert!(debug.contains("*/15 * * * *"), "{debug}");
    assert!(debug.contains("Europe/Berlin"), "{debug}");
    assert!(debug.contains("interval"), "{debug}");
    let s = Schedule::new("30 2 * * *", "UTC").unwrap();
    assert!(format!("{s:?}").contains("wall-clock"));
}

#[test]
fn schedules_compare_by_expression_and_zone() {
    let a = Schedule::new("0 12 * * *", "UTC").unwrap();
    assert_eq!(a.clone(), a);
    assert_ne!(a, Schedule::new("0 12 * * *", "Europe/Berlin").unwrap());
}

#[test]
fn extreme_instants_do_not_panic() {
    let s = Schedule::new("* * * * * *", "Europe/Berlin").unwrap();
    for t in [DateTime::<Utc>::MIN_UTC, DateTime::<Utc>::MAX_UTC] {
        let _ = s.next_after(t);
        let _ = s.previous_before(t);
        let _ = s.occurrences_between(t, t).count();
    }
}

#[test]
fn shortest_intervals_are_found_also_when_rare() {
    let interval = |cron| Schedule::new(cron, "UTC").unwrap().shortest_interval();
    assert_eq!(interval("* * * * * *"), Some(Duration::from_secs(1)));
    assert_eq!(interval("*/10 * * * * *"), Some(Duration::from_secs(10)));
    assert_eq!(interval("0 12 * * *"), Some(Duration::from_secs(24 * 3600)));
    // Twice an hour, unevenly: the shorter gap counts.
    assert_eq!(interval("0,10 * * * *"), Some(Duration::from_secs(600)));
    // A short gap only once a year is still found.
    assert_eq!(interval("0,1 0 1 1 *"), Some(Duration::from_secs(60)));
}
