//! Redis outages and downtime: occurrences that fall into an outage follow the misfire policy
//! once Redis is back (by default one catch-up run) — after a crash with data loss as after a
//! hang whose queued requests run late — and missed occurrences are caught up in order, one at
//! a time, instead of all at once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use dlock_scheduler::{Job, JobContext, MisfirePolicy, RunOutcome, Scheduler, SchedulerBuilder};
use dlock_testkit::RedisServer;
use tokio::sync::Notify;

use crate::support::{client, eventually, redis};

/// How late an occurrence may start and still count as on time (`MisfirePolicy`'s docs): a run
/// that starts later is a catch-up.
const ON_TIME: Duration = Duration::from_secs(1);

/// One run as the handler saw it: occurrence, start, end (replica clock = system clock).
type Run = (DateTime<Utc>, DateTime<Utc>, DateTime<Utc>);

/// A job on every second whose handler works `work` and logs its run in `ran`.
fn logging_job(name: &str, work: Duration, ran: Arc<Mutex<Vec<Run>>>) -> Job {
    Job::new(name, "* * * * * *", "UTC", move |ctx: JobContext| {
        let ran = ran.clone();
        async move {
            let start = Utc::now();
            tokio::time::sleep(work).await;
            ran.lock()
                .unwrap()
                .push((ctx.occurrence(), start, Utc::now()));
            Ok::<(), String>(())
        }
    })
    .unwrap()
}

fn runs(ran: &Mutex<Vec<Run>>) -> Vec<Run> {
    let mut runs = ran.lock().unwrap().clone();
    runs.sort();
    runs
}

/// Runs `builder`'s scheduler in the background; the returned `Notify` stops it.
fn start(builder: SchedulerBuilder) -> (Scheduler, Arc<Notify>, tokio::task::JoinHandle<()>) {
    let scheduler = builder.build().unwrap();
    let stop = Arc::new(Notify::new());
    let (s, n) = (scheduler.clone(), stop.clone());
    let handle = tokio::spawn(async move {
        s.run_until(n.notified(), Duration::from_secs(5)).await;
    });
    (scheduler, stop, handle)
}

/// Runs a 1-second job through an outage made by `outage` (which blocks until Redis is back),
/// then checks what `FireOnce` promises.
async fn fire_once_across(server: &mut RedisServer, job: &str, outage: fn(&mut RedisServer)) {
    let ran = Arc::new(Mutex::new(Vec::new()));
    let (scheduler, stop, handle) = start(
        Scheduler::builder(client(server))
            .job(logging_job(job, Duration::ZERO, ran.clone()).misfire(MisfirePolicy::FireOnce)),
    );
    eventually(Duration::from_secs(10), "a first run", || async {
        (!ran.lock().unwrap().is_empty()).then_some(())
    })
    .await;
    let down_at = Utc::now();
    tokio::task::block_in_place(|| outage(server));
    let back_at = Utc::now();
    eventually(Duration::from_secs(20), "runs after the outage", || async {
        runs(&ran)
            .iter()
            .any(|(o, ..)| *o > back_at + TimeDelta::seconds(2))
            .then_some(())
    })
    .await;
    stop.notify_one();
    handle.await.unwrap();

    let runs = runs(&ran);
    let occurrences: Vec<_> = runs.iter().map(|(o, ..)| *o).collect();
    let mut unique = occurrences.clone();
    unique.dedup();
    assert_eq!(unique, occurrences, "an occurrence ran twice");
    // The first run after the outage is the catch-up: an occurrence from inside it, late.
    let &(first, started, _) = runs
        .iter()
        .find(|(o, ..)| *o > down_at)
        .expect("a run after the outage");
    let late = (started - first).to_std().unwrap_or_default();
    assert!(
        late > ON_TIME,
        "no catch-up: the first run after the outage ({first}, {back_at} back) started on \
         time; the occurrences of the outage were dropped. Runs: {occurrences:?}"
    );
    assert!(
        first - down_at >= TimeDelta::seconds(2),
        "FireOnce runs only the latest missed occurrence: {occurrences:?}"
    );
    // From the catch-up on, every occurrence ran.
    let after: Vec<_> = occurrences.iter().filter(|o| **o >= first).collect();
    assert!(
        after
            .windows(2)
            .all(|w| *w[1] - *w[0] == TimeDelta::seconds(1)),
        "a gap after the catch-up: {after:?}"
    );
    let history = scheduler.history(job).await.unwrap();
    assert!(
        history
            .iter()
            .all(|r| matches!(r.outcome, RunOutcome::Succeeded)),
        "no claim left abandoned: {history:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn occurrences_missed_while_redis_was_down_fire_once_when_it_is_back() {
    let mut server = redis();
    fire_once_across(&mut server, "crash", |server| {
        // A crash that loses the data: ledger and claims are gone when it is back.
        server.kill();
        std::thread::sleep(Duration::from_millis(3_500));
        server.restart().unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn occurrences_missed_while_redis_hung_fire_once_when_it_answers() {
    let mut server = redis();
    fire_once_across(&mut server, "hang", |server| {
        // A hang: the claims sent meanwhile time out on the client, then run when it resumes;
        // they must be withdrawn, or they would block the catch-up and show as abandoned.
        server.pause().unwrap();
        std::thread::sleep(Duration::from_millis(4_000));
        server.resume().unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missed_occurrences_are_caught_up_in_order_one_at_a_time() {
    let server = redis();
    let ran = Arc::new(Mutex::new(Vec::new()));
    let policy = MisfirePolicy::CatchUp {
        window: Duration::from_secs(60),
    };
    let job = || logging_job("backlog", Duration::from_millis(300), ran.clone()).misfire(policy);
    let (_, stop, handle) = start(Scheduler::builder(client(&server)).job(job()));
    eventually(Duration::from_secs(10), "a first run", || async {
        (!ran.lock().unwrap().is_empty()).then_some(())
    })
    .await;
    stop.notify_one();
    handle.await.unwrap();
    // What the first replica did not deal with is missed (it may have skipped an occurrence
    // as an overlap before it stopped: that is the overlap policy, not a catch-up).
    let down_at = Utc::now();
    // Down for about four occurrences (the downtime is the scenario, not a wait).
    tokio::time::sleep(Duration::from_millis(4_500)).await;
    let back_at = Utc::now();
    let (scheduler, stop, handle) = start(Scheduler::builder(client(&server)).job(job()));
    eventually(Duration::from_secs(20), "the backlog ran", || async {
        runs(&ran)
            .iter()
            .any(|(o, ..)| *o > back_at + TimeDelta::seconds(2))
            .then_some(())
    })
    .await;
    stop.notify_one();
    handle.await.unwrap();

    // The missed occurrences (after them, on-time runs follow the overlap policy as usual).
    let runs: Vec<_> = runs(&ran)
        .into_iter()
        .filter(|(o, ..)| *o > down_at && *o < back_at)
        .collect();
    let occurrences: Vec<_> = runs.iter().map(|(o, ..)| *o).collect();
    assert!(
        occurrences.len() >= 3,
        "the missed occurrences ran: {occurrences:?}"
    );
    let history = scheduler.history("backlog").await.unwrap();
    assert!(
        occurrences
            .windows(2)
            .all(|w| w[1] - w[0] == TimeDelta::seconds(1)),
        "every missed occurrence ran: {runs:#?}; ledger {history:#?}"
    );
    for pair in runs.windows(2) {
        let ((earlier, _, ended), (later, started, _)) = (pair[0], pair[1]);
        assert!(
            started >= ended,
            "{later} started before {earlier} ended: not in order, one at a time"
        );
    }
    let skipped: Vec<_> = scheduler
        .history("backlog")
        .await
        .unwrap()
        .into_iter()
        .filter(|r| {
            r.outcome == RunOutcome::SkippedOverlap
                && r.occurrence > down_at
                && r.occurrence < back_at
        })
        .collect();
    assert!(
        skipped.is_empty(),
        "caught-up runs skipped: {skipped:#?}; runs {runs:#?}"
    );
}
