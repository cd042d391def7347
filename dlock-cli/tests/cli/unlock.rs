//! `dlock unlock NAME`: forces a mutex open and the oldest waiter gets it; without `--yes` and
//! without a terminal to confirm on, it refuses and leaves the lock as it is.

use std::time::Duration;

use dlock_core::MutexOptions;

use crate::support::{client, dlock, eventually, redis};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlock_yes_hands_the_lock_to_the_waiter() {
    let server = redis();
    let url = server.url();
    let stuck = client(&url);
    let options = MutexOptions::new().ttl(Duration::from_secs(120));
    let held = stuck
        .mutex_with("stuck", options)
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    let waiting = client(&url);
    let lock = waiting
        .mutex_with("stuck", MutexOptions::new().label("next in line"))
        .unwrap();
    let waiter = tokio::spawn(async move { lock.acquire_timeout(Duration::from_secs(60)).await });
    eventually(Duration::from_secs(10), "the waiter is queued", || async {
        let info = stuck.inspect("stuck").await.unwrap()?;
        (info.waiters == 1).then_some(())
    })
    .await;

    let run = dlock(&["--url", &url, "unlock", "stuck", "--yes", "--json"])
        .await
        .expect(0);
    let doc = run.json();
    assert_eq!(doc["was_held_by"]["pid"], std::process::id());
    assert_eq!(doc["now_held_by"]["label"], "next in line", "{doc:#}");
    // The waiter gets the lock (long before its own 60 s wait ends).
    let granted = tokio::time::timeout(Duration::from_secs(30), waiter)
        .await
        .expect("the waiter was handed the lock")
        .unwrap()
        .expect("the waiter holds the lock");
    let now = stuck.inspect("stuck").await.unwrap().unwrap();
    assert_eq!(now.label.as_deref(), Some("next in line"));
    granted.release().await.unwrap();
    // The forced holder's lease is gone: its release does not find it.
    assert!(!matches!(held.release().await, Ok(outcome) if outcome.was_held()));

    // Nothing held: exit 3.
    let run = dlock(&["--url", &url, "unlock", "stuck", "--yes"])
        .await
        .expect(3);
    assert!(run.stderr.contains("not held"), "{run:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlock_without_yes_and_no_terminal_refuses() {
    let server = redis();
    let url = server.url();
    let holder = client(&url);
    let guard = holder
        .mutex("busy")
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();

    let run = dlock(&["--url", &url, "unlock", "busy"]).await.expect(2);
    assert!(run.stderr.contains("stdin is not a terminal"), "{run:?}");
    assert!(run.stderr.contains("--yes"), "{run:?}");
    assert_eq!(run.stderr.lines().count(), 1, "one line: {run:?}");
    let still = holder.inspect("busy").await.unwrap().expect("still held");
    assert_eq!(still.pid, std::process::id());
    guard.release().await.unwrap();
}
