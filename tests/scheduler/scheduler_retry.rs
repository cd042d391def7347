//! At-least-once delivery across three replica processes (`retry-replica` workers): a 1 s cron
//! with a 1 s run lease and overlapping runs allowed, for 30 occurrences. In a third of them
//! the replica running the first attempt is killed (SIGKILL, respawned at once) or stopped
//! (SIGSTOP) past the lease mid-run; in another third the first attempt fails. Every
//! occurrence must complete within its attempts, each attempt's fence must exceed the previous
//! one's, a store that checks fences must end with the last attempt's write and refuse a
//! superseded attempt's, a stopped attempt must learn it lost its lease within one renewal
//! interval of its resume, and the at-most-once job beside it must never run an occurrence
//! twice.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dlock_core::Client;
use dlock_scheduler::{RunOutcome, RunRecord, Scheduler};
use redis::AsyncCommands;

use crate::support::{Worker, raw, redis};

const ATTEMPTS: u32 = 3;
const LEASE: Duration = Duration::from_secs(1);
const BACKOFF: Duration = Duration::from_millis(200);
/// How long a stopped replica stays stopped: past its lease, the backoff and the next
/// attempt's start.
const STOPPED_FOR: Duration = Duration::from_millis(2500);
const OCCURRENCES: usize = 30;

fn spawn(url: &str, id: &str) -> Worker {
    let args: Vec<String> = vec![
        "retry-replica".into(),
        format!("url={url}"),
        format!("id={id}"),
        format!("attempts={ATTEMPTS}"),
        format!("backoff_ms={}", BACKOFF.as_millis()),
        format!("lease_ms={}", LEASE.as_millis()),
        "victim_work_ms=4000".into(),
    ];
    let worker = Worker::spawn(&args);
    assert_eq!(worker.line(Duration::from_secs(30)), "started");
    worker
}

fn now_ms() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    i64::try_from(since.as_millis()).unwrap()
}

/// A replica stopped by the test, to be resumed at `resume_at`.
struct Stopped {
    worker: usize,
    occurrence: i64,
    resume_at: Instant,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_occurrence_completes_within_its_attempts_with_increasing_fences() {
    let server = redis();
    let url = server.url();
    let ids = ["a", "b", "c"];
    let mut workers: Vec<Worker> = ids.iter().map(|id| spawn(&url, id)).collect();
    let mut con = raw(&server).await;

    // Drive the faults: each `victim <occ>` line is answered by a kill (respawned at once) or a
    // stop (resumed after STOPPED_FOR), alternately, until OCCURRENCES occurrences were fired.
    let mut victims: Vec<(i64, &str)> = Vec::new();
    let mut stopped: Vec<Stopped> = Vec::new();
    let mut resumed: BTreeMap<i64, i64> = BTreeMap::new();
    // When each victim was killed or stopped (ms, system clock = the server's here).
    let mut struck: BTreeMap<i64, i64> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(90);
    let first = loop {
        let attempts: Vec<String> = con.lrange("alo:attempts", 0, 0).await.unwrap();
        if let Some(line) = attempts.first() {
            break line.split(' ').next().unwrap().parse::<i64>().unwrap();
        }
        assert!(Instant::now() < deadline, "no run started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let last = first + 1000 * (OCCURRENCES as i64 - 1);
    while now_ms() < last + 1000 || !stopped.is_empty() {
        assert!(Instant::now() < deadline, "the run took too long");
        for i in 0..workers.len() {
            while let Some(line) = workers[i].try_line() {
                let Some(occ) = line.strip_prefix("victim ") else {
                    continue;
                };
                let occurrence: i64 = occ.parse().unwrap();
                if occurrence > last || stopped.iter().any(|s| s.worker == i) {
                    continue;
                }
                struck.insert(occurrence, now_ms());
                if victims.len().is_multiple_of(2) {
                    workers[i].child_mut().kill();
                    victims.push((occurrence, "killed"));
                    workers[i] = spawn(&url, ids[i]);
                    break;
                }
                workers[i].child().stop().unwrap();
                victims.push((occurrence, "stopped"));
                stopped.push(Stopped {
                    worker: i,
                    occurrence,
                    resume_at: Instant::now() + STOPPED_FOR,
                });
            }
        }
        let (due, waiting): (Vec<_>, Vec<_>) = stopped
            .drain(..)
            .partition(|s| Instant::now() >= s.resume_at);
        stopped = waiting;
        for s in due {
            workers[s.worker].child().cont().unwrap();
            resumed.insert(s.occurrence, now_ms());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        victims.iter().filter(|v| v.1 == "killed").count() >= 3
            && victims.iter().filter(|v| v.1 == "stopped").count() >= 3,
        "too few faults injected: {victims:?}"
    );

    // Every occurrence of the window ends succeeded, within its attempts.
    let url_for_admin = url.clone();
    let admin = Scheduler::builder(Client::open(url_for_admin.as_str()).unwrap())
        .build()
        .unwrap();
    let window = |r: &RunRecord| (first..=last).contains(&r.occurrence.timestamp_millis());
    let until = Instant::now() + Duration::from_secs(30);
    let history: Vec<RunRecord> = loop {
        let runs: Vec<_> = admin
            .history("alo")
            .await
            .unwrap()
            .into_iter()
            .filter(window)
            .collect();
        let open: Vec<_> = runs
            .iter()
            .filter(|r| r.outcome != RunOutcome::Succeeded)
            .collect();
        if runs.len() == OCCURRENCES && open.is_empty() {
            break runs;
        }
        assert!(
            Instant::now() < until,
            "{} of {OCCURRENCES} runs, not succeeded: {open:#?}",
            runs.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut retried = BTreeSet::new();
    for run in &history {
        let occurrence = run.occurrence.timestamp_millis();
        let k = occurrence.div_euclid(1000);
        assert!(run.attempt <= ATTEMPTS, "{run:#?}");
        assert_eq!(run.next_retry, None, "{run:#?}");
        assert_eq!(
            run.earlier_attempts.len() as u32,
            run.attempt - 1,
            "{run:#?}"
        );
        // Each attempt's fence exceeds the previous attempt's.
        let fences: Vec<u64> = run
            .earlier_attempts
            .iter()
            .filter_map(|a| a.fencing_token)
            .chain(run.fencing_token)
            .map(|f| f.get())
            .collect();
        assert!(
            fences.windows(2).all(|w| w[0] < w[1]),
            "fences must increase from attempt to attempt: {run:#?}"
        );
        if k % 3 == 1 {
            let first_attempt = run
                .earlier_attempts
                .first()
                .expect("the first attempt failed");
            assert_eq!(
                first_attempt.outcome,
                RunOutcome::Failed("the first attempt fails".into()),
                "{run:#?}"
            );
        }
        if run.attempt > 1 {
            retried.insert(occurrence);
        }
        // The store that checks fences holds the last attempt's write.
        let stored: Option<String> = con
            .hget(format!("alo:store:{occurrence}"), "value")
            .await
            .unwrap();
        let fence: Option<u64> = con
            .hget(format!("alo:store:{occurrence}"), "fence")
            .await
            .unwrap();
        assert_eq!(
            stored.as_deref(),
            Some(format!("{} {} done", run.attempt, run.replica).as_str()),
            "{run:#?}"
        );
        assert_eq!(fence, run.fencing_token.map(|f| f.get()), "{run:#?}");
    }
    for (occurrence, how) in &victims {
        assert!(
            retried.contains(occurrence),
            "the {how} replica's occurrence {occurrence} was not retried"
        );
        // For the record: from the fault to the next attempt's claim (lease lapse + backoff +
        // the look of the replica that took it).
        let run = history
            .iter()
            .find(|r| r.occurrence.timestamp_millis() == *occurrence)
            .unwrap();
        let second = run
            .earlier_attempts
            .get(1)
            .map_or(run.started_at, |a| a.started_at);
        let since = second.duration_since(UNIX_EPOCH).unwrap().as_millis();
        let took = i64::try_from(since).unwrap() - struck[occurrence];
        eprintln!("{how} at {occurrence}: next attempt claimed {took} ms after the fault");
        // The attempt's lease lapses at most a lease after the fault, the backoff follows, and
        // every replica knows the deadline (claim and heartbeat replies): no 5 s poll between.
        let bound = i64::try_from((LEASE + BACKOFF).as_millis()).unwrap() + 500;
        assert!(
            took <= bound,
            "the {how} replica's occurrence {occurrence} was retried {took} ms after the fault"
        );
    }

    // The store accepted writes per occurrence in attempt order: no superseded attempt wrote
    // after the attempt that superseded it.
    let accepted: Vec<String> = con.lrange("alo:accepted", 0, -1).await.unwrap();
    let mut latest: BTreeMap<String, u32> = BTreeMap::new();
    for line in &accepted {
        let mut f = line.split(' ');
        let (key, _fence, attempt) = (f.next().unwrap(), f.next(), f.next().unwrap());
        let attempt: u32 = attempt.parse().unwrap();
        let seen = latest.entry(key.to_owned()).or_insert(attempt);
        assert!(
            attempt >= *seen,
            "a superseded attempt's write was accepted: {line}"
        );
        *seen = attempt;
    }

    // A stopped attempt learned of its loss within one renewal interval of its resume.
    let lost: Vec<String> = con.lrange("alo:lost", 0, -1).await.unwrap();
    let renewal = i64::try_from((LEASE / 3).as_millis()).unwrap();
    for (occurrence, resumed_ms) in &resumed {
        let line = lost
            .iter()
            .find(|l| l.starts_with(&format!("{occurrence} 1 ")))
            .unwrap_or_else(|| {
                panic!(
                    "occurrence {occurrence}'s stopped attempt never saw its lease lost: {lost:?}"
                )
            });
        let lost_ms: i64 = line.split(' ').nth(2).unwrap().parse().unwrap();
        eprintln!(
            "stopped at {occurrence}: lost() {} ms after the resume",
            lost_ms - resumed_ms
        );
        assert!(
            lost_ms - resumed_ms <= renewal,
            "lost() fired {} ms after the resume: {line}",
            lost_ms - resumed_ms
        );
    }

    // The at-most-once job beside it never ran an occurrence twice, nor retried one.
    let amo = admin.history("amo").await.unwrap();
    for run in &amo {
        assert_eq!(run.attempt, 1, "{run:#?}");
        assert!(run.earlier_attempts.is_empty() && run.next_retry.is_none());
        // A run claimed by a replica killed before its handler started ran 0 times.
        let count: Option<u64> = con
            .get(format!("amo:count:{}", run.occurrence.timestamp_millis()))
            .await
            .unwrap();
        assert!(
            count.unwrap_or(0) <= 1,
            "an at-most-once occurrence ran again: {run:#?}"
        );
    }
    let failed = amo
        .iter()
        .filter(|r| r.occurrence.timestamp_millis().div_euclid(1000) % 3 == 1)
        .filter(|r| (first..=last).contains(&r.occurrence.timestamp_millis()))
        .collect::<Vec<_>>();
    assert!(failed.len() >= 5, "{amo:#?}");
    for run in failed {
        assert_eq!(
            run.outcome,
            RunOutcome::Failed("this run fails".into()),
            "{run:#?}"
        );
    }
}

/// A replica that shuts down gracefully while a retry of its failed attempt waits out its
/// backoff says so, and another replica runs the next attempt.
#[tokio::test]
async fn a_replica_that_shuts_down_during_a_backoff_leaves_the_retry_to_another() {
    let logs = crate::support::LogCapture::start();
    let server = redis();
    let url = server.url();
    let replica = |id: &str| {
        let job = dlock_scheduler::Job::new("settle", "0 0 1 1 *", "UTC", |ctx| async move {
            if ctx.attempt() == 1 {
                return Err("the first attempt fails".to_owned());
            }
            Ok(())
        })
        .unwrap()
        .delivery(dlock_scheduler::Delivery::at_least_once(
            2,
            Duration::from_secs(2),
        ));
        Scheduler::builder(Client::open(url.as_str()).unwrap())
            .replica_id(id)
            .request_poll(Duration::from_millis(200))
            .job(job)
            .build()
            .unwrap()
    };
    let (a, b) = (replica("a"), replica("b"));
    let (stop_a, stopped_a) = tokio::sync::oneshot::channel::<()>();
    let a_runs = tokio::spawn(async move {
        a.run_until(
            async {
                let _ = stopped_a.await;
            },
            Duration::from_secs(5),
        )
        .await
    });
    // Only `a` runs: it takes the request, its attempt fails, the retry waits 2 s.
    let admin = replica("admin");
    admin.run_now("settle").await.unwrap();
    let pending = logs
        .wait_for("the next attempt is scheduled", Duration::from_secs(20))
        .await;
    assert!(pending.contains("settle"), "{pending}");
    // `b` starts; `a` shuts down during the backoff and says what it leaves.
    let b2 = b.clone();
    let b_runs = tokio::spawn(async move {
        b2.run_until(std::future::pending(), Duration::from_secs(5))
            .await
    });
    stop_a.send(()).unwrap();
    let report = a_runs.await.unwrap();
    assert_eq!(report.cancelled, 0);
    let left = logs.matching("the other replicas take them over");
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(left[0].contains("settle"), "{left:?}");
    let run = crate::support::eventually(Duration::from_secs(20), "the second attempt", || {
        let admin = admin.clone();
        async move {
            let history = admin.history("settle").await.ok()?;
            history
                .into_iter()
                .find(|r| r.outcome == RunOutcome::Succeeded)
        }
    })
    .await;
    assert_eq!((run.attempt, run.replica.as_str()), (2, "b"), "{run:#?}");
    assert_eq!(run.earlier_attempts[0].replica, "a");
    b_runs.abort();
}

/// A replica that dies while its attempt runs (its runtime shut down: no shutdown of the
/// scheduler, no record, no release) leaves the attempt's lease to lapse; the other replica,
/// which lost that occurrence's claim, learns from its claim replies when the lease would lapse
/// and takes the next attempt then — not at its fallback poll (5 s by default), which comes
/// seconds later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_survivor_takes_the_retry_when_the_lease_lapses_not_at_its_poll() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicI64, Ordering};

    let server = redis();
    let url = server.url();
    let (ran, mut running) = tokio::sync::mpsc::unbounded_channel::<String>();
    // The occurrence (ms) whose first attempt hangs until its replica dies; the others are
    // quick.
    let target = Arc::new(AtomicI64::new(i64::MAX));
    let replica = |id: &str| {
        let (ran, target) = (ran.clone(), target.clone());
        let job = dlock_scheduler::Job::new("tick", "* * * * * *", "UTC", move |ctx| {
            let hang = ctx.attempt() == 1
                && ctx.occurrence().timestamp_millis() == target.load(Ordering::Relaxed);
            let ran = ran.clone();
            async move {
                if hang {
                    let _ = ran.send(ctx.replica().id().to_owned());
                    std::future::pending::<()>().await;
                }
                Ok::<(), String>(())
            }
        })
        .unwrap()
        .delivery(dlock_scheduler::Delivery::at_least_once(
            2,
            Duration::from_millis(100),
        ))
        .overlap(dlock_scheduler::Overlap::Allow)
        .lease(LEASE);
        Scheduler::builder(Client::open(url.as_str()).unwrap())
            .replica_id(id)
            .job(job)
            .build()
            .unwrap()
    };
    assert_eq!(
        dlock_scheduler::DEFAULT_REQUEST_POLL,
        Duration::from_secs(5),
        "the poll this test tells apart"
    );
    // Each replica runs on a runtime of its own, on its own thread: dropping that runtime
    // stops every task of the replica at once, as a process that dies would.
    let start = |scheduler: Scheduler| {
        let (kill, killed) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                tokio::select! {
                    _ = scheduler.run_until(std::future::pending(), Duration::from_secs(5)) => {}
                    _ = killed => {}
                }
            });
            runtime.shutdown_background();
        });
        (kill, thread)
    };
    // The replicas look for retries when they start (and once more when the first run they
    // saw in flight was due), then at their poll, every 5 s: the run that hangs is 8 s after
    // the start, so its lease lapses 1.5–3.5 s before a poll.
    let begun = chrono::Utc::now().timestamp_millis();
    target.store((begun / 1000 + 8) * 1000, Ordering::Relaxed);
    let mut replicas = std::collections::BTreeMap::new();
    for id in ["a", "b"] {
        replicas.insert(id.to_owned(), start(replica(id)));
    }
    let runner = tokio::time::timeout(Duration::from_secs(15), running.recv())
        .await
        .expect("the long run started")
        .unwrap();
    let (kill, thread) = replicas.remove(&runner).unwrap();
    kill.send(()).unwrap();
    thread.join().unwrap();
    let died = std::time::Instant::now();
    let admin = replica("admin");
    let occurrence = target.load(Ordering::Relaxed);
    let run = crate::support::eventually(Duration::from_secs(20), "the second attempt", || {
        let admin = admin.clone();
        async move {
            let history = admin.history("tick").await.ok()?;
            history.into_iter().find(|r| {
                r.occurrence.timestamp_millis() == occurrence && r.outcome == RunOutcome::Succeeded
            })
        }
    })
    .await;
    let took = died.elapsed();
    let survivor = replicas.keys().next().unwrap().clone();
    assert_eq!((run.attempt, &run.replica), (2, &survivor), "{run:#?}");
    assert_eq!(run.earlier_attempts[0].outcome, RunOutcome::Abandoned);
    // A lease to lapse, the backoff, and the survivor's next claim (every second) to hear of
    // the deadline: far below the 5 s poll.
    let bound = LEASE + Duration::from_millis(100) + Duration::from_secs(1);
    eprintln!("the survivor took the retry {took:?} after the replica died");
    assert!(
        took <= bound + Duration::from_millis(500),
        "the retry came {took:?} after the replica died"
    );
    for (_, (kill, thread)) in replicas {
        kill.send(()).unwrap();
        thread.join().unwrap();
    }
}
