//! Job groups (issue 31): two jobs of a `max = 1` group, both due every second, run by three
//! replica processes (`group-replica` workers) never overlap, and neither starves; an
//! occurrence that gets no slot before its job's next occurrence is recorded `skipped_group`
//! (and the job runs again once a slot is free); a run cancelled by a shutdown while it waits
//! for a slot leaves the group's queue and is recorded cancelled; a replica that declared
//! another `max` than the one in force fails its runs instead of running beside it; `build()`
//! refuses what cannot work. On one server: the semaphore behind a group is dlock-core's, proven on a
//! cluster in `semaphore.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, UNIX_EPOCH};

use dlock_core::{Client, MutexOptions};
use dlock_scheduler::{ErrorKind, Job, JobContext, RunOutcome, RunRecord, Scheduler};
use redis::AsyncCommands;

use crate::scheduler::scheduler_exactly_once::wait_stopped;
use crate::scheduler::scheduler_shutdown::terminate;
use crate::support::{Worker, client, eventually, raw, redis};

/// Runs of each job to see before stopping: "several", with both jobs due every second.
const RUNS_EACH: usize = 5;

fn spawn(url: &str, id: &str) -> Worker {
    let args: Vec<String> = vec![
        "group-replica".into(),
        format!("url={url}"),
        format!("id={id}"),
        "max=1".into(),
        "work_ms=500".into(),
    ];
    let worker = Worker::spawn(&args);
    assert_eq!(worker.line(Duration::from_secs(30)), "started");
    worker
}

/// One run of the group as the worker logged it: `(job, replica, start µs, end µs)`.
type Interval = (String, String, u64, u64);

/// Reads the worker's event log (`start|end <job> <µs> <inside> <replica>`, in the server's
/// order) into the runs' intervals, checking on the way that a run started only when no other
/// run of the group was inside, and that every run that started ended.
fn intervals(events: &[String]) -> Vec<Interval> {
    let mut open: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut runs = Vec::new();
    for event in events {
        let f: Vec<&str> = event.split(' ').collect();
        let [kind, job, us, inside, replica] = f[..] else {
            panic!("bad event {event:?}");
        };
        let (us, inside): (u64, i64) = (us.parse().unwrap(), inside.parse().unwrap());
        let key = (job.to_owned(), replica.to_owned());
        match kind {
            "start" => {
                assert_eq!(
                    inside,
                    1,
                    "{job} on {replica} started while {} other run(s) of the group were inside: \
                     {events:#?}",
                    inside - 1
                );
                assert!(open.insert(key, us).is_none(), "{event}");
            }
            "end" => {
                assert_eq!(inside, 0, "{event}: {events:#?}");
                let start = open.remove(&key).expect("an end without a start");
                runs.push((job.to_owned(), replica.to_owned(), start, us));
            }
            other => panic!("bad event kind {other:?}"),
        }
    }
    assert!(open.is_empty(), "runs that never ended: {open:?}");
    runs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_jobs_of_a_group_of_one_never_overlap_across_replicas_and_neither_starves() {
    let server = redis();
    let url = server.url();
    let workers: Vec<Worker> = ["r1", "r2", "r3"]
        .iter()
        .map(|id| spawn(&url, id))
        .collect();
    let con = raw(&server).await;
    // Both jobs are due at every second and each run works 500 ms: the group is full all the
    // time, so every second the two jobs compete for the one slot, on any of the replicas.
    eventually(
        Duration::from_secs(60),
        "both jobs ran several times",
        || {
            let mut con = con.clone();
            async move {
                let events: Vec<String> = con.lrange("group:events", 0, -1).await.ok()?;
                let started = |job: &str| {
                    let prefix = format!("start {job} ");
                    events.iter().filter(|e| e.starts_with(&prefix)).count()
                };
                (started("a") >= RUNS_EACH && started("b") >= RUNS_EACH).then_some(())
            }
        },
    )
    .await;
    for worker in &workers {
        terminate(worker);
    }
    for worker in &workers {
        let stopped = wait_stopped(worker, Duration::from_secs(30));
        println!("{stopped}");
    }

    let events: Vec<String> = con.clone().lrange("group:events", 0, -1).await.unwrap();
    let mut runs = intervals(&events);
    runs.sort_by_key(|r| r.2);
    for pair in runs.windows(2) {
        assert!(
            pair[0].3 <= pair[1].2,
            "two runs of the group overlapped: {:?} and {:?}",
            pair[0],
            pair[1]
        );
    }
    let count = |job: &str| runs.iter().filter(|r| r.0 == job).count();
    assert!(
        count("a") >= RUNS_EACH && count("b") >= RUNS_EACH,
        "{runs:#?}"
    );
    // For the record: where the runs went, and what the ledger says of the other occurrences.
    let admin = Scheduler::builder(Client::open(url.as_str()).unwrap())
        .build()
        .unwrap();
    for job in ["a", "b"] {
        let mut outcomes: BTreeMap<&str, usize> = BTreeMap::new();
        for run in admin.history(job).await.unwrap() {
            *outcomes.entry(run.outcome.code()).or_default() += 1;
        }
        let mut replicas: BTreeMap<&str, usize> = BTreeMap::new();
        for run in runs.iter().filter(|r| r.0 == job) {
            *replicas.entry(&run.1).or_default() += 1;
        }
        println!("job {job}: runs per replica {replicas:?}, ledger {outcomes:?}");
        assert!(outcomes.get("succeeded").copied().unwrap_or(0) >= RUNS_EACH);
    }
}

/// A handle on the semaphore behind group `group` (documented: `sched-group:<group>`), as the
/// test holds it to keep the group full.
fn group_slots(client: &Client, group: &str) -> dlock_core::Semaphore {
    let options = MutexOptions::new().watchdog();
    client
        .semaphore_with(&format!("sched-group:{group}"), 1, options)
        .unwrap()
}

fn skipped_group(runs: &[RunRecord]) -> Vec<&RunRecord> {
    runs.iter()
        .filter(|r| r.outcome == RunOutcome::SkippedGroup)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_occurrence_without_a_slot_until_the_next_one_is_recorded_skipped_group() {
    let server = redis();
    let client = client(&server);
    // The test fills the group: no run of its job may start until it lets go.
    let held = Arc::new(AtomicBool::new(true));
    let slot = group_slots(&client, "full").acquire(1).await.unwrap();
    let (ran, ran_while_held) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (h, r, w) = (held.clone(), ran.clone(), ran_while_held.clone());
    let job = Job::new("starved", "* * * * * *", "UTC", move |_ctx: JobContext| {
        let (h, r, w) = (h.clone(), r.clone(), w.clone());
        async move {
            if h.load(Ordering::SeqCst) {
                w.fetch_add(1, Ordering::SeqCst);
            }
            r.fetch_add(1, Ordering::SeqCst);
            Ok::<(), String>(())
        }
    })
    .unwrap()
    .group("full");
    let scheduler = Scheduler::builder(client.clone())
        .group("full", 1)
        .job(job)
        .build()
        .unwrap();
    let observer = scheduler.clone();
    let (held_flag, ran_count) = (held.clone(), ran.clone());
    let scenario = async move {
        eventually(
            Duration::from_secs(30),
            "two occurrences skipped",
            || async {
                let runs = observer.history("starved").await.ok()?;
                (skipped_group(&runs).len() >= 2).then_some(())
            },
        )
        .await;
        held_flag.store(false, Ordering::SeqCst);
        slot.release().await.unwrap();
        eventually(
            Duration::from_secs(30),
            "a run once the slot is free",
            || {
                let ran = ran_count.clone();
                async move { (ran.load(Ordering::SeqCst) > 0).then_some(()) }
            },
        )
        .await;
    };
    scheduler.run_until(scenario, Duration::from_secs(5)).await;

    assert_eq!(
        ran_while_held.load(Ordering::SeqCst),
        0,
        "ran without a slot"
    );
    let runs = scheduler.history("starved").await.unwrap();
    let skipped = skipped_group(&runs);
    assert!(skipped.len() >= 2, "{runs:#?}");
    for run in &skipped {
        // It waited for a slot (until shortly before the next occurrence), not skipped at once.
        let occurrence = UNIX_EPOCH
            + Duration::from_millis(u64::try_from(run.occurrence.timestamp_millis()).unwrap());
        let ended = run.ended_at.expect("a skipped run has ended");
        let waited = ended.duration_since(occurrence).unwrap_or_default();
        assert!(waited >= Duration::from_millis(500), "{run:#?}");
        assert!(!run.manual && run.fencing_token.is_some(), "{run:#?}");
    }
    assert!(
        runs.iter().any(|r| r.outcome == RunOutcome::Succeeded),
        "{runs:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_waiting_for_a_slot_at_shutdown_leaves_the_queue_and_is_recorded_cancelled() {
    let server = redis();
    let client = client(&server);
    let slots = group_slots(&client, "busy");
    let slot = slots.acquire(1).await.unwrap();
    // Once a year: a `run_now` run waits for a slot until the next one, months away.
    let job = Job::new("yearly", "0 0 0 1 1 *", "UTC", |_ctx: JobContext| async {
        Ok::<(), String>(())
    })
    .unwrap()
    .group("busy");
    // The client stays up after the scheduler: what leaves the queue is the cancelled wait,
    // not the client's shutdown.
    let scheduler = Scheduler::builder(client.clone())
        .group("busy", 1)
        .job(job)
        .shutdown_client(false)
        .build()
        .unwrap();
    let (observer, inspector) = (scheduler.clone(), client.clone());
    let scenario = async move {
        observer.force_run_now("yearly").await.unwrap();
        eventually(Duration::from_secs(30), "the run waits for a slot", || {
            let inspector = inspector.clone();
            async move {
                let info = inspector
                    .inspect_semaphore("sched-group:busy")
                    .await
                    .ok()??;
                (info.waiters == 1).then_some(())
            }
        })
        .await;
    };
    let stopped = scheduler.run_until(scenario, Duration::from_secs(5)).await;
    // The wait ends when the shutdown begins (not at the drain deadline): the run may have
    // ended before the drain counted it, so only "not cancelled at the deadline" is certain.
    assert_eq!(stopped.cancelled, 0, "{stopped:?}");

    let runs = scheduler.history("yearly").await.unwrap();
    let [run] = &runs[..] else {
        panic!("one run: {runs:#?}")
    };
    assert!(
        matches!(&run.outcome, RunOutcome::Cancelled(why)
            if why.contains("shut down while the run waited for a slot of group `busy`")),
        "{run:#?}"
    );
    // dlock-core leaves the queue in the background when a wait is dropped.
    let info = eventually(Duration::from_secs(10), "the cancelled wait left", || {
        let client = client.clone();
        async move {
            let info = client.inspect_semaphore("sched-group:busy").await.ok()??;
            (info.waiters == 0).then_some(info)
        }
    })
    .await;
    assert_eq!(info.holders.len(), 1, "the test's slot: {info:?}");
    slot.release().await.unwrap();
    client.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_declared_another_max_fails_its_runs_while_the_group_is_in_use() {
    let server = redis();
    let client = client(&server);
    // Another replica declared `max = 2` and holds a slot: the semaphore keeps its limit.
    let other = client
        .semaphore_with("sched-group:mixed", 2, MutexOptions::new().watchdog())
        .unwrap();
    let slot = other.acquire(1).await.unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let job = Job::new(
        "mismatched",
        "* * * * * *",
        "UTC",
        move |_ctx: JobContext| {
            r.fetch_add(1, Ordering::SeqCst);
            async { Ok::<(), String>(()) }
        },
    )
    .unwrap()
    .group("mixed");
    let scheduler = Scheduler::builder(client.clone())
        .group("mixed", 1)
        .job(job)
        .build()
        .unwrap();
    let observer = scheduler.clone();
    let failed = async move {
        eventually(Duration::from_secs(30), "a failed run", || async {
            let runs = observer.history("mismatched").await.ok()?;
            runs.into_iter()
                .find(|r| matches!(r.outcome, RunOutcome::Failed(_)))
        })
        .await
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let scenario = async move {
        let _ = tx.send(failed.await);
    };
    scheduler.run_until(scenario, Duration::from_secs(5)).await;
    let run = rx.await.unwrap();
    assert!(
        matches!(&run.outcome, RunOutcome::Failed(why)
            if why.contains("slot of group `mixed`") && why.contains("limit of 2")),
        "{run:#?}"
    );
    assert_eq!(
        ran.load(Ordering::SeqCst),
        0,
        "ran beside a slot of another limit"
    );
    slot.release().await.unwrap();
}

#[tokio::test]
async fn build_refuses_groups_that_cannot_work() {
    let client = Client::open("redis://127.0.0.1:1/").unwrap();
    let job = |group: &str| {
        Job::new("vacuum", "0 3 * * *", "UTC", |_ctx: JobContext| async {
            Ok::<(), String>(())
        })
        .unwrap()
        .group(group)
    };
    let refused = |builder: dlock_scheduler::SchedulerBuilder| {
        let e = builder.build().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidJob, "{e}");
        e.to_string()
    };
    let builder = || Scheduler::builder(client.clone());
    let undeclared = refused(builder().group("db", 1).job(job("dbb")));
    assert!(
        undeclared.contains("`dbb`, which is not declared") && undeclared.contains("`db`"),
        "{undeclared}"
    );
    let twice = refused(builder().group("db", 1).group("db", 2).job(job("db")));
    assert!(twice.contains("declared twice"), "{twice}");
    let zero = refused(builder().group("db", 0).job(job("db")));
    assert!(zero.contains("max 0"), "{zero}");
    let braces = refused(builder().group("db{1}", 1));
    assert!(
        braces.contains("group name") && braces.contains("braces"),
        "{braces}"
    );
    assert!(builder().group("db", 2).job(job("db")).build().is_ok());
}
