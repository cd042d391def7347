//! Operating jobs across replicas through Redis: pause and resume are honoured by every
//! replica, and `run_now` runs the job once, on one replica.

use std::time::Duration;

use dlock_core::Client;
use dlock_scheduler::Scheduler;
use redis::AsyncCommands;

use crate::scheduler_exactly_once::{replica, wait_stopped};
use crate::support::{eventually, raw, redis};

async fn runs(con: &mut redis::aio::MultiplexedConnection, job: &str) -> usize {
    con.llen(format!("{job}:runs")).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_and_resume_apply_to_every_replica() {
    let server = redis();
    let url = server.url();
    let a = replica(&url, "ctl", "* * * * * *", "a", &["run_ms=12000"]);
    let b = replica(&url, "ctl", "* * * * * *", "b", &["run_ms=12000"]);
    let admin = Scheduler::builder(Client::open(url.as_str()).unwrap())
        .build()
        .unwrap();
    let mut con = raw(&server).await;
    eventually(Duration::from_secs(10), "two runs", || {
        let mut con = con.clone();
        async move { (runs(&mut con, "ctl").await >= 2).then_some(()) }
    })
    .await;

    admin.pause("ctl").await.unwrap();
    assert!(admin.is_paused("ctl").await.unwrap());
    tokio::time::sleep(Duration::from_millis(1_200)).await; // a run already claimed may finish
    let paused_at = runs(&mut con, "ctl").await;
    tokio::time::sleep(Duration::from_millis(3_000)).await;
    assert_eq!(
        runs(&mut con, "ctl").await,
        paused_at,
        "no replica runs a paused job"
    );

    admin.resume("ctl").await.unwrap();
    eventually(Duration::from_secs(10), "runs resume", || {
        let mut con = con.clone();
        async move { (runs(&mut con, "ctl").await > paused_at).then_some(()) }
    })
    .await;
    for worker in [&a, &b] {
        wait_stopped(worker, Duration::from_secs(60));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_now_runs_the_job_once_on_one_replica() {
    let server = redis();
    let url = server.url();
    // A schedule that does not fire during the test: only run_now runs it.
    let yearly = "0 0 1 1 *";
    let a = replica(&url, "manual", yearly, "a", &["run_ms=6000"]);
    let b = replica(&url, "manual", yearly, "b", &["run_ms=6000"]);
    let admin = Scheduler::builder(Client::open(url.as_str()).unwrap())
        .build()
        .unwrap();
    admin.run_now("manual").await.unwrap();

    let mut con = raw(&server).await;
    eventually(Duration::from_secs(5), "the requested run", || {
        let mut con = con.clone();
        async move { (runs(&mut con, "manual").await == 1).then_some(()) }
    })
    .await;
    for worker in [&a, &b] {
        wait_stopped(worker, Duration::from_secs(60));
    }
    assert_eq!(
        runs(&mut con, "manual").await,
        1,
        "exactly one replica ran it"
    );
    let history = admin.history("manual").await.unwrap();
    assert_eq!(history.len(), 1);
    assert!(history[0].manual, "{:?}", history[0]);
}
