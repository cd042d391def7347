//! Debounce and replace of a keyed one-off job (issue #51) on a real server: a burst of calls
//! makes one job, due no later than its first call plus the max wait, run with the last
//! replaced arguments; once a replica claimed it, neither changes it.

use std::time::Duration;

use dlock_core::Client;
use dlock_scheduler::{Enqueued, RunOutcome, Scheduler};
use tokio::sync::{Notify, mpsc};

use crate::support::redis;

/// A scheduler that only enqueues (it registers the handler and never runs).
fn admin(url: &str) -> Scheduler {
    Scheduler::builder(Client::open(url).unwrap())
        .handler("work", |_| async { Ok::<(), String>(()) })
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debounced_burst_runs_once_by_the_max_wait_with_the_last_arguments_and_a_claimed_job_is_never_changed()
 {
    let server = redis();
    let url = server.url();
    let admin = admin(&url);
    let max_wait = Duration::from_secs(3);
    let delay = Duration::from_millis(1500);

    let first = admin
        .run_after_keyed("work", "doc-42", delay, &1)
        .debounce(max_wait)
        .submit()
        .await
        .unwrap();
    let Enqueued::New(id) = first else {
        panic!("the key's first call made no job: {first:?}")
    };
    let pending = admin.one_off(&id).await.unwrap().unwrap();
    assert_eq!(pending.outcome, RunOutcome::Scheduled);
    // The first call's time, by the server's clock: the job's attempt 0 claim.
    let first_call = pending.started_at;
    assert_eq!(pending.next_retry, Some(first_call + delay));

    // A replace alone changes the arguments, not the due time.
    let replaced = admin
        .run_after_keyed("work", "doc-42", Duration::from_secs(3600), &2)
        .replace()
        .submit()
        .await
        .unwrap();
    assert_eq!(replaced, Enqueued::Updated(id.clone()));
    assert_eq!(
        admin.one_off(&id).await.unwrap().unwrap().next_retry,
        Some(first_call + delay)
    );
    // A debounce asking for an hour is capped by the first call plus the max wait.
    let capped = admin
        .run_after_keyed("work", "doc-42", Duration::from_secs(3600), &3)
        .debounce(max_wait)
        .await
        .unwrap();
    assert_eq!(capped, id, "one key, one job");
    let due = admin
        .one_off(&id)
        .await
        .unwrap()
        .unwrap()
        .next_retry
        .unwrap();
    assert_eq!(due, first_call + max_wait);
    // A plain call with the key changes nothing.
    let plain = admin
        .run_after_keyed("work", "doc-42", Duration::ZERO, &4)
        .submit()
        .await
        .unwrap();
    assert_eq!(plain, Enqueued::Duplicate(id.clone()));

    // A replica runs it: with the replaced arguments (2; the debounce kept them), at its
    // debounced due time (its occurrence).
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let finish = std::sync::Arc::new(Notify::new());
    let release = finish.clone();
    let replica = Scheduler::builder(Client::open(url.as_str()).unwrap())
        .handler("work", move |ctx| {
            let (started, release) = (started_tx.clone(), release.clone());
            async move {
                let n: u64 = ctx.args().map_err(|e| e.to_string())?;
                let _ = started.send((n, ctx.occurrence()));
                release.notified().await;
                Ok::<(), String>(())
            }
        })
        .build()
        .unwrap();
    let stop = std::sync::Arc::new(Notify::new());
    let stopped = stop.clone();
    let running = tokio::spawn(async move {
        replica
            .run_until(stopped.notified_owned(), Duration::from_secs(5))
            .await
    });
    let (n, occurrence) = tokio::time::timeout(Duration::from_secs(30), started.recv())
        .await
        .expect("the debounced job did not start")
        .unwrap();
    assert_eq!(n, 2, "run with the replaced arguments");
    assert_eq!(std::time::SystemTime::from(occurrence), due);

    // Running: debounce and replace leave it alone.
    let late = admin
        .run_after_keyed("work", "doc-42", Duration::ZERO, &5)
        .debounce(max_wait)
        .replace()
        .submit()
        .await
        .unwrap();
    assert_eq!(late, Enqueued::Started(id.clone()));
    let run = admin.one_off(&id).await.unwrap().unwrap();
    assert_eq!((run.attempt, &run.outcome), (1, &RunOutcome::Running));
    assert_eq!(std::time::SystemTime::from(run.occurrence), due);

    finish.notify_one();
    let ended = crate::support::eventually(Duration::from_secs(30), "the run ended", || async {
        let run = admin.one_off(&id).await.unwrap().unwrap();
        (run.outcome == RunOutcome::Succeeded).then_some(run)
    })
    .await;
    assert_eq!(ended.attempt, 1);
    let history = admin.history("once:work").await.unwrap();
    assert_eq!(history.len(), 1, "one key, one run: {history:?}");
    assert!(started.try_recv().is_err(), "ran twice");
    // Ended: still refused, and nothing else runs.
    let after = admin
        .run_after_keyed("work", "doc-42", Duration::ZERO, &6)
        .replace()
        .submit()
        .await
        .unwrap();
    assert_eq!(after, Enqueued::Started(id));
    stop.notify_one();
    let _report = running.await.unwrap();
}
