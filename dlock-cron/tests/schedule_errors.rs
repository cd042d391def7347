//! What `Schedule::new` refuses, and that every refusal says what is wrong and how to fix it.
//!
//! Messages are part of the user interface (they reach whoever typed the cron string), so the
//! important ones are pinned word for word.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::error::Error as _;

use dlock_cron::{Schedule, ScheduleError, ScheduleErrorKind};

fn cron_err(cron: &str) -> ScheduleError {
    match Schedule::new(cron, "UTC") {
        Ok(schedule) => panic!("`{cron}` was accepted: {schedule:?}"),
        Err(err) => err,
    }
}

fn tz_err(tz: &str) -> ScheduleError {
    match Schedule::new("0 12 * * *", tz) {
        Ok(schedule) => panic!("`{tz}` was accepted: {schedule:?}"),
        Err(err) => err,
    }
}

#[test]
fn field_count_messages() {
    assert_eq!(
        cron_err("0 12 * *").to_string(),
        "cron expression `0 12 * *` has 4 fields; expected 5 (minute hour day-of-month month \
         day-of-week) or 6 (with seconds first)"
    );
    assert_eq!(
        cron_err("0 0 12 * * * 2026").to_string(),
        "cron expression `0 0 12 * * * 2026` has 7 fields; expected 5 (minute hour day-of-month \
         month day-of-week) or 6 (with seconds first); a year field is not supported"
    );
    assert!(cron_err("").to_string().contains("is empty"));
    assert!(cron_err("   ").to_string().contains("is empty"));
    assert!(cron_err("*").to_string().contains("has 1 field;"));
    for cron in ["", "*", "0 12 * *", "0 0 12 * * * 2026", "1 2 3 4 5 6 7 8"] {
        assert_eq!(
            cron_err(cron).kind(),
            ScheduleErrorKind::FieldCount,
            "{cron}"
        );
    }
}

#[test]
fn invalid_fields_are_named_with_what_they_accept() {
    let cases = [
        ("61 * * * *", "the minute field `61` is invalid", "0-59"),
        ("0 24 * * *", "the hour field `24` is invalid", "0-23"),
        (
            "0 0 32 * *",
            "the day-of-month field `32` is invalid",
            "1-31",
        ),
        ("0 0 * 13 *", "the month field `13` is invalid", "JAN-DEC"),
        (
            "0 0 * * 8",
            "the day-of-week field `8` is invalid",
            "SUN-SAT",
        ),
        ("60 0 0 * * *", "the second field `60` is invalid", "0-59"),
        ("5/5 * * * *", "the minute field `5/5` is invalid", "*/5"),
        ("*/0 * * * *", "the minute field `*/0` is invalid", "0-59"),
        (
            "0 0 * MON *",
            "the month field `MON` contains `MON`",
            "JAN-DEC",
        ),
        (
            "0 0 * * JAN",
            "the day-of-week field `JAN` contains `JAN`",
            "SUN-SAT",
        ),
        (
            "0 0 * * MONDAY",
            "the day-of-week field `MONDAY` contains `MONDAY`",
            "SUN-SAT",
        ),
        (
            "0 0 L * W",
            "the day-of-week field `W` contains `W`",
            "SUN-SAT",
        ),
        ("0 x * * *", "the hour field `x` contains `x`", "0-23"),
        ("0 ０ * * *", "the hour field `０` contains `０`", "0-23"),
        ("0 12 * * * ?", "", ""),
    ];
    for (cron, fragment, accepts) in cases {
        if fragment.is_empty() {
            // Six fields with `?` in day-of-week: valid.
            assert!(Schedule::new(cron, "UTC").is_ok(), "{cron}");
            continue;
        }
        let err = cron_err(cron);
        let message = err.to_string();
        assert_eq!(
            err.kind(),
            ScheduleErrorKind::InvalidField,
            "{cron}: {message}"
        );
        assert!(
            message.starts_with(&format!("cron expression `{cron}`: ")),
            "{message}"
        );
        assert!(message.contains(fragment), "{cron}: {message}");
        assert!(message.contains(accepts), "{cron}: {message}");
    }
    // croner's own explanation is kept, and its error is the source.
    let err = cron_err("5/5 * * * *");
    assert!(err.to_string().contains("X-Y/5"), "{err}");
    assert!(err.source().is_some());
}

#[test]
fn unknown_nicknames_list_the_known_ones() {
    let err = cron_err("@reboot");
    assert_eq!(err.kind(), ScheduleErrorKind::InvalidField);
    assert_eq!(
        err.to_string(),
        "unknown cron nickname `@reboot`; use one of @yearly, @annually, @monthly, @weekly, \
         @daily, @hourly, or write 5 (minute hour day-of-month month day-of-week) or 6 (with \
         seconds first) fields"
    );
    assert_eq!(cron_err("@daily 0").kind(), ScheduleErrorKind::InvalidField);
    assert_eq!(
        cron_err("0 @ * * *").kind(),
        ScheduleErrorKind::InvalidField
    );
    for nickname in [
        "@yearly",
        "@annually",
        "@monthly",
        "@weekly",
        "@daily",
        "@hourly",
        "@DAILY",
        " @daily ",
    ] {
        assert!(Schedule::new(nickname, "UTC").is_ok(), "{nickname}");
    }
}

#[test]
fn patterns_that_never_match_are_refused() {
    for cron in [
        "0 0 30 2 *",
        "0 0 31 4 *",
        "0 0 30W 2 *",
        "0 0 31 2,4,6,9,11 *",
    ] {
        let err = cron_err(cron);
        assert_eq!(err.kind(), ScheduleErrorKind::NeverFires, "{cron}");
        assert!(err.to_string().contains("never fires"), "{err}");
        assert!(err.is_cron());
    }
    // Rare is not never: leap days, and leap days that are Mondays.
    assert!(Schedule::new("0 0 29 2 *", "UTC").is_ok());
    assert!(Schedule::new("0 0 29 2 +MON", "UTC").is_ok());
    // Without `+`, day-of-month OR day-of-week: Fridays in February, plus the (never) 30th.
    assert!(Schedule::new("0 0 30 2 FRI", "UTC").is_ok());
}

#[test]
fn time_zones_must_be_iana_names() {
    for tz in [
        "UTC",
        "Etc/UTC",
        "GMT",
        "Etc/GMT",
        "Europe/Berlin",
        "America/New_York",
        "Asia/Kolkata",
        "Australia/Lord_Howe",
        "CET",
        "EST5EDT",
    ] {
        let schedule = Schedule::new("0 12 * * *", tz).unwrap();
        assert_eq!(schedule.time_zone().name(), tz);
    }
}

#[test]
fn unknown_time_zones_suggest_a_name() {
    assert_eq!(
        tz_err("Europe/Berln").to_string(),
        "unknown time zone `Europe/Berln` (did you mean `Europe/Berlin`?); use an IANA name such \
         as `Europe/Berlin` or `UTC`"
    );
    assert_eq!(
        tz_err("Mars/Olympus_Mons").to_string(),
        "unknown time zone `Mars/Olympus_Mons`; use an IANA name such as `Europe/Berlin` or `UTC`"
    );
    let cases = [
        ("europe/berlin", Some("Europe/Berlin")),
        ("America/NewYork", Some("America/New_York")),
        ("PST", Some("America/Los_Angeles")),
        ("CEST", Some("Europe/Berlin")),
        ("Z", Some("UTC")),
        (" UTC", Some("UTC")),
        ("", None),
    ];
    for (tz, suggestion) in cases {
        let err = tz_err(tz);
        assert_eq!(err.kind(), ScheduleErrorKind::UnknownTimeZone, "{tz}");
        assert!(err.is_time_zone());
        let message = err.to_string();
        assert!(message.contains("`Europe/Berlin` or `UTC`"), "{message}");
        if let Some(name) = suggestion {
            assert!(
                message.contains(&format!("did you mean `{name}`?")),
                "{message}"
            );
        }
    }
}

#[test]
fn fixed_offsets_are_refused_with_the_reason() {
    let err = tz_err("+02:00");
    assert_eq!(
        err.to_string(),
        "time zone `+02:00` is a fixed UTC offset; fixed offsets drift by an hour across \
         daylight-saving changes, so the job would run an hour off for part of the year; use the \
         IANA name of the place, such as `Europe/Berlin` or `America/New_York`, or `UTC`"
    );
    for tz in [
        "+02:00",
        "-0500",
        "UTC+2",
        "UTC-05:00",
        "GMT+1",
        "utc +02:00",
        "Etc/GMT-2",
        "Etc/GMT+5",
        "EST",
        "MST",
        "HST",
    ] {
        let err = tz_err(tz);
        assert_eq!(
            err.kind(),
            ScheduleErrorKind::FixedOffsetTimeZone,
            "{tz}: {err}"
        );
        assert!(err.to_string().contains("Europe/Berlin"), "{err}");
    }
    assert!(tz_err("Etc/GMT-2").to_string().contains("means UTC+2"));
    assert!(tz_err("EST").to_string().contains("America/New_York"));
    // Zero offsets are UTC under another name: fine.
    for tz in ["Etc/GMT+0", "Etc/GMT-0", "GMT0"] {
        assert!(Schedule::new("0 12 * * *", tz).is_ok(), "{tz}");
    }
}

#[test]
fn the_cron_is_checked_before_the_time_zone() {
    let err = Schedule::new("61 * * * *", "Nowhere/Special").unwrap_err();
    assert!(err.is_cron());
}
