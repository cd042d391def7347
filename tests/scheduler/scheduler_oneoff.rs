//! One-off jobs (`Scheduler::run_at`) across replica processes (`oneoff-replica` workers): a
//! burst of 1,000 due within the same second runs once each, spread over three replicas; jobs
//! survive the loss of every replica; an idempotency key used twice makes one job; a cancelled
//! job never runs; a job due in the past runs.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

use chrono::{DurationRound, TimeDelta, Utc};
use dlock_core::Client;
use dlock_scheduler::{RunOutcome, RunRecord, Scheduler};
use redis::AsyncCommands;

use crate::support::{Worker, eventually, raw, redis};

fn spawn(url: &str, id: &str, work_ms: u64) -> Worker {
    let args: Vec<String> = vec![
        "oneoff-replica".into(),
        format!("url={url}"),
        format!("id={id}"),
        format!("work_ms={work_ms}"),
    ];
    let worker = Worker::spawn(&args);
    assert_eq!(worker.line(Duration::from_secs(30)), "started");
    worker
}

/// A scheduler that enqueues (it registers the handler, and never runs).
fn admin(url: &str) -> Scheduler {
    Scheduler::builder(Client::open(url).unwrap())
        .handler("count", |_| async { Ok::<(), String>(()) })
        .history(5000)
        .build()
        .unwrap()
}

/// The ledger of the one-off jobs, once `n` runs are in it and all are final.
async fn all_final(admin: &Scheduler, n: usize, limit: Duration) -> Vec<RunRecord> {
    eventually(limit, &format!("{n} one-off jobs final"), || async {
        let runs = admin.history("once:count").await.unwrap();
        let open = |r: &RunRecord| matches!(r.outcome, RunOutcome::Scheduled | RunOutcome::Running);
        (runs.len() == n && !runs.iter().any(open)).then_some(runs)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_one_offs_due_in_the_same_second_run_once_each_across_three_replicas() {
    const JOBS: u64 = 1000;
    let server = redis();
    let url = server.url();
    // Each run works 20 ms, so that the per-replica cap (64 at a time) matters.
    let _workers: Vec<Worker> = ["a", "b", "c"]
        .iter()
        .map(|id| spawn(&url, id, 20))
        .collect();
    let admin = admin(&url);
    let mut con = raw(&server).await;
    // Due within one second, starting at a whole second 2 s ahead (enqueueing takes less).
    let second = Utc::now().duration_trunc(TimeDelta::seconds(1)).unwrap() + TimeDelta::seconds(3);
    let enqueue = Instant::now();
    for n in 0..JOBS {
        let due = second + TimeDelta::milliseconds(i64::try_from(n).unwrap());
        admin.run_at("count", due, &n).await.unwrap();
    }
    let enqueued = enqueue.elapsed();
    assert!(
        Utc::now() < second,
        "enqueueing took too long to test a burst: {enqueued:?}"
    );

    let runs = all_final(&admin, 1000, Duration::from_secs(120)).await;
    assert!(
        runs.iter().all(|r| r.outcome == RunOutcome::Succeeded),
        "not all succeeded: {:?}",
        runs.iter().find(|r| r.outcome != RunOutcome::Succeeded)
    );
    let counts: HashMap<u64, i64> = con.hgetall("oneoff:count").await.unwrap();
    assert_eq!(counts.len(), 1000, "not every one-off ran");
    let twice: Vec<_> = counts.iter().filter(|(_, c)| **c != 1).collect();
    assert!(
        twice.is_empty(),
        "one-offs that ran more than once: {twice:?}"
    );
    let shares: HashMap<String, i64> = con.hgetall("oneoff:by").await.unwrap();
    let last_end = runs.iter().filter_map(|r| r.ended_at).max().unwrap();
    let from_due = last_end
        .duration_since(SystemTime::from(second))
        .unwrap_or_default();
    eprintln!(
        "1,000 one-offs: enqueued in {enqueued:?}; last ended {from_due:?} after the first was \
         due; shares {shares:?}"
    );
    for id in ["a", "b", "c"] {
        assert!(
            shares.get(id).copied().unwrap_or(0) > 0,
            "replica {id} ran none: {shares:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_offs_survive_the_loss_of_every_replica() {
    const JOBS: u64 = 100;
    let server = redis();
    let url = server.url();
    let mut workers: Vec<Worker> = ["a", "b", "c"]
        .iter()
        .map(|id| spawn(&url, id, 0))
        .collect();
    let admin = admin(&url);
    let mut con = raw(&server).await;
    let mut last = None;
    for n in 0..JOBS {
        last = Some(
            admin
                .run_after("count", Duration::from_secs(2), &n)
                .await
                .unwrap(),
        );
    }
    for worker in &mut workers {
        worker.child_mut().kill();
    }
    // Every one-off comes due while no replica is alive.
    let last = admin.one_off(&last.unwrap()).await.unwrap().unwrap();
    let due = last.next_retry.unwrap();
    while SystemTime::now() < due + Duration::from_millis(200) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ran: usize = con.hlen("oneoff:count").await.unwrap();
    assert_eq!(
        ran, 0,
        "one-offs ran before they were due, or a replica survived"
    );

    let _workers: Vec<Worker> = ["a", "b", "c"]
        .iter()
        .map(|id| spawn(&url, id, 0))
        .collect();
    let runs = all_final(&admin, 100, Duration::from_secs(60)).await;
    assert!(runs.iter().all(|r| r.outcome == RunOutcome::Succeeded));
    let counts: HashMap<u64, i64> = con.hgetall("oneoff:count").await.unwrap();
    assert_eq!(counts.len(), 100);
    assert!(counts.values().all(|c| *c == 1), "{counts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_cancel_and_due_times_in_the_past() {
    let server = redis();
    let url = server.url();
    let _worker = spawn(&url, "a", 0);
    let admin = admin(&url);
    let mut con = raw(&server).await;

    // An idempotency key used twice: one job.
    let first = admin
        .run_after_keyed("count", "report-42", Duration::from_millis(500), &1)
        .await
        .unwrap();
    let again = admin
        .run_after_keyed("count", "report-42", Duration::from_millis(500), &1)
        .await
        .unwrap();
    assert_eq!(first, again);
    // Cancelled: never runs, though a one-off due after it does (they are claimed in due
    // order).
    let cancelled = admin
        .run_after("count", Duration::from_millis(700), &2)
        .await
        .unwrap();
    assert!(admin.cancel_one_off(&cancelled).await.unwrap());
    admin
        .run_after("count", Duration::from_millis(900), &3)
        .await
        .unwrap();
    // Due a day ago: due now.
    let past = admin
        .run_at("count", Utc::now() - TimeDelta::days(1), &4)
        .await
        .unwrap();

    let runs = all_final(&admin, 4, Duration::from_secs(30)).await;
    let counts: HashMap<u64, i64> = con.hgetall("oneoff:count").await.unwrap();
    assert_eq!(counts, HashMap::from([(1, 1), (3, 1), (4, 1)]));
    assert_eq!(runs.len(), 4, "the key made a second job");
    let cancelled = admin.one_off(&cancelled).await.unwrap().unwrap();
    assert!(matches!(cancelled.outcome, RunOutcome::Cancelled(_)));
    assert_eq!(
        admin.one_off(&past).await.unwrap().unwrap().outcome,
        RunOutcome::Succeeded
    );
    assert_eq!(
        admin.one_off(&first).await.unwrap().unwrap().outcome,
        RunOutcome::Succeeded
    );
}
