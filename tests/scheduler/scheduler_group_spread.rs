//! Group rounds spread across the live replicas (issue #51): six jobs of one group, all due
//! every second, on three replica processes (`group-replica` workers). Over 20 rounds (one
//! occurrence of all six) no replica runs more than 3 — before, every job of the group picked
//! the same turn holder at each instant and one replica ran all six — and a replica killed
//! mid-round loses at most its share of that round (its own runs, recorded abandoned); the
//! others run theirs.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use dlock_core::Client;
use dlock_scheduler::{RunOutcome, Scheduler};

use crate::support::{Worker, eventually, redis};

const JOBS: [&str; 6] = ["a", "b", "c", "d", "e", "f"];
const REPLICAS: [&str; 3] = ["r1", "r2", "r3"];
/// The most runs of one round a replica may take (the bound): its share (2) and one
/// more, for a turn a replica takes over when the turn holder, late on a loaded machine, let
/// its grace pass. Without the spread, one replica took all six.
const MOST: usize = JOBS.len().div_ceil(REPLICAS.len()) + 1;
const ROUNDS: usize = 20;

fn spawn(url: &str, id: &str) -> Worker {
    let args: Vec<String> = vec![
        "group-replica".into(),
        format!("url={url}"),
        format!("id={id}"),
        format!("max={}", JOBS.len()),
        format!("jobs={}", JOBS.len()),
        "work_ms=300".into(),
    ];
    let worker = Worker::spawn(&args);
    assert_eq!(worker.line(Duration::from_secs(30)), "started");
    worker
}

/// One run of a round: the job, the replica that ran it, how it ended.
type Run = (String, String, RunOutcome);

/// Every round in the ledgers (by occurrence) from `since` on.
async fn rounds(admin: &Scheduler, since: DateTime<Utc>) -> BTreeMap<DateTime<Utc>, Vec<Run>> {
    let mut rounds: BTreeMap<DateTime<Utc>, Vec<Run>> = BTreeMap::new();
    for job in JOBS {
        for run in admin.history(job).await.unwrap() {
            if run.occurrence >= since {
                let entry = (job.to_owned(), run.replica.clone(), run.outcome.clone());
                rounds.entry(run.occurrence).or_default().push(entry);
            }
        }
    }
    rounds
}

fn done(run: &Run) -> bool {
    !matches!(run.2, RunOutcome::Running | RunOutcome::Scheduled)
}

fn per_replica(round: &[Run]) -> BTreeMap<&str, usize> {
    let mut counts = BTreeMap::new();
    for (_, replica, _) in round {
        *counts.entry(replica.as_str()).or_default() += 1;
    }
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_groups_rounds_are_spread_over_the_live_replicas_and_a_kill_loses_at_most_its_share() {
    let server = redis();
    let url = server.url();
    let mut workers: Vec<Worker> = REPLICAS.iter().map(|id| spawn(&url, id)).collect();
    let admin = Scheduler::builder(Client::open(url.as_str()).unwrap())
        .build()
        .unwrap();
    // The rounds from a few seconds on: every replica is live for every job by then (each
    // tells Redis every second); before, a replica alone rightly runs them all.
    let start = Utc::now() + chrono::TimeDelta::seconds(3);
    let steady = eventually(
        Duration::from_secs(120),
        &format!("{ROUNDS} whole rounds"),
        || async {
            let all = rounds(&admin, start).await;
            let whole: Vec<_> = all
                .into_values()
                .take_while(|round| round.len() == JOBS.len() && round.iter().all(done))
                .collect();
            (whole.len() >= ROUNDS).then_some(whole)
        },
    )
    .await;
    for (n, round) in steady.iter().take(ROUNDS).enumerate() {
        let counts = per_replica(round);
        assert!(
            counts.values().all(|c| *c <= MOST),
            "round {n}: a replica ran more than {MOST} of {}: {counts:?} ({round:?})",
            JOBS.len()
        );
        assert!(
            round.iter().all(|r| r.2 == RunOutcome::Succeeded),
            "round {n}: {round:?}"
        );
    }

    // Kill r2 while a run of it goes on: that round loses at most r2's share.
    let victim = 1;
    let killed_round = eventually(Duration::from_secs(30), "a run of r2 going on", || async {
        let all = rounds(&admin, start).await;
        all.into_iter().rev().find_map(|(at, round)| {
            let going = round.iter().any(|r| r.1 == REPLICAS[victim] && !done(r));
            going.then_some(at)
        })
    })
    .await;
    workers[victim].child_mut().kill();
    let round = eventually(
        Duration::from_secs(60),
        "the killed round settled",
        || async {
            let all = rounds(&admin, killed_round).await;
            let round = all.get(&killed_round)?.clone();
            (round.len() == JOBS.len() && round.iter().all(done)).then_some(round)
        },
    )
    .await;
    let lost: Vec<&Run> = round
        .iter()
        .filter(|r| r.2 != RunOutcome::Succeeded)
        .collect();
    assert!(
        !lost.is_empty() && lost.len() <= MOST,
        "the kill lost {} runs of the round, at most its share ({MOST}) expected: {round:?}",
        lost.len()
    );
    assert!(
        lost.iter()
            .all(|r| r.1 == REPLICAS[victim] && r.2 == RunOutcome::Abandoned),
        "only the killed replica's runs are lost: {round:?}"
    );
    // The survivors go on with whole rounds.
    eventually(
        Duration::from_secs(60),
        "a whole round after the kill",
        || async {
            let all = rounds(&admin, killed_round).await;
            all.values()
                .skip(1)
                .any(|round| {
                    round.len() == JOBS.len()
                        && round.iter().all(|r| r.2 == RunOutcome::Succeeded)
                        && round.iter().all(|r| r.1 != REPLICAS[victim])
                })
                .then_some(())
        },
    )
    .await;
}
