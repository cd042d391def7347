//! Replicas take turns, and losing one loses nothing: three replica processes (clocks skewed by
//! −400 ms, 0 and +700 ms) run a 1-second job; the replica that runs the 10th occurrence is
//! killed (SIGKILL) mid-run. Every occurrence from the first to the last still ran exactly once
//! — the dead replica's turns go to the others once the turn grace has passed — and the
//! survivors share the rest.

use std::collections::BTreeMap;
use std::time::Duration;

use dlock_core::Client;
use dlock_scheduler::{RunOutcome, Scheduler};
use redis::AsyncCommands;

use crate::scheduler::scheduler_exactly_once::{replica, shares, wait_stopped};
use crate::support::{Worker, eventually, raw, redis};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_at_occurrence_10_leaves_nothing_missed_or_run_twice() {
    let server = redis();
    let url = server.url();
    let replica_with = |id: &str, skew: &str| {
        let opts = [skew, "run_ms=36000", "work_ms=300", "overlap=allow"];
        replica(&url, "turns", "* * * * * *", id, &opts)
    };
    let mut replicas: BTreeMap<&str, Worker> = BTreeMap::from([
        ("late", replica_with("late", "skew_ms=-400")),
        ("exact", replica_with("exact", "skew_ms=0")),
        ("early", replica_with("early", "skew_ms=700")),
    ]);
    let mut con = raw(&server).await;
    // The 10th run, as the handlers log it when they start.
    let tenth: String = eventually(Duration::from_secs(30), "ten runs", || {
        let mut con = con.clone();
        async move { con.lindex("turns:runs", 9).await.ok().flatten() }
    })
    .await;
    let mut fields = tenth.split(' ');
    let killed_occurrence: i64 = fields.next().unwrap().parse().unwrap();
    let victim = fields.next().unwrap().to_owned();
    replicas
        .get_mut(victim.as_str())
        .unwrap()
        .child_mut()
        .kill();

    for (id, worker) in &replicas {
        if *id != victim {
            let stopped = wait_stopped(worker, Duration::from_secs(90));
            assert!(stopped.contains("cancelled=0"), "{stopped}");
        }
    }
    let keys: Vec<String> = con.keys("turns:count:*").await.unwrap();
    let mut counts = BTreeMap::new();
    for key in keys {
        let occurrence: i64 = key.rsplit(':').next().unwrap().parse().unwrap();
        let count: u64 = con.get(&key).await.unwrap();
        counts.insert(occurrence, count);
    }
    let (first, last) = (
        *counts.keys().next().unwrap(),
        *counts.keys().last().unwrap(),
    );
    assert!(
        last - first >= 29_000,
        "30 occurrences or more: {first}..{last}"
    );
    let missed: Vec<i64> = (0..=(last - first) / 1000)
        .map(|i| first + i * 1000)
        .filter(|o| !counts.contains_key(o))
        .collect();
    assert!(missed.is_empty(), "occurrences missed: {missed:?}");
    let twice: Vec<_> = counts.iter().filter(|(_, c)| **c != 1).collect();
    assert!(twice.is_empty(), "occurrences run twice: {twice:?}");

    let admin = Scheduler::builder(Client::open(url.as_str()).unwrap())
        .build()
        .unwrap();
    let history = admin.history("turns").await.unwrap();
    for record in &history {
        // The killed run ends abandoned (or succeeded, had it ended before the kill).
        let killed = record.occurrence.timestamp_millis() == killed_occurrence;
        let ok = record.outcome == RunOutcome::Succeeded
            || (killed && record.outcome == RunOutcome::Abandoned);
        assert!(ok, "{record:?}");
    }
    let after: Vec<_> = history
        .iter()
        .filter(|r| r.occurrence.timestamp_millis() > killed_occurrence)
        .cloned()
        .collect();
    let survivors = shares(&after);
    for (id, share) in &survivors {
        assert!(
            *id != victim,
            "the killed replica ran {share} more: {survivors:?}"
        );
    }
    for id in replicas.keys().filter(|id| **id != victim) {
        let share = survivors.get(*id).copied().unwrap_or(0);
        assert!(
            share * 4 >= after.len(),
            "{id} ran {share} of the {} occurrences after the kill: {survivors:?}",
            after.len()
        );
    }
}
