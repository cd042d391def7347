//! What the scheduler records and reports: a panicking handler is `Failed` with its panic
//! message (also when the closure panics before returning its future); job names are checked by
//! `build()` and by every control call; jitter is checked against the schedule's interval;
//! Redis errors keep dlock-core's kind, predicates and error.

use std::error::Error as _;
use std::future::Ready;
use std::time::Duration;

use dlock_scheduler::{ErrorKind, Job, JobContext, RunOutcome, RunRecord, Scheduler};

use crate::support::{client, eventually, redis};

fn panics_in_its_future(job: &str) -> Job {
    Job::new(job, "* * * * * *", "UTC", |ctx: JobContext| async move {
        if ctx.job() == "in-future" {
            panic!("boom {}", 40 + 2);
        }
        Ok::<(), String>(())
    })
    .unwrap()
}

/// A handler that panics while making its future, not inside it.
fn panics_before_its_future(ctx: JobContext) -> Ready<Result<(), String>> {
    if ctx.job() == "before-future" {
        panic!("no future for {}", ctx.job());
    }
    std::future::ready(Ok(()))
}

async fn first_end(scheduler: &Scheduler, job: &str) -> Option<RunRecord> {
    let history = scheduler.history(job).await.ok()?;
    history
        .into_iter()
        .find(|r| !matches!(r.outcome, RunOutcome::Running))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_is_recorded_failed_with_its_message() {
    let server = redis();
    let scheduler = Scheduler::builder(client(&server))
        .job(panics_in_its_future("in-future"))
        .job(
            Job::new(
                "before-future",
                "* * * * * *",
                "UTC",
                panics_before_its_future,
            )
            .unwrap(),
        )
        .build()
        .unwrap();
    let observer = scheduler.clone();
    let both_ended = async move {
        eventually(Duration::from_secs(20), "both jobs ran", || async {
            let a = first_end(&observer, "in-future").await?;
            let b = first_end(&observer, "before-future").await?;
            Some((a, b))
        })
        .await;
    };
    scheduler
        .run_until(both_ended, Duration::from_secs(5))
        .await;

    let in_future = first_end(&scheduler, "in-future").await.unwrap();
    assert_eq!(
        in_future.outcome,
        RunOutcome::Failed("the handler panicked: boom 42".into()),
        "{in_future:?}"
    );
    let before = first_end(&scheduler, "before-future").await.unwrap();
    assert_eq!(
        before.outcome,
        RunOutcome::Failed("the handler panicked: no future for before-future".into()),
        "{before:?}"
    );
}

fn noop(name: &str, cron: &str) -> Job {
    Job::new(name, cron, "UTC", |_: JobContext| async {
        Ok::<(), String>(())
    })
    .unwrap()
}

#[tokio::test]
async fn job_names_are_checked_by_build_and_by_every_control_call() {
    // Nothing listens here: a name check that happened after a request would show as a
    // Redis error instead.
    let c = dlock_core::Client::open("redis://127.0.0.1:1/").unwrap();
    let err = Scheduler::builder(c.clone())
        .job(noop("", "* * * * *"))
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidJob, "{err}");
    assert!(err.to_string().contains("empty"), "{err}");

    let admin = Scheduler::builder(c).build().unwrap();
    for bad in ["", "a{b}", "tab\there", &"x".repeat(501)] {
        let errors = [
            admin.pause(bad).await.unwrap_err(),
            admin.resume(bad).await.unwrap_err(),
            admin.is_paused(bad).await.unwrap_err(),
            admin.run_now(bad).await.unwrap_err(),
            admin.history(bad).await.unwrap_err(),
        ];
        for err in errors {
            assert_eq!(err.kind(), ErrorKind::InvalidJob, "{bad:?}: {err}");
            assert!(err.to_string().contains("job name"), "{err}");
        }
    }
}

#[test]
fn jitter_is_checked_against_the_schedule_interval_not_the_lease() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _guard = runtime.enter();
    let c = dlock_core::Client::open("redis://127.0.0.1:1/").unwrap();
    // The documented example: a daily job with 30 s of jitter, default lease.
    let daily = noop("nightly-report", "30 2 * * *").jitter(Duration::from_secs(30));
    Scheduler::builder(c.clone()).job(daily).build().unwrap();
    // A jitter as long as the interval is refused, whatever the lease.
    let every_second = noop("tick", "* * * * * *")
        .jitter(Duration::from_secs(1))
        .lease(Duration::from_secs(60));
    let err = Scheduler::builder(c.clone())
        .job(every_second)
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidJob);
    assert!(err.to_string().contains("interval"), "{err}");
    let short = noop("tick", "*/10 * * * * *").jitter(Duration::from_secs(9));
    Scheduler::builder(c).job(short).build().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_keep_dlock_cores_kind_and_error() {
    // A lease dlock-core refuses: its error is the source.
    let c = dlock_core::Client::open("redis://127.0.0.1:1/").unwrap();
    let err = Scheduler::builder(c)
        .job(noop("long", "* * * * *").lease(Duration::from_secs(25 * 3600)))
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidJob);
    let core = err
        .source()
        .and_then(|s| s.downcast_ref::<dlock_core::Error>())
        .unwrap_or_else(|| panic!("no dlock_core::Error source: {err:?}"));
    assert_eq!(core.kind(), dlock_core::ErrorKind::InvalidInput);

    // Redis gone, then hung: the kind and predicates say which, and the source is the
    // dlock_core::Error of the request (the scheduler's requests go through dlock-core).
    let core_kind = |err: &dlock_scheduler::Error| {
        err.source()
            .and_then(|s| s.downcast_ref::<dlock_core::Error>())
            .map(dlock_core::Error::kind)
    };
    let mut server = redis();
    let admin = Scheduler::builder(client(&server)).build().unwrap();
    server.pause().unwrap();
    let err = admin.history("job").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Redis);
    assert_eq!(
        err.redis_kind(),
        Some(dlock_core::ErrorKind::Timeout),
        "{err}"
    );
    assert!(err.is_timeout() && err.may_have_taken_effect(), "{err}");
    assert_eq!(
        core_kind(&err),
        Some(dlock_core::ErrorKind::Timeout),
        "{err:?}"
    );
    server.kill();
    let err = eventually(Duration::from_secs(10), "a connection error", || async {
        let err = admin.pause("job").await.unwrap_err();
        err.is_connection().then_some(err)
    })
    .await;
    assert_eq!(err.redis_kind(), Some(dlock_core::ErrorKind::Connection));
    assert!(err.may_have_taken_effect());
    assert_eq!(
        core_kind(&err),
        Some(dlock_core::ErrorKind::Connection),
        "{err:?}"
    );
}
