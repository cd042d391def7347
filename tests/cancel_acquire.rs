//! Dropping acquire futures leaves nothing behind: no queue entry, no subscription, and a lock
//! handed to a waiter that stopped waiting is passed on instead of staying held.

use std::time::Duration;

use redis::AsyncCommands;

use crate::support::{client, eventually, raw, redis};

async fn wake_channels(con: &mut redis::aio::MultiplexedConnection, name: &str) -> Vec<String> {
    redis::cmd("PUBSUB")
        .arg("CHANNELS")
        .arg(format!("dlock:{{{name}}}:wake:*"))
        .query_async(con)
        .await
        .unwrap()
}

async fn queue_len(con: &mut redis::aio::MultiplexedConnection, name: &str) -> usize {
    con.llen(format!("dlock:{{{name}}}:queue")).await.unwrap()
}

#[tokio::test]
async fn aborted_waiters_leave_no_subscription_or_queue_entry() {
    let server = redis();
    let holder = client(&server);
    let held = holder
        .mutex("cancel")
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .expect("free");

    let waiters = client(&server);
    let mut con = raw(&server).await;
    let tasks: Vec<_> = (0..5)
        .map(|_| {
            let lock = waiters.mutex("cancel").unwrap();
            tokio::spawn(async move { lock.acquire().await })
        })
        .collect();
    eventually(Duration::from_secs(10), "five queued waiters", || {
        let mut con = con.clone();
        async move { (queue_len(&mut con, "cancel").await == 5).then_some(()) }
    })
    .await;
    let channels = wake_channels(&mut con, "cancel").await;
    assert_eq!(
        channels.len(),
        1,
        "one subscription per client and lock: {channels:?}"
    );
    let (_, subscribers): (String, u64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(&channels[0])
        .query_async::<Vec<(String, u64)>>(&mut con)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(subscribers, 1);

    for task in &tasks {
        task.abort();
    }
    for task in tasks {
        assert!(task.await.unwrap_err().is_cancelled());
    }
    eventually(
        Duration::from_secs(10),
        "queue and subscription cleaned up",
        || {
            let mut con = con.clone();
            async move {
                let empty = queue_len(&mut con, "cancel").await == 0
                    && wake_channels(&mut con, "cancel").await.is_empty();
                empty.then_some(())
            }
        },
    )
    .await;
    // The holder was never disturbed.
    assert!(held.release().await.unwrap().was_held());
}

#[tokio::test]
async fn a_lock_handed_to_a_dropped_waiter_is_passed_on() {
    let server = redis();
    let holder = client(&server);
    let held = holder
        .mutex("handed")
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .expect("free");
    let waiter_client = client(&server);
    let waiter = waiter_client.mutex("handed").unwrap();
    let mut con = raw(&server).await;

    // Drive the waiter until it is queued, then stop polling it.
    let mut pending = Box::pin(waiter.acquire());
    let queued = async {
        eventually(Duration::from_secs(10), "waiter queued", || {
            let mut con = con.clone();
            async move { (queue_len(&mut con, "handed").await == 1).then_some(()) }
        })
        .await;
    };
    tokio::select! {
        result = &mut pending => panic!("the waiter should still wait: {result:?}"),
        () = queued => {}
    }
    // The release hands the lock to the (unpolled) waiter …
    held.release().await.unwrap();
    let owner: String = con.get("dlock:{handed}").await.unwrap();
    assert!(!owner.is_empty());
    // … which is dropped before it ever learns so. The lock must not stay held for 30 s.
    drop(pending);
    let third = client(&server).mutex("handed").unwrap();
    let guard = eventually(Duration::from_secs(5), "lock passed on", || async {
        third.try_acquire().await.ok().flatten()
    })
    .await;
    guard.release().await.unwrap();
}

#[tokio::test]
async fn acquires_whose_reply_never_came_leave_no_lock() {
    let server = redis();
    let c = dlock_core::Client::builder(server.url().as_str())
        .command_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    // Fenced: each acquisition that takes the lock issues a fence, which shows that it ran.
    let lock = c
        .mutex_with("inflight", dlock_core::MutexOptions::new().fenced())
        .unwrap();
    // Warm up: connected, scripts loaded, so the requests below run as soon as they arrive.
    let warm = lock.try_acquire().await.unwrap().expect("free");
    let first_fence = warm.fencing_token().await.unwrap().get();
    warm.release().await.unwrap();
    let mut con = raw(&server).await;

    // The server is frozen, so each request is written but not answered: one attempt times out
    // (the client gives up on it), one is dropped by its caller.
    server.pause().unwrap();
    let err = lock.try_acquire().await.unwrap_err();
    assert!(err.is_timeout() && err.may_have_taken_effect(), "{err}");
    let dropped = tokio::time::timeout(Duration::from_millis(100), lock.acquire()).await;
    assert!(dropped.is_err(), "the frozen server cannot have answered");
    server.resume().unwrap();

    // The requests did run once the server woke up (a newer fencing token was issued) …
    eventually(Duration::from_secs(5), "the abandoned acquires ran", || {
        let mut con = con.clone();
        async move {
            let fence: u64 = con.get("dlock:{inflight}:fence").await.ok()?;
            (fence > first_fence).then_some(())
        }
    })
    .await;
    // … and whatever they took was released in the background, well before the 30 s lease.
    let other = client(&server).mutex("inflight").unwrap();
    let guard = eventually(
        Duration::from_secs(5),
        "abandoned acquires cleaned up",
        || async { other.try_acquire().await.ok().flatten() },
    )
    .await;
    guard.release().await.unwrap();
    let queued: usize = con.llen("dlock:{inflight}:queue").await.unwrap();
    assert_eq!(queued, 0);
}
