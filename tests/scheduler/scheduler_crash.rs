//! A replica killed (SIGKILL) in the middle of a run: the job is free again within one run
//! lease plus one renewal interval (default lease, renewed by the watchdog), so another replica
//! runs the next occurrence then; the killed occurrence is not run again (at most once) and the
//! ledger shows it abandoned.

use std::time::Duration;

use chrono::{TimeDelta, Utc};
use dlock_core::Client;
use dlock_scheduler::{DEFAULT_RUN_LEASE, RunOutcome, Scheduler};
use redis::AsyncCommands;

use crate::scheduler::scheduler_exactly_once::replica;
use crate::support::{eventually, raw, redis};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_run_frees_the_job_within_a_lease_and_is_not_repeated() {
    let server = redis();
    let url = server.url();
    // Every second; each run works 3 s under the default lease: while it runs, the other
    // occurrences are skipped (overlap policy), so the job is blocked until its lock is free.
    let opts = ["run_ms=40000", "work_ms=3000"];
    let mut a = replica(&url, "slow", "* * * * * *", "a", &opts);
    let mut b = replica(&url, "slow", "* * * * * *", "b", &opts);
    let mut con = raw(&server).await;

    // Wait for a run to start, and kill the replica running it.
    let first: String = eventually(Duration::from_secs(20), "a run started", || {
        let mut con = con.clone();
        async move { con.lindex("slow:runs", 0).await.ok().flatten() }
    })
    .await;
    let mut fields = first.split(' ');
    let occurrence: i64 = fields.next().unwrap().parse().unwrap();
    let runner = fields.next().unwrap().to_owned();
    let victim = if runner == "a" { &mut a } else { &mut b };
    victim.child_mut().kill();
    let killed_at = Utc::now();

    // The survivor runs a later occurrence (the job is not stuck) …
    let next: String = eventually(Duration::from_secs(40), "the next run", || {
        let mut con = con.clone();
        async move { con.lindex("slow:runs", 1).await.ok().flatten() }
    })
    .await;
    let next_occurrence: i64 = next.split(' ').next().unwrap().parse().unwrap();
    // … no later than the first occurrence after one lease and one renewal interval (a third
    // of the lease) from the kill: the lock's lease was at most that long then, and a default
    // lease is at most 5 s.
    let lease = TimeDelta::seconds(5);
    let free_by = killed_at + lease + lease / 3;
    let bound = free_by.timestamp_millis().div_euclid(1000) * 1000 + 1000;
    assert!(
        next_occurrence <= bound,
        "the killed run blocked the job until {next_occurrence} ms; it was free by {} ms",
        free_by.timestamp_millis()
    );
    assert!(
        DEFAULT_RUN_LEASE <= Duration::from_secs(5),
        "a short default lease"
    );

    // … but never the killed one again, which the ledger reports as abandoned.
    let count: u64 = con.get(format!("slow:count:{occurrence}")).await.unwrap();
    assert_eq!(count, 1, "the killed occurrence ran again");
    let admin = Scheduler::builder(Client::open(url.as_str()).unwrap())
        .build()
        .unwrap();
    let history = admin.history("slow").await.unwrap();
    let killed = history
        .iter()
        .find(|r| r.occurrence.timestamp_millis() == occurrence)
        .expect("the killed run is in the ledger");
    assert_eq!(killed.outcome, RunOutcome::Abandoned, "{killed:?}");
    assert_eq!(killed.replica, runner);
}
