//! Every option at once (with a trailing comma), and each `misfire` spelling.
#![deny(warnings)]

use dlock_scheduler::{JobContext, scheduled};

#[scheduled(
    name = "billing:hourly",
    cron = "0 * * * *",
    tz = "America/New_York",
    jitter = "1s500ms",
    lease = "1m",
    max_run = "2h",
    overlap = "allow",
    misfire = "catch_up(1d)",
    on_lost = "signal",
    attempts = 3,
    backoff = "500ms",
    group = "billing",
    crate = "::dlock_scheduler"
)]
async fn billing(ctx: JobContext) -> Result<(), String> {
    let _reason = ctx.lost().await;
    Ok(())
}

#[scheduled(
    name = "defaults-spelled-out",
    cron = "0 0 * * 1-5",
    tz = "UTC",
    lease = "5s",
    overlap = "skip",
    misfire = "fire_once",
    on_lost = "cancel"
)]
async fn defaults() -> Result<(), String> {
    Ok(())
}

#[scheduled(name = "settle", cron = "30 2 * * *", attempts = 5)]
async fn settle(ctx: JobContext) -> Result<(), String> {
    let _first = ctx.attempt() == 1;
    Ok(())
}

#[scheduled(name = "skip-missed", cron = "0 9 * * MON", misfire = "skip")]
async fn skip_missed() -> Result<(), String> {
    Ok(())
}

fn main() {
    let job = billing::job().unwrap();
    assert_eq!(job.name(), "billing:hourly");
    let debug = format!("{job:?}");
    for expected in [
        "overlap: Allow",
        "CatchUp { window: 86400s }",
        "jitter: 1.5s",
        "lease: 60s",
        "on_lost: Signal",
        "max_run: Some(7200s)",
        "delivery: AtLeastOnce { attempts: 3, backoff: 500ms }",
        "group: Some(\"billing\")",
    ] {
        assert!(debug.contains(expected), "{expected} in {debug}");
    }
    let debug = format!("{:?}", defaults::job().unwrap());
    assert!(
        debug.contains("misfire: FireOnce") && debug.contains("lease: 5s"),
        "{debug}"
    );
    assert!(debug.contains("delivery: AtMostOnce"), "{debug}");
    assert!(debug.contains("group: None"), "{debug}");
    let debug = format!("{:?}", settle::job().unwrap());
    assert!(
        debug.contains("delivery: AtLeastOnce { attempts: 5, backoff: 1s }"),
        "{debug}"
    );
    let debug = format!("{:?}", skip_missed::job().unwrap());
    assert!(debug.contains("misfire: Skip"), "{debug}");
}
