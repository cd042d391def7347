//! Daylight-saving behaviour of `Schedule`, on the real 2026 and 2027 transitions of
//! Europe/Berlin and America/New_York (and two unusual zones): the table in `Schedule`'s docs,
//! checked row by row.
//!
//! Both zones change at 02:00 local time in spring (the wall clock jumps to 03:00) and
//! repeat an hour in autumn: Berlin repeats 02:00–02:59, New York 01:00–01:59. Every case below
//! is written against the UTC instant `t` of the change, so one test covers all four years.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use dlock_cron::Schedule;

/// A spring-forward or fall-back change: the zone, the UTC instant of the change and, for a
/// fall back, the local hour that happens twice.
#[derive(Debug, Clone, Copy)]
struct Change {
    zone: &'static str,
    at: (i32, u32, u32, u32),
    repeated_hour: u32,
}

impl Change {
    fn t(&self) -> DateTime<Utc> {
        let (y, m, d, h) = self.at;
        Utc.with_ymd_and_hms(y, m, d, h, 0, 0).unwrap()
    }
}

const SPRING: [Change; 4] = [
    Change {
        zone: "Europe/Berlin",
        at: (2026, 3, 29, 1),
        repeated_hour: 0,
    },
    Change {
        zone: "Europe/Berlin",
        at: (2027, 3, 28, 1),
        repeated_hour: 0,
    },
    Change {
        zone: "America/New_York",
        at: (2026, 3, 8, 7),
        repeated_hour: 0,
    },
    Change {
        zone: "America/New_York",
        at: (2027, 3, 14, 7),
        repeated_hour: 0,
    },
];

const FALL: [Change; 4] = [
    Change {
        zone: "Europe/Berlin",
        at: (2026, 10, 25, 1),
        repeated_hour: 2,
    },
    Change {
        zone: "Europe/Berlin",
        at: (2027, 10, 31, 1),
        repeated_hour: 2,
    },
    Change {
        zone: "America/New_York",
        at: (2026, 11, 1, 6),
        repeated_hour: 1,
    },
    Change {
        zone: "America/New_York",
        at: (2027, 11, 7, 6),
        repeated_hour: 1,
    },
];

fn min(n: i64) -> TimeDelta {
    TimeDelta::minutes(n)
}

fn hours(n: i64) -> TimeDelta {
    TimeDelta::hours(n)
}

/// The occurrences in `[from, to]` (both inclusive).
fn between(cron: &str, zone: &str, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    let schedule = Schedule::new(cron, zone).unwrap();
    let from_exclusive = from - TimeDelta::nanoseconds(1);
    schedule.occurrences_between(from_exclusive, to).collect()
}

fn offsets(t: DateTime<Utc>, instants: &[DateTime<Utc>]) -> Vec<i64> {
    instants.iter().map(|i| (*i - t).num_minutes()).collect()
}

// ---- spring forward: 02:00–02:59 does not exist --------------------------------------------

#[test]
fn spring_fixed_time_in_the_gap_fires_once_at_the_end_of_the_gap() {
    for change in SPRING {
        let t = change.t(); // 03:00 local daylight time
        let got = between("30 2 * * *", change.zone, t - hours(12), t + hours(12));
        assert_eq!(got, [t], "{change:?}");
        let schedule = Schedule::new("30 2 * * *", change.zone).unwrap();
        // The day before at 02:30 standard time, the day after at 02:30 daylight time.
        assert_eq!(
            schedule.previous_before(t),
            Some(t - min(23 * 60 + 30)),
            "{change:?}"
        );
        assert_eq!(
            schedule.next_after(t),
            Some(t + min(23 * 60 + 30)),
            "{change:?}"
        );
        assert_eq!(
            schedule.next_after(t - TimeDelta::seconds(1)),
            Some(t),
            "{change:?}"
        );
        assert_eq!(
            schedule.previous_before(t + TimeDelta::seconds(1)),
            Some(t),
            "{change:?}"
        );
    }
}

#[test]
fn spring_wall_clock_lists_and_steps_are_not_lost_but_collapse_into_one() {
    // croner alone skips these (it treats them as interval jobs); our rule runs them once.
    for cron in [
        "0,30 2 * * *",
        "*/15 2 * * *",
        "0 2,3 * * *",
        "*/10 * 2 * * *",
        "0 1-2/1 * * *",
    ] {
        for change in SPRING {
            let t = change.t();
            let got = between(cron, change.zone, t - TimeDelta::seconds(1), t + min(59));
            assert_eq!(got, [t], "{cron} {change:?}");
        }
    }
}

#[test]
fn spring_hour_before_and_after_the_gap_are_unaffected() {
    for change in SPRING {
        let t = change.t();
        assert_eq!(
            between("30 1 * * *", change.zone, t - hours(12), t + hours(12)),
            [t - min(30)],
            "{change:?}"
        );
        assert_eq!(
            between("30 3 * * *", change.zone, t - hours(12), t + hours(12)),
            [t + min(30)],
            "{change:?}"
        );
    }
}

#[test]
fn spring_interval_schedules_keep_their_real_time_rhythm() {
    for change in SPRING {
        let t = change.t();
        // Every 15 real minutes: 01:45 standard time is followed by 03:00 daylight time.
        let got = between("*/15 * * * *", change.zone, t - hours(1), t + hours(1));
        assert_eq!(
            offsets(t, &got),
            [-60, -45, -30, -15, 0, 15, 30, 45, 60],
            "{change:?}"
        );
        // 01:30 then 03:30: the 02:30 label does not exist, the hour between them does.
        let got = between("30 * * * *", change.zone, t - hours(2), t + hours(2));
        assert_eq!(offsets(t, &got), [-90, -30, 30, 90], "{change:?}");
        // Every second keeps ticking across the change.
        let got = between(
            "* * * * * *",
            change.zone,
            t - TimeDelta::seconds(2),
            t + TimeDelta::seconds(2),
        );
        assert_eq!(got.len(), 5, "{change:?}");
    }
}

// ---- fall back: one hour happens twice ------------------------------------------------------

#[test]
fn fall_fixed_time_in_the_repeated_hour_fires_once_on_the_first_pass() {
    for change in FALL {
        let t = change.t(); // the start of the second pass
        let h = change.repeated_hour;
        let cron = format!("30 {h} * * *");
        let got = between(&cron, change.zone, t - hours(12), t + hours(12));
        assert_eq!(got, [t - min(30)], "{change:?}");
        let schedule = Schedule::new(&cron, change.zone).unwrap();
        // The next day's occurrence is at the same wall time, now in standard time.
        assert_eq!(
            schedule.next_after(t - min(30)),
            Some(t + min(24 * 60 + 30)),
            "{change:?}"
        );
        // Starting inside the second pass does not fire it again.
        assert_eq!(
            schedule.next_after(t + min(10)),
            Some(t + min(24 * 60 + 30)),
            "{change:?}"
        );
        assert_eq!(
            schedule.previous_before(t + hours(20)),
            Some(t - min(30)),
            "{change:?}"
        );
    }
}

#[test]
fn fall_wall_clock_lists_and_steps_fire_on_the_first_pass_only() {
    for change in FALL {
        let t = change.t();
        let h = change.repeated_hour;
        let cron = format!("*/15 {h} * * *");
        let got = between(&cron, change.zone, t - hours(12), t + hours(12));
        assert_eq!(offsets(t, &got), [-60, -45, -30, -15], "{cron} {change:?}");

        let cron = format!("0 {}-{} * * *", h - 1, h + 1);
        let got = between(&cron, change.zone, t - hours(12), t + hours(12));
        // (h-1):00 and h:00 in daylight time, then (h+1):00 in standard time.
        assert_eq!(offsets(t, &got), [-120, -60, 60], "{cron} {change:?}");

        let cron = format!("0,30 {h} * * *");
        let schedule = Schedule::new(&cron, change.zone).unwrap();
        // From inside the first pass, the rest of the first pass, then the next day.
        assert_eq!(
            schedule.next_after(t - min(40)),
            Some(t - min(30)),
            "{change:?}"
        );
        assert_eq!(
            schedule.next_after(t - min(30)),
            Some(t + hours(24)),
            "{change:?}"
        );
        // From inside the second pass: the next day.
        assert_eq!(
            schedule.next_after(t + min(5)),
            Some(t + hours(24)),
            "{change:?}"
        );
    }
}

#[test]
fn fall_interval_schedules_fire_through_both_passes() {
    for change in FALL {
        let t = change.t();
        let got = between("*/15 * * * *", change.zone, t - hours(1), t + hours(1));
        assert_eq!(
            offsets(t, &got),
            [-60, -45, -30, -15, 0, 15, 30, 45, 60],
            "{change:?}"
        );
        let got = between("0 * * * *", change.zone, t - hours(2), t + hours(2));
        assert_eq!(offsets(t, &got), [-120, -60, 0, 60, 120], "{change:?}");
        // Starting inside the second pass continues in real time.
        let schedule = Schedule::new("*/15 * * * *", change.zone).unwrap();
        assert_eq!(
            schedule.next_after(t + min(10)),
            Some(t + min(15)),
            "{change:?}"
        );
        assert_eq!(schedule.previous_before(t + min(10)), Some(t), "{change:?}");
        assert_eq!(schedule.previous_before(t), Some(t - min(15)), "{change:?}");
    }
}

#[test]
fn fall_hour_step_schedule_is_interval_style() {
    // Berlin repeats 02:00: `0 */2 * * *` fires 00:00 CEST, 02:00 CEST, 02:00 CET, 04:00 CET.
    let change = FALL[0];
    let t = change.t();
    let got = between("0 */2 * * *", change.zone, t - hours(3), t + hours(3));
    assert_eq!(offsets(t, &got), [-180, -60, 0, 120]);
}

// ---- unusual zones --------------------------------------------------------------------------

#[test]
fn half_hour_change_in_lord_howe() {
    // Australia/Lord_Howe moves by 30 minutes: on 2026-10-04 02:00 (+10:30) becomes 02:30
    // (+11:00), i.e. at 2026-10-03T15:30Z; on 2026-04-05 02:00 (+11:00) becomes 01:30 (+10:30),
    // i.e. at 2026-04-04T15:00Z, repeating 01:30–01:59.
    let zone = "Australia/Lord_Howe";
    let gap = Utc.with_ymd_and_hms(2026, 10, 3, 15, 30, 0).unwrap();
    assert_eq!(
        between("15 2 * * *", zone, gap - hours(12), gap + hours(12)),
        [gap]
    );
    let got = between("*/15 * * * *", zone, gap - min(30), gap + min(30));
    assert_eq!(offsets(gap, &got), [-30, -15, 0, 15, 30]);

    let fold = Utc.with_ymd_and_hms(2026, 4, 4, 15, 0, 0).unwrap();
    assert_eq!(
        between("45 1 * * *", zone, fold - hours(12), fold + hours(12)),
        [fold - min(15)]
    );
    let got = between("*/15 * * * *", zone, fold - min(30), fold + min(30));
    assert_eq!(offsets(fold, &got), [-30, -15, 0, 15, 30]);
}

#[test]
fn utc_has_no_transitions() {
    let from = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    let to = Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).unwrap();
    let got = between("30 2 * * *", "UTC", from, to);
    assert_eq!(got.len(), 365);
    assert!(got.windows(2).all(|w| w[1] - w[0] == hours(24)));
}

#[test]
fn a_whole_year_of_a_wall_clock_schedule_has_one_occurrence_per_day() {
    // Every local day of 2026, including both change days, gets exactly one 02:30 occurrence.
    for zone in ["Europe/Berlin", "America/New_York"] {
        let from = Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0).unwrap();
        let to = Utc.with_ymd_and_hms(2027, 1, 1, 12, 0, 0).unwrap();
        let got = between("30 2 * * *", zone, from, to);
        assert_eq!(got.len(), 365, "{zone}");
        let tz: chrono_tz::Tz = zone.parse().unwrap();
        let mut days: Vec<_> = got
            .iter()
            .map(|o| o.with_timezone(&tz).date_naive())
            .collect();
        days.dedup();
        assert_eq!(days.len(), 365, "{zone}");
    }
}

#[test]
fn a_skipped_day_in_apia_still_fires_after_the_gap() {
    // Pacific/Apia skipped 2011-12-30 entirely: 23:59:59 on the 29th (-10:00) was followed by
    // 00:00 on the 31st (+14:00), at 2011-12-30T10:00Z. Noon on the 30th never existed; the
    // wall-clock rule runs it at the first instant after the gap. croner's own gap search stops
    // after two hours, so this checks that the rule holds for long gaps too.
    let zone = "Pacific/Apia";
    let gap_end = Utc.with_ymd_and_hms(2011, 12, 30, 10, 0, 0).unwrap();
    let got = between("0 12 * * *", zone, gap_end - hours(24), gap_end + hours(24));
    assert_eq!(offsets(gap_end, &got), [-12 * 60, 0, 12 * 60]);
}
