//! dlock-tower's single-flight across processes: 100 callers in 3 worker processes compute
//! once; when the winner's process is killed mid-computation, exactly one successor computes
//! and every waiter gets the successor's result.

use std::time::Duration;

use redis::AsyncCommands;

use crate::support::{Worker, eventually, raw, redis};

fn spawn(url: &str, key: &str, callers: u32, compute_ms: u64) -> Worker {
    Worker::spawn(&[
        "single-flight".to_owned(),
        format!("url={url}"),
        format!("key={key}"),
        format!("callers={callers}"),
        format!("compute_ms={compute_ms}"),
    ])
}

/// The pids of a worker's `results` line, after its `computing` lines (if any).
fn results(worker: &Worker) -> (usize, Vec<u32>) {
    let mut computing = 0;
    loop {
        let line = worker.line(Duration::from_secs(60));
        if line == "computing" {
            computing += 1;
            continue;
        }
        let list = line
            .strip_prefix("results ")
            .unwrap_or_else(|| panic!("{line}"));
        return (
            computing,
            list.split(',').map(|p| p.parse().unwrap()).collect(),
        );
    }
}

/// Waits until `n` clients listen on the flight's channel (one subscription per process).
async fn listening(con: &redis::aio::MultiplexedConnection, channel: &str, n: i64) {
    eventually(Duration::from_secs(30), "the waiters listen", || {
        let mut con = con.clone();
        async move {
            let counts: Vec<(String, i64)> = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg(channel)
                .query_async(&mut con)
                .await
                .ok()?;
            counts.first().is_some_and(|(_, c)| *c >= n).then_some(())
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_callers_in_three_processes_compute_once() {
    let server = redis();
    let url = server.url();
    let mut con = raw(&server).await;
    // The first process computes for a while; the others join it, then it finishes.
    let first = spawn(&url, "report", 34, 1_500);
    assert_eq!(first.line(Duration::from_secs(30)), "computing");
    let others = [spawn(&url, "report", 33, 10), spawn(&url, "report", 33, 10)];
    listening(&con, "singleflight:{sf:report}:done", 3).await;
    let winner = first.child().pid();
    let mut computed = 0;
    for worker in others.iter().chain([&first]) {
        let (n, pids) = results(worker);
        computed += n;
        assert!(pids.iter().all(|p| *p == winner), "{pids:?}");
    }
    assert_eq!(computed, 0, "computing lines after the first");
    let count: u64 = con.get("report:computed").await.unwrap();
    assert_eq!(count, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_winner_is_succeeded_by_exactly_one_caller() {
    let server = redis();
    let url = server.url();
    let mut con = raw(&server).await;
    let mut first = spawn(&url, "prices", 1, 60_000);
    assert_eq!(first.line(Duration::from_secs(30)), "computing");
    let others = [
        spawn(&url, "prices", 50, 300),
        spawn(&url, "prices", 50, 300),
    ];
    listening(&con, "singleflight:{sf:prices}:done", 2).await;
    first.child_mut().kill();
    let (mut computed, mut all) = (0, Vec::new());
    for worker in &others {
        let (n, pids) = results(worker);
        computed += n;
        all.extend(pids);
    }
    assert_eq!(computed, 1, "not exactly one successor computed");
    let successor = all[0];
    assert!(all.iter().all(|p| *p == successor), "{all:?}");
    assert!(others.iter().any(|w| w.child().pid() == successor));
    let count: u64 = con.get("prices:computed").await.unwrap();
    assert_eq!(count, 2, "the killed winner and one successor");
}
