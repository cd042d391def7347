//! `#[scheduled]` end to end: the generated `job()` carries the attribute's name, schedule and
//! time zone, and a scheduler runs the unchanged function with a `JobContext`, recording each
//! run in the ledger. Against a real `redis-server` (dlock-testkit).

// A panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use dlock_scheduler::{JobContext, RunOutcome, Scheduler, chrono_tz, scheduled};
use dlock_testkit::RedisServer;

/// What the handler saw of one run.
#[derive(Clone, Debug)]
struct Seen {
    job: String,
    occurrence: DateTime<Utc>,
    fence: u64,
    replica: String,
}

static SEEN: Mutex<Vec<Seen>> = Mutex::new(Vec::new());
static FAILURES: AtomicUsize = AtomicUsize::new(0);

#[derive(Debug)]
struct DrawError(&'static str);

impl std::fmt::Display for DrawError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "draw failed: {}", self.0)
    }
}

/// Every second, so that a 3-second test sees a few occurrences.
#[scheduled(
    name = "macro-lottery",
    cron = "* * * * * *",
    tz = "Europe/Berlin",
    lease = "5s"
)]
async fn lottery(ctx: JobContext) -> Result<(), DrawError> {
    SEEN.lock().unwrap().push(Seen {
        job: ctx.job().to_owned(),
        occurrence: ctx.occurrence(),
        fence: ctx.fencing_token().get(),
        replica: ctx.replica().id().to_owned(),
    });
    Ok(())
}

/// No context, and an error: its `Display` text goes into the ledger.
#[scheduled(name = "macro-failing", cron = "* * * * * *", misfire = "skip")]
async fn failing() -> Result<(), DrawError> {
    FAILURES.fetch_add(1, Ordering::SeqCst);
    Err(DrawError("no tickets sold"))
}

#[test]
fn job_carries_the_attribute() {
    let job = lottery::job().unwrap();
    assert_eq!(job.name(), "macro-lottery");
    assert_eq!(job.schedule().unwrap().cron(), "* * * * * *");
    assert_eq!(
        job.schedule().unwrap().time_zone(),
        chrono_tz::Europe::Berlin
    );
    let job = failing::job().unwrap();
    assert_eq!(job.name(), "macro-failing");
    // `tz` defaults to UTC.
    assert_eq!(job.schedule().unwrap().time_zone(), chrono_tz::UTC);
}

#[tokio::test]
async fn the_scheduler_runs_the_function_and_records_it() {
    let server = RedisServer::start().unwrap();
    let client = dlock_core::Client::open(server.url()).unwrap();
    let scheduler = Scheduler::builder(client)
        .replica_id("macro-test")
        .job(lottery::job().unwrap())
        .job(failing::job().unwrap())
        .build()
        .unwrap();
    let report = scheduler
        .run_until(
            tokio::time::sleep(Duration::from_millis(3_200)),
            Duration::from_secs(5),
        )
        .await;
    assert_eq!(report.cancelled, 0, "{report:?}");

    let seen = SEEN.lock().unwrap().clone();
    assert!(
        seen.len() >= 2,
        "a 1-second job ran {} times in 3.2 s",
        seen.len()
    );
    for run in &seen {
        assert_eq!(run.job, "macro-lottery");
        assert_eq!(run.replica, "macro-test");
        assert!(run.fence > 0);
        let occurrence = run.occurrence;
        assert_eq!(
            occurrence.timestamp_subsec_millis(),
            0,
            "a nominal instant: {occurrence}"
        );
    }
    // Fencing tokens grow with every run; each occurrence ran once.
    let fences: Vec<u64> = seen.iter().map(|run| run.fence).collect();
    assert!(fences.windows(2).all(|w| w[0] < w[1]), "{fences:?}");
    let occurrences: BTreeSet<_> = seen.iter().map(|run| run.occurrence).collect();
    assert_eq!(occurrences.len(), seen.len(), "{seen:?}");

    // The ledger agrees with what the handler saw.
    let history = scheduler.history("macro-lottery").await.unwrap();
    let recorded: BTreeSet<_> = history
        .iter()
        .filter(|run| run.outcome == RunOutcome::Succeeded)
        .map(|run| run.occurrence)
        .collect();
    assert_eq!(recorded, occurrences, "{history:?}");
    for run in &history {
        assert_eq!(run.replica, "macro-test");
        assert!(!run.manual);
    }

    let failures = FAILURES.load(Ordering::SeqCst);
    assert!(failures >= 2, "the failing job ran {failures} times");
    let history = scheduler.history("macro-failing").await.unwrap();
    assert_eq!(history.len(), failures, "{history:?}");
    for run in &history {
        assert_eq!(
            run.outcome,
            RunOutcome::Failed("draw failed: no tickets sold".to_owned())
        );
    }
}
