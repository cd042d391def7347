//! Graceful shutdown drains running jobs up to a deadline and cancels the rest (recorded, lock
//! released), then shuts the client down (unless told not to), so that a replica that exits
//! mid-run leaves nothing for the others to wait out; a replica that was down fires a missed
//! occurrence once (`MisfirePolicy::FireOnce`); bad schedules and jobs are errors, not panics.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use chrono::{TimeDelta, Utc};
use dlock_core::Client;
use dlock_scheduler::{ErrorKind, Job, JobContext, MisfirePolicy, RunOutcome, Scheduler};
use redis::AsyncCommands;
use tokio::sync::Notify;

use crate::scheduler::scheduler_exactly_once::{replica, wait_stopped};
use crate::support::{Worker, client, eventually, raw, redis};

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
async fn the_client_is_shut_down_at_the_end_unless_the_builder_says_otherwise() {
    let server = redis();
    let run_until_started = |scheduler: Scheduler, started: Arc<Notify>| async move {
        scheduler
            .run_until(started.notified(), Duration::from_secs(5))
            .await
    };
    let done = Arc::new(AtomicUsize::new(0));

    let (shared, started) = (client(&server), Arc::new(Notify::new()));
    let kept = Scheduler::builder(shared.clone())
        .shutdown_client(false)
        .job(job("kept", Duration::ZERO, started.clone(), done.clone()))
        .build()
        .unwrap();
    let report = run_until_started(kept, started).await;
    assert!(report.client.is_none(), "{report:?}");
    let guard = shared.mutex("other-work").unwrap().try_acquire().await;
    assert!(
        matches!(guard, Ok(Some(_))),
        "the client stays usable: {guard:?}"
    );

    let (own, started) = (client(&server), Arc::new(Notify::new()));
    let given_back = Scheduler::builder(own.clone())
        .job(job(
            "given-back",
            Duration::ZERO,
            started.clone(),
            done.clone(),
        ))
        .build()
        .unwrap();
    let report = run_until_started(given_back, started).await;
    let shut = report.client.as_ref().expect("the client was shut down");
    assert!(shut.is_complete(), "{report:?}");
    let err = own
        .mutex("other-work")
        .unwrap()
        .try_acquire()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), dlock_core::ErrorKind::Shutdown, "{err}");
}

/// SIGTERM, as an orchestrator stops a replica.
pub(crate) fn terminate(worker: &Worker) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(worker.child().pid()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_exits_gracefully_mid_run_leaves_nothing_to_wait_out() {
    let server = redis();
    let url = server.url();
    // Every second; each run would work a minute under a 20 s lease, so the job stays held
    // while it runs. Each replica also holds a lock of its own on its client (`hold`), as other
    // work of the service would.
    let start = |id: &str| {
        let hold = format!("hold=side:{id}");
        let opts = [
            "run_ms=60000",
            "work_ms=60000",
            "lease_ms=20000",
            "drain_ms=300",
            hold.as_str(),
        ];
        replica(&url, "handover", "* * * * * *", id, &opts)
    };
    let (a, b) = (start("a"), start("b"));
    let con = raw(&server).await;
    let first: String = eventually(Duration::from_secs(20), "a run started", || {
        let mut con = con.clone();
        async move { con.lindex("handover:runs", 0).await.ok().flatten() }
    })
    .await;
    let mut fields = first.split(' ');
    let occurrence: i64 = fields.next().unwrap().parse().unwrap();
    let runner = fields.next().unwrap().to_owned();
    let (leaving, staying, other) = if runner == "a" {
        (&a, &b, "b")
    } else {
        (&b, &a, "a")
    };
    let admin = Client::open(url.as_str()).unwrap();
    let side = format!("side:{runner}");
    assert!(admin.inspect(&side).await.unwrap().is_some(), "{side} held");

    terminate(leaving);
    let left_at = Utc::now();
    let stopped = wait_stopped(leaving, Duration::from_secs(30));
    // The run was cancelled (and released its lock itself); the client's shutdown released the
    // other lock.
    assert!(
        stopped.contains("cancelled=1")
            && stopped.contains("released=1")
            && stopped.contains("failures=0"),
        "{stopped}"
    );
    // Nothing of the leaving replica's is left to wait out: its other lock is free at once …
    assert_eq!(
        admin.inspect(&side).await.unwrap(),
        None,
        "{side} was left for its lease ({stopped})"
    );
    // … and the other replica runs the job's next occurrence at once, not after the lease.
    let next: String = eventually(Duration::from_secs(30), "the next run", || {
        let mut con = con.clone();
        async move { con.lindex("handover:runs", 1).await.ok().flatten() }
    })
    .await;
    let mut fields = next.split(' ');
    let next_occurrence: i64 = fields.next().unwrap().parse().unwrap();
    assert_eq!(fields.next(), Some(other), "{next}");
    // A lease left behind would hold the job for at least 13 s more (20 s, renewed every
    // ~6.7 s): half the lease tells "at once" from "after the lease" with room to spare.
    let lease_end = left_at + TimeDelta::seconds(20);
    assert!(
        next_occurrence < (left_at + TimeDelta::seconds(10)).timestamp_millis(),
        "the job waited until {next_occurrence} ms after the replica left at {} ms (its \
         lease would have ended at {} ms)",
        left_at.timestamp_millis(),
        lease_end.timestamp_millis()
    );
    // The cancelled run is in the ledger as such, not abandoned.
    let history = Scheduler::builder(admin).build().unwrap();
    let history = history.history("handover").await.unwrap();
    let cancelled = history
        .iter()
        .find(|r| r.occurrence.timestamp_millis() == occurrence)
        .expect("the cancelled run is in the ledger");
    assert!(
        matches!(&cancelled.outcome, RunOutcome::Cancelled(why) if why.contains("shut down")),
        "{cancelled:?}"
    );
    terminate(staying);
    let stopped = wait_stopped(staying, Duration::from_secs(30));
    assert!(stopped.contains("failures=0"), "{stopped}");
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

/// Dropping `run_until`'s future (a task aborted, a `select!` that chose another branch) stops
/// the scheduler's loops and cancels its running handler: they are tasks of their own, and
/// before they went on claiming and running with nothing left to stop them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_run_until_stops_the_loops_and_cancels_the_runs() {
    let server = redis();
    let started = Arc::new(Notify::new());
    let dropped = Arc::new(Notify::new());
    let (on_start, on_drop) = (started.clone(), dropped.clone());
    let job = Job::new("endless", "* * * * * *", "UTC", move |_ctx: JobContext| {
        let (on_start, on_drop) = (on_start.clone(), on_drop.clone());
        async move {
            // Signals when the handler's future is dropped (cancelled), not when it returns.
            struct Dropped(Arc<Notify>);
            impl Drop for Dropped {
                fn drop(&mut self) {
                    self.0.notify_one();
                }
            }
            let _dropped = Dropped(on_drop);
            on_start.notify_one();
            std::future::pending::<()>().await;
            Ok::<(), std::io::Error>(())
        }
    })
    .unwrap()
    .overlap(dlock_scheduler::Overlap::Allow);
    let scheduler = Scheduler::builder(client(&server))
        .job(job)
        .build()
        .unwrap();
    let admin = scheduler.clone();
    let running = tokio::spawn(async move {
        scheduler
            .run_until(std::future::pending(), Duration::from_secs(5))
            .await
    });
    started.notified().await;
    running.abort();
    tokio::time::timeout(Duration::from_secs(5), dropped.notified())
        .await
        .expect("the handler was cancelled when run_until's future was dropped");
    // Recorded cancelled (not left running), and nothing claimed afterwards.
    let history = eventually(Duration::from_secs(10), "the run recorded", || {
        let admin = admin.clone();
        async move {
            let history = admin.history("endless").await.ok()?;
            history
                .iter()
                .all(|r| r.outcome != RunOutcome::Running)
                .then_some(history)
        }
    })
    .await;
    assert!(
        history
            .iter()
            .any(|r| matches!(r.outcome, RunOutcome::Cancelled(_))),
        "{history:#?}"
    );
    let claimed = history.len();
    // A 1 s cron: a loop still running would claim the next occurrences.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let after = admin.history("endless").await.unwrap();
    assert_eq!(after.len(), claimed, "claimed after the drop: {after:#?}");
}
