//! Three scheduler replicas (separate processes) whose clocks are skewed by −400 ms, 0 and
//! +700 ms run a 1-second cron job for 30+ occurrences: every occurrence runs exactly once, the
//! run ledger agrees with the side effects, and the replicas share the work (each runs at least
//! 6 of 30, not "the first to ask always wins").
//!
//! The job allows overlapping runs, so what is checked is the per-occurrence claim alone: with
//! the default overlap policy (skip), a run slowed past the next second on a loaded machine
//! would legitimately skip that occurrence.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use dlock_core::Client;
use dlock_scheduler::{RunOutcome, Scheduler};
use redis::AsyncCommands;

use crate::support::{Worker, raw, redis};

/// Starts one replica of `job`; `extra` are further `key=value` options.
pub(crate) fn replica(url: &str, job: &str, cron: &str, id: &str, extra: &[&str]) -> Worker {
    let mut args = vec![
        "replica".to_owned(),
        format!("url={url}"),
        format!("job={job}"),
        format!("cron={}", cron.replace(' ', "_")),
        format!("id={id}"),
    ];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    let worker = Worker::spawn(&args);
    assert_eq!(worker.line(Duration::from_secs(30)), "started");
    worker
}

/// Waits for a replica's `stopped …` line, skipping its `ran …` lines.
pub(crate) fn wait_stopped(worker: &Worker, limit: Duration) -> String {
    loop {
        let line = worker.line(limit);
        if line.starts_with("stopped") {
            return line;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skewed_replicas_run_every_occurrence_exactly_once() {
    let server = redis();
    let url = server.url();
    let replica_with = |id: &str, skew: &str| {
        let opts = [skew, "run_ms=36000", "work_ms=100", "overlap=allow"];
        replica(&url, "tick", "* * * * * *", id, &opts)
    };
    let replicas = [
        replica_with("late", "skew_ms=-400"),
        replica_with("exact", "skew_ms=0"),
        replica_with("early", "skew_ms=700"),
    ];
    for worker in &replicas {
        let stopped = wait_stopped(worker, Duration::from_secs(90));
        assert!(stopped.contains("cancelled=0"), "{stopped}");
    }

    let mut con = raw(&server).await;
    let keys: Vec<String> = con.keys("tick:count:*").await.unwrap();
    let mut counts = BTreeMap::new();
    for key in keys {
        let occurrence: i64 = key.rsplit(':').next().unwrap().parse().unwrap();
        let count: u64 = con.get(&key).await.unwrap();
        counts.insert(occurrence, count);
    }
    assert!(counts.len() >= 30, "only {} occurrences ran", counts.len());
    let twice: Vec<_> = counts.iter().filter(|(_, c)| **c != 1).collect();
    assert!(
        twice.is_empty(),
        "occurrences run more than once: {twice:?}"
    );
    let first = *counts.keys().next().unwrap();
    let last = *counts.keys().last().unwrap();
    let admin = Scheduler::builder(Client::open(url.as_str()).unwrap())
        .build()
        .unwrap();
    let history = admin.history("tick").await.unwrap();
    let missing: Vec<i64> = (0..=(last - first) / 1000)
        .map(|i| first + i * 1000)
        .filter(|o| !counts.contains_key(o))
        .collect();
    let around: Vec<_> = history
        .iter()
        .filter(|r| {
            missing
                .iter()
                .any(|m| (r.occurrence.timestamp_millis() - m).abs() <= 1000)
        })
        .collect();
    assert_eq!(
        counts.len() as i64,
        (last - first) / 1000 + 1,
        "no occurrence in between was lost: missing {missing:?}, ledger around: {around:#?}"
    );

    let ledger: BTreeSet<i64> = history
        .iter()
        .map(|r| r.occurrence.timestamp_millis())
        .collect();
    assert_eq!(ledger, counts.keys().copied().collect::<BTreeSet<_>>());
    for record in &history {
        assert_eq!(record.outcome, RunOutcome::Succeeded, "{record:?}");
        assert!(["late", "exact", "early"].contains(&record.replica.as_str()));
        assert!(record.fencing_token.is_some());
    }
    // Fencing tokens increase from run to run: every run that started after another ended has
    // a larger token (runs that overlapped — overlap is allowed here — may be in any order).
    for (i, earlier) in history.iter().enumerate() {
        for later in &history[i + 1..] {
            if earlier
                .ended_at
                .is_some_and(|ended| ended < later.started_at)
            {
                assert!(
                    earlier.fencing_token < later.fencing_token,
                    "fences must increase: {earlier:?} then {later:?}"
                );
            }
        }
    }
    let shares = shares(&history);
    for id in ["late", "exact", "early"] {
        let share = shares.get(id).copied().unwrap_or(0);
        assert!(
            share * 30 >= 6 * history.len(),
            "{id} ran {share} of {} occurrences: {shares:?}",
            history.len()
        );
    }
}

/// How many runs of `history` each replica made.
pub(crate) fn shares(history: &[dlock_scheduler::RunRecord]) -> BTreeMap<String, usize> {
    let mut shares = BTreeMap::new();
    for record in history {
        *shares.entry(record.replica.clone()).or_insert(0) += 1;
    }
    shares
}
