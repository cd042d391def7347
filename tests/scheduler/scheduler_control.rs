//! Operating jobs across replicas through Redis: pause and resume are honoured by every
//! replica; `run_now` runs the job once, on one replica, woken by pub/sub on the client's own
//! connection (not by the slow fallback poll) — on a standalone server and on a cluster — and a
//! request made while the job is paused is kept until it is resumed, then run at once (the
//! resume wakes the replicas). A job that is not known (not registered, no ledger, no pause
//! record: a typo) is refused with close names, unless forced.

use std::time::Duration;

use dlock_core::Client;
use dlock_scheduler::{ErrorKind, Job, JobContext, Scheduler};
use dlock_testkit::RedisCluster;
use redis::AsyncCommands;

use crate::scheduler::scheduler_exactly_once::{replica, wait_stopped};
use crate::support::{eventually, raw, redis};

/// Waits until a running replica has registered `job` (the control calls refuse a job that is
/// not known yet).
pub(crate) async fn registered(admin: &Scheduler, job: &str) {
    eventually(Duration::from_secs(20), "the job is registered", || async {
        let replicas = admin.registered_replicas().await.unwrap();
        replicas
            .iter()
            .any(|r| r.jobs.iter().any(|j| j.name == job))
            .then_some(())
    })
    .await;
}

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

    registered(&admin, "ctl").await;
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
    registered(&admin, "manual").await;
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

/// A schedule that does not fire during a test: only `run_now` runs the job.
const YEARLY: &str = "0 0 1 1 *";

async fn manual_runs(admin: &Scheduler, job: &str) -> usize {
    admin
        .history(job)
        .await
        .map_or(0, |h| h.iter().filter(|r| r.manual).count())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_now_wakes_a_replica_instead_of_waiting_for_the_poll() {
    let server = redis();
    let url = server.url();
    // The fallback poll comes once a minute: only the wake-up can run the request in time.
    let opts = ["run_ms=20000", "poll_ms=60000"];
    let a = replica(&url, "woken", YEARLY, "a", &opts);
    let b = replica(&url, "woken", YEARLY, "b", &opts);
    let admin = Scheduler::builder(Client::open(url.as_str()).unwrap())
        .build()
        .unwrap();
    // Both replicas subscribed once they answered their first poll (at start-up): wait for
    // a request made before that to be taken, then make the one the wake-up must deliver.
    registered(&admin, "woken").await;
    admin.run_now("woken").await.unwrap();
    eventually(Duration::from_secs(10), "the first request ran", || async {
        (manual_runs(&admin, "woken").await == 1).then_some(())
    })
    .await;
    admin.run_now("woken").await.unwrap();
    eventually(
        Duration::from_secs(10),
        "the woken replica ran the request",
        || async { (manual_runs(&admin, "woken").await == 2).then_some(()) },
    )
    .await;
    for worker in [&a, &b] {
        wait_stopped(worker, Duration::from_secs(60));
    }
    assert_eq!(
        manual_runs(&admin, "woken").await,
        2,
        "each request ran once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_now_made_while_paused_runs_after_resume() {
    let server = redis();
    let url = server.url();
    // The fallback poll comes once a minute: after `resume`, only a wake-up runs the request
    // in time (it waited for the poll before).
    let a = replica(
        &url,
        "held",
        YEARLY,
        "a",
        &["run_ms=15000", "poll_ms=60000"],
    );
    let admin = Scheduler::builder(Client::open(url.as_str()).unwrap())
        .build()
        .unwrap();
    registered(&admin, "held").await;
    admin.pause("held").await.unwrap();
    admin.run_now("held").await.unwrap();
    // The replica is woken by the request; give it time to take it (nothing to await: the
    // point is that nothing happens).
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(
        manual_runs(&admin, "held").await,
        0,
        "a paused job does not run"
    );
    let mut con = raw(&server).await;
    let pending: usize = con.llen("dlock:{sched:held}:requests").await.unwrap();
    assert_eq!(pending, 1, "the request is kept while the job is paused");

    admin.resume("held").await.unwrap();
    eventually(
        Duration::from_secs(20),
        "the request ran after resume",
        || async { (manual_runs(&admin, "held").await == 1).then_some(()) },
    )
    .await;
    wait_stopped(&a, Duration::from_secs(60));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_now_wakes_a_replica_on_a_cluster() {
    // The replica listens with SSUBSCRIBE; run_now's script must SPUBLISH on a channel of its
    // own keys' slot for the message to arrive.
    let cluster =
        RedisCluster::start().unwrap_or_else(|e| panic!("could not start a cluster: {e}"));
    let client = || Client::cluster_builder(cluster.urls()).build().unwrap();
    let job = Job::new("sharded", YEARLY, "UTC", |_: JobContext| async {
        Ok::<(), String>(())
    })
    .unwrap();
    // The fallback poll comes once a minute: only the wake-up can run the request in time.
    let replica = Scheduler::builder(client())
        .request_poll(Duration::from_secs(60))
        .job(job)
        .build()
        .unwrap();
    let stop = std::sync::Arc::new(tokio::sync::Notify::new());
    let running = tokio::spawn({
        let (replica, stop) = (replica.clone(), stop.clone());
        async move {
            replica
                .run_until(stop.notified(), Duration::from_secs(5))
                .await
        }
    });
    let admin = Scheduler::builder(client()).build().unwrap();
    // The first request is taken by the poll at start-up (or by the wake-up); the second only
    // by the wake-up.
    registered(&admin, "sharded").await;
    admin.run_now("sharded").await.unwrap();
    eventually(Duration::from_secs(10), "the first request ran", || async {
        (manual_runs(&admin, "sharded").await == 1).then_some(())
    })
    .await;
    admin.run_now("sharded").await.unwrap();
    eventually(
        Duration::from_secs(10),
        "the woken replica ran the request",
        || async { (manual_runs(&admin, "sharded").await == 2).then_some(()) },
    )
    .await;
    stop.notify_one();
    let report = running.await.unwrap();
    assert_eq!(report.cancelled, 0, "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_jobs_are_refused_with_close_names_unless_forced() {
    let server = redis();
    let url = server.url();
    let job = Job::new("nightly-report", YEARLY, "UTC", |_: JobContext| async {
        Ok::<(), String>(())
    })
    .unwrap();
    let replica = Scheduler::builder(Client::open(url.as_str()).unwrap())
        .job(job)
        .build()
        .unwrap();
    let stop = std::sync::Arc::new(tokio::sync::Notify::new());
    let running = tokio::spawn({
        let (replica, stop) = (replica.clone(), stop.clone());
        async move {
            replica
                .run_until(stop.notified(), Duration::from_secs(5))
                .await
        }
    });
    let admin = Scheduler::builder(Client::open(url.as_str()).unwrap())
        .build()
        .unwrap();
    registered(&admin, "nightly-report").await;

    // A typo: refused, naming the job and the close name; nothing is written.
    let errors = [
        admin.pause("nightly-reprot").await.unwrap_err(),
        admin.resume("nightly-reprot").await.unwrap_err(),
        admin.run_now("nightly-reprot").await.unwrap_err(),
    ];
    for err in errors {
        assert_eq!(err.kind(), ErrorKind::UnknownJob, "{err}");
        let text = err.to_string();
        assert!(text.contains("`nightly-reprot`"), "{text}");
        assert!(text.contains("did you mean nightly-report"), "{text}");
    }
    let mut con = raw(&server).await;
    let keys: Vec<String> = con.keys("dlock:{sched:nightly-reprot}*").await.unwrap();
    assert!(keys.is_empty(), "an unknown job left {keys:?}");
    assert!(!admin.is_known("nightly-reprot").await.unwrap());

    // Forced: done; the pause record makes it known from then on.
    admin.force_pause("later-job").await.unwrap();
    assert!(admin.is_known("later-job").await.unwrap());
    admin.resume("later-job").await.unwrap();
    admin.force_run_now("later-job").await.unwrap();

    // Registered: known.
    admin.pause("nightly-report").await.unwrap();
    admin.resume("nightly-report").await.unwrap();

    stop.notify_one();
    running.await.unwrap();
    // A job with runs in the ledger stays known after its replicas stopped.
    let ledger = "dlock:{sched:gone}:ledger";
    let _: () = con.rpush(ledger, "x").await.unwrap();
    assert!(admin.is_known("gone").await.unwrap());
}
