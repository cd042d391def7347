//! Run-time schedules across replica processes (`schedule-replica` workers): three replicas
//! with the handler `tick`, one without (an older deploy). A schedule added by another process
//! (an admin scheduler that never runs) fires on the replicas with the handler within a second
//! of its first due time, once per occurrence, with its arguments; the replica without the
//! handler never claims it and says why in the registry; `run_now` works on it; once removed,
//! it is never fired again; a schedule whose handler no replica has is listed as such; bad
//! input is refused at `add_schedule`.

use std::collections::BTreeMap;
use std::time::Duration;

use dlock_core::Client;
use dlock_scheduler::{ErrorKind, Scheduler};
use redis::AsyncCommands;
use serde_json::json;

use crate::support::{Worker, eventually, raw, redis};

fn spawn(url: &str, id: &str, handler: bool) -> Worker {
    let args: Vec<String> = vec![
        "schedule-replica".into(),
        format!("url={url}"),
        format!("id={id}"),
        format!("handler={}", u8::from(handler)),
    ];
    let worker = Worker::spawn(&args);
    assert_eq!(worker.line(Duration::from_secs(30)), "started");
    worker
}

/// One line of `runtime:fired`.
#[derive(Debug)]
struct Fired {
    job: String,
    occurrence: i64,
    at: i64,
    replica: String,
    mark: String,
    manual: bool,
}

async fn fired(con: &mut redis::aio::MultiplexedConnection) -> Vec<Fired> {
    let lines: Vec<String> = con.lrange("runtime:fired", 0, -1).await.unwrap();
    lines
        .iter()
        .map(|line| {
            let f: Vec<&str> = line.split(' ').collect();
            Fired {
                job: f[0].to_owned(),
                occurrence: f[1].parse().unwrap(),
                at: f[2].parse().unwrap(),
                replica: f[3].to_owned(),
                mark: f[4].to_owned(),
                manual: f[5] == "1",
            }
        })
        .collect()
}

async fn server_ms(con: &mut redis::aio::MultiplexedConnection) -> i64 {
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(con).await.unwrap();
    secs * 1000 + micros / 1000
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_added_at_run_time_fires_once_per_occurrence_where_its_handler_is() {
    let server = redis();
    let url = server.url();
    let _workers: Vec<Worker> = [("a", true), ("b", true), ("c", true), ("d", false)]
        .iter()
        .map(|(id, handler)| spawn(&url, id, *handler))
        .collect();
    // An admin process: it has the handlers (so it may add schedules naming them) but never
    // runs the scheduler.
    let admin = Scheduler::builder(Client::open(url.as_str()).unwrap())
        .handler("tick", |_| async { Ok::<(), String>(()) })
        .handler("export", |_| async { Ok::<(), String>(()) })
        .build()
        .unwrap();
    let mut con = raw(&server).await;
    eventually(
        Duration::from_secs(20),
        "four replicas registered",
        || async {
            let replicas = admin.registered_replicas().await.unwrap();
            (replicas.len() == 4).then_some(())
        },
    )
    .await;

    // Bad input is refused before anything is stored.
    let mark = |m: &str| json!({ "mark": m });
    let bad_cron = admin
        .add_schedule("bad", "tick", "61 * * * * *", "UTC", &mark("x"))
        .await
        .unwrap_err();
    assert_eq!(bad_cron.kind(), ErrorKind::InvalidSchedule, "{bad_cron}");
    let bad_zone = admin
        .add_schedule("bad", "tick", "* * * * * *", "Mars/Olympus", &mark("x"))
        .await
        .unwrap_err();
    assert_eq!(bad_zone.kind(), ErrorKind::InvalidSchedule, "{bad_zone}");
    let typo = admin
        .add_schedule("bad", "tik", "* * * * * *", "UTC", &mark("x"))
        .await
        .unwrap_err();
    assert_eq!(typo.kind(), ErrorKind::InvalidJob);
    assert!(typo.to_string().contains("did you mean tick"), "{typo}");
    let braces = admin
        .add_schedule("a{b}", "tick", "* * * * * *", "UTC", &mark("x"))
        .await
        .unwrap_err();
    assert_eq!(braces.kind(), ErrorKind::InvalidJob);
    assert!(admin.schedules().await.unwrap().is_empty());

    // Added: fired within a second of its first due time, once per occurrence, by a, b or c.
    let added = server_ms(&mut con).await;
    admin
        .add_schedule("every-second", "tick", "* * * * * *", "UTC", &mark("m1"))
        .await
        .unwrap();
    let first_due = (added / 1000 + 1) * 1000;
    eventually(
        Duration::from_secs(10),
        "four occurrences fired",
        || async {
            let n = fired(&mut raw(&server).await)
                .await
                .iter()
                .filter(|f| f.job == "every-second")
                .count();
            (n >= 4).then_some(())
        },
    )
    .await;
    let runs = fired(&mut con).await;
    let first = runs
        .iter()
        .find(|f| f.occurrence == first_due)
        .unwrap_or_else(|| panic!("the first due occurrence {first_due} was not fired: {runs:?}"));
    assert!(
        first.at - first_due < 1000,
        "the first occurrence fired {} ms after it was due",
        first.at - first_due
    );
    assert!(runs.iter().all(|f| f.mark == "m1"), "{runs:?}");

    // The replica without the handler says why it does not run it.
    let reason = eventually(Duration::from_secs(10), "d lists it unrunnable", || async {
        let replicas = admin.registered_replicas().await.unwrap();
        let d = replicas.iter().find(|r| r.id == "d")?;
        let not_run = d.unrunnable.iter().find(|u| u.name == "every-second")?;
        Some(not_run.reason.clone())
    })
    .await;
    assert!(reason.contains("`tick` is not registered"), "{reason}");

    // run_now reaches a run-time schedule (it is a job like any other).
    admin.run_now("every-second").await.unwrap();
    eventually(Duration::from_secs(10), "the manual run", || async {
        let runs = fired(&mut raw(&server).await).await;
        runs.iter()
            .any(|f| f.job == "every-second" && f.manual)
            .then_some(())
    })
    .await;

    // A schedule no live replica can run is listed as such, with each replica's reason.
    admin
        .add_schedule("export-nightly", "export", "0 3 * * *", "UTC", &())
        .await
        .unwrap();
    let orphan = eventually(Duration::from_secs(10), "the orphan listed", || async {
        let overview = admin.overview().await.unwrap();
        let job = overview.into_iter().find(|j| j.name == "export-nightly")?;
        (job.not_run_by.len() == 4).then_some(job)
    })
    .await;
    assert!(orphan.is_unrunnable());
    assert!(orphan.replicas.is_empty());
    assert_eq!(orphan.runtime.as_ref().unwrap().handler, "export");

    // Removed: every replica stops; nothing due after the removal is fired.
    assert!(admin.remove_schedule("every-second").await.unwrap());
    let removed = server_ms(&mut con).await;
    assert!(!admin.remove_schedule("every-second").await.unwrap());
    eventually(Duration::from_secs(10), "no replica runs it", || async {
        let replicas = admin.registered_replicas().await.unwrap();
        let still = replicas
            .iter()
            .any(|r| r.jobs.iter().any(|j| j.name == "every-second"));
        (!still).then_some(())
    })
    .await;
    // Time passes while the replicas run: a second schedule fires three times.
    admin
        .add_schedule("marker", "tick", "* * * * * *", "UTC", &mark("m2"))
        .await
        .unwrap();
    eventually(
        Duration::from_secs(10),
        "the marker fired thrice",
        || async {
            let runs = fired(&mut raw(&server).await).await;
            (runs.iter().filter(|f| f.job == "marker").count() >= 3).then_some(())
        },
    )
    .await;
    let runs = fired(&mut con).await;
    // Replicas pick a change up within a second (at once over pub/sub, else at their next
    // heartbeat): nothing due later than that ran.
    let late: Vec<&Fired> = runs
        .iter()
        .filter(|f| f.job == "every-second" && !f.manual && f.occurrence > removed + 1000)
        .collect();
    assert!(late.is_empty(), "fired after its removal: {late:?}");

    // Each occurrence exactly once, never by d.
    let mut per_occurrence: BTreeMap<(&str, i64), usize> = BTreeMap::new();
    for f in runs.iter().filter(|f| !f.manual) {
        *per_occurrence
            .entry((f.job.as_str(), f.occurrence))
            .or_default() += 1;
    }
    assert!(
        per_occurrence.values().all(|&n| n == 1),
        "an occurrence ran twice: {per_occurrence:?}"
    );
    assert!(runs.iter().all(|f| f.replica != "d"), "{runs:?}");
    let mut by_replica: BTreeMap<&str, usize> = BTreeMap::new();
    for f in &runs {
        *by_replica.entry(f.replica.as_str()).or_default() += 1;
    }
    eprintln!("runs per replica: {by_replica:?}");
}

/// On a Redis Cluster: the schedules' keys share one slot (`{sched:}`), `schedule.lua`
/// publishes with `SPUBLISH` on it and the replicas listen with `SSUBSCRIBE`; one-off jobs live
/// in their handler's slot. The replica's heartbeat (and so its poll of the schedules) is a
/// minute: only the wake-up can start and stop the schedule in time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_time_schedules_and_one_off_jobs_work_on_a_cluster() {
    use dlock_testkit::RedisCluster;
    let cluster =
        RedisCluster::start().unwrap_or_else(|e| panic!("could not start a cluster: {e}"));
    let client = || Client::cluster_builder(cluster.urls()).build().unwrap();
    let (ran, mut runs) = tokio::sync::mpsc::unbounded_channel::<(String, String)>();
    let replica = Scheduler::builder(client())
        .heartbeat(Duration::from_secs(60))
        .handler("tick", move |ctx| {
            let ran = ran.clone();
            async move {
                let mark: serde_json::Value = ctx.args()?;
                let _ = ran.send((ctx.job().to_owned(), mark["mark"].to_string()));
                Ok::<(), dlock_scheduler::Error>(())
            }
        })
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
    let admin = Scheduler::builder(client())
        .handler("tick", |_| async { Ok::<(), String>(()) })
        .build()
        .unwrap();
    eventually(
        Duration::from_secs(20),
        "the replica registered",
        || async { (admin.registered_replicas().await.unwrap().len() == 1).then_some(()) },
    )
    .await;
    admin
        .add_schedule(
            "sharded",
            "tick",
            "* * * * * *",
            "UTC",
            &json!({ "mark": "s" }),
        )
        .await
        .unwrap();
    let next = |runs: &mut tokio::sync::mpsc::UnboundedReceiver<(String, String)>| {
        let got = runs.try_recv();
        async move { got.ok() }
    };
    let first = eventually(Duration::from_secs(10), "the schedule fired", || {
        next(&mut runs)
    })
    .await;
    assert_eq!(first, ("sharded".to_owned(), "\"s\"".to_owned()));
    let id = admin
        .run_after("tick", Duration::ZERO, &json!({ "mark": "o" }))
        .await
        .unwrap();
    eventually(Duration::from_secs(10), "the one-off ran", || async {
        let run = admin.one_off(&id).await.unwrap()?;
        (run.outcome == dlock_scheduler::RunOutcome::Succeeded).then_some(())
    })
    .await;
    assert!(admin.remove_schedule("sharded").await.unwrap());
    // The replica's own overview lists its jobs (its registry entry is a minute old): the
    // schedule leaves them once the replica has stopped its loop.
    eventually(
        Duration::from_secs(10),
        "the replica stopped it",
        || async {
            let overview = replica.overview().await.unwrap();
            overview.iter().all(|j| j.name != "sharded").then_some(())
        },
    )
    .await;
    stop.notify_one();
    let report = running.await.unwrap();
    assert_eq!(report.cancelled, 0, "{report:?}");
}
