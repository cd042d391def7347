//! A replica killed in the middle of a run: the occurrence is not run again by the others (at
//! most once), the ledger shows it abandoned, and the next occurrence runs normally.

use std::time::Duration;

use dlock_core::Client;
use dlock_scheduler::{RunOutcome, Scheduler};
use redis::AsyncCommands;

use crate::scheduler_exactly_once::replica;
use crate::support::{eventually, raw, redis};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_run_is_not_repeated_and_is_recorded_abandoned() {
    let server = redis();
    let url = server.url();
    // Every 3 s; each run works 2.5 s under a 900 ms lease renewed by the watchdog.
    let opts = ["run_ms=30000", "work_ms=2500", "lease_ms=900"];
    let mut a = replica(&url, "slow", "*/3 * * * * *", "a", &opts);
    let mut b = replica(&url, "slow", "*/3 * * * * *", "b", &opts);
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
    victim.child.kill();

    let admin = Scheduler::builder(Client::open(url.as_str()).unwrap())
        .build()
        .unwrap();
    // The survivor runs the next occurrence (the job is not stuck) …
    eventually(Duration::from_secs(20), "the next occurrence ran", || {
        let mut con = con.clone();
        async move {
            let next: Option<u64> = con
                .get(format!("slow:count:{}", occurrence + 3000))
                .await
                .ok()?;
            next.map(|_| ())
        }
    })
    .await;
    // … but never the killed one again, which the ledger reports as abandoned.
    let count: u64 = con.get(format!("slow:count:{occurrence}")).await.unwrap();
    assert_eq!(count, 1, "the killed occurrence ran again");
    let history = admin.history("slow").await.unwrap();
    let killed = history
        .iter()
        .find(|r| r.occurrence.timestamp_millis() == occurrence)
        .expect("the killed run is in the ledger");
    assert_eq!(killed.outcome, RunOutcome::Abandoned, "{killed:?}");
    assert_eq!(killed.replica, runner);
}
