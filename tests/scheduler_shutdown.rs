//! Graceful shutdown drains running jobs up to a deadline and cancels the rest (recorded, lock
//! released); a replica that was down fires a missed occurrence once (`MisfirePolicy::FireOnce`);
//! bad schedules and jobs are errors, not panics.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use dlock_scheduler::{ErrorKind, Job, JobContext, MisfirePolicy, RunOutcome, Scheduler};
use tokio::sync::Notify;

use crate::support::{client, redis};

/// A job on every second whose handler signals `started`, then works for `work`.
fn job(name: &str, work: Duration, started: Arc<Notify>, done: Arc<AtomicUsize>) -> Job {
    Job::new(name, "* * * * * *", "UTC", move |_ctx: JobContext| {
        let (started, done) = (started.clone(), done.clone());
        async move {
            started.notify_one();
            tokio::time::sleep(work).await;
            done.fetch_add(1, Ordering::SeqCst);
            Ok::<(), std::io::Error>(())
        }
    })
    .unwrap()
    .lease(Duration::from_secs(2))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_a_running_job() {
    let server = redis();
    let (started, done) = (Arc::new(Notify::new()), Arc::new(AtomicUsize::new(0)));
    let scheduler = Scheduler::builder(client(&server))
        .job(job(
            "drain",
            Duration::from_millis(800),
            started.clone(),
            done.clone(),
        ))
        .build()
        .unwrap();
    let report = scheduler
        .run_until(started.notified(), Duration::from_secs(5))
        .await;
    assert_eq!((report.drained, report.cancelled), (1, 0), "{report:?}");
    assert_eq!(done.load(Ordering::SeqCst), 1, "the running job finished");
    let history = scheduler.history("drain").await.unwrap();
    assert_eq!(history.last().unwrap().outcome, RunOutcome::Succeeded);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_cancels_what_outlives_the_deadline() {
    let server = redis();
    let (started, done) = (Arc::new(Notify::new()), Arc::new(AtomicUsize::new(0)));
    let c = client(&server);
    let scheduler = Scheduler::builder(c.clone())
        .job(job(
            "stuck",
            Duration::from_secs(30),
            started.clone(),
            done.clone(),
        ))
        .build()
        .unwrap();
    let report = scheduler
        .run_until(started.notified(), Duration::from_millis(300))
        .await;
    assert_eq!((report.drained, report.cancelled), (0, 1), "{report:?}");
    assert_eq!(done.load(Ordering::SeqCst), 0);
    let history = scheduler.history("stuck").await.unwrap();
    assert!(
        matches!(&history.last().unwrap().outcome, RunOutcome::Cancelled(why) if why.contains("shut down")),
        "{history:?}"
    );
    assert_eq!(
        c.inspect("sched:stuck").await.unwrap(),
        None,
        "the job's lock was released"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_back_from_downtime_fires_a_missed_occurrence_once() {
    let server = redis();
    let (started, done) = (Arc::new(Notify::new()), Arc::new(AtomicUsize::new(0)));
    let first = Scheduler::builder(client(&server))
        .job(job(
            "misfire",
            Duration::ZERO,
            started.clone(),
            done.clone(),
        ))
        .build()
        .unwrap();
    first
        .run_until(started.notified(), Duration::from_secs(5))
        .await;
    // Down for more than three occurrences.
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    let second = Scheduler::builder(client(&server))
        .job(
            job("misfire", Duration::ZERO, started.clone(), done.clone())
                .misfire(MisfirePolicy::FireOnce),
        )
        .build()
        .unwrap();
    let back = chrono::Utc::now();
    second
        .run_until(
            tokio::time::sleep(Duration::from_millis(2_500)),
            Duration::from_secs(5),
        )
        .await;
    let history = second.history("misfire").await.unwrap();
    let before_down = history[0].occurrence;
    let missed: Vec<_> = history
        .iter()
        .filter(|r| {
            r.occurrence > before_down && r.occurrence < back - chrono::TimeDelta::seconds(1)
        })
        .collect();
    assert_eq!(
        missed.len(),
        1,
        "exactly the latest missed occurrence fires: {history:?}"
    );
}

#[test]
fn bad_schedules_and_jobs_are_errors() {
    let err = Job::new("x", "0 12 * *", "UTC", |_: JobContext| async {
        Ok::<(), String>(())
    })
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidSchedule);
    assert!(err.to_string().contains("4 fields"), "{err}");
    let err = Job::new("x", "0 12 * * *", "Europe/Berln", |_: JobContext| async {
        Ok::<(), String>(())
    })
    .unwrap_err();
    assert!(
        err.to_string().contains("Europe/Berlin"),
        "a suggestion: {err}"
    );

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let c = dlock_core::Client::open("redis://127.0.0.1:1/").unwrap();
        let mk = |name: &str| {
            Job::new(name, "* * * * *", "UTC", |_: JobContext| async {
                Ok::<(), String>(())
            })
            .unwrap()
        };
        // The longest name #[scheduled] accepts (500 bytes) builds: nothing derived from the
        // name (lock name, holder label) has a smaller limit.
        assert!(
            Scheduler::builder(c.clone())
                .job(mk(&"x".repeat(500)))
                .build()
                .is_ok()
        );
        let err = Scheduler::builder(c.clone())
            .job(mk("same"))
            .job(mk("same"))
            .build()
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidJob);
        assert!(err.to_string().contains("twice"), "{err}");
        let err = Scheduler::builder(c.clone())
            .job(mk("a{b}"))
            .build()
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidJob, "{err}");
        let err = Scheduler::builder(c)
            .job(mk("j").jitter(Duration::from_secs(60)))
            .build()
            .unwrap_err();
        assert!(err.to_string().contains("jitter"), "{err}");
    });
}
