//! Dropping acquire futures leaves nothing behind: no queue entry, no subscription, and a lock
//! handed to a waiter that stopped waiting is passed on instead of staying held.

use std::time::Duration;

use redis::AsyncCommands;

use crate::support::{Backend, Plain, acquired_within, backend_tests, eventually};

async fn wake_channels(backend: &Backend, con: &mut Plain, name: &str) -> Vec<String> {
    backend
        .wake_channels(con, &format!("dlock:{{{name}}}:wake:*"))
        .await
}

async fn queue_len(con: &mut Plain, name: &str) -> usize {
    con.llen(format!("dlock:{{{name}}}:queue")).await.unwrap()
}

backend_tests!(
    async fn aborted_waiters_leave_no_subscription_or_queue_entry(backend: Backend) {
        let holder = backend.client();
        let held = holder
            .mutex("cancel")
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .expect("free");

        let waiters = backend.client();
        let mut con = backend.raw().await;
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
        let channels = wake_channels(&backend, &mut con, "cancel").await;
        assert_eq!(
            channels.len(),
            1,
            "one subscription per client and lock: {channels:?}"
        );
        assert_eq!(backend.subscribers(&mut con, &channels[0]).await, 1);

        for task in &tasks {
            task.abort();
        }
        for task in tasks {
            assert!(task.await.unwrap_err().is_cancelled());
        }
        let backend = &backend;
        eventually(
            Duration::from_secs(10),
            "queue and subscription cleaned up",
            || {
                let mut con = con.clone();
                async move {
                    let empty = queue_len(&mut con, "cancel").await == 0
                        && wake_channels(backend, &mut con, "cancel").await.is_empty();
                    empty.then_some(())
                }
            },
        )
        .await;
        // The holder was never disturbed.
        assert!(held.release().await.unwrap().was_held());
    }

    async fn a_lock_handed_to_a_dropped_waiter_is_passed_on(backend: Backend) {
        let holder = backend.client();
        let held = holder
            .mutex("handed")
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .expect("free");
        let waiter_client = backend.client();
        let waiter = waiter_client.mutex("handed").unwrap();
        let mut con = backend.raw().await;

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
        let third = backend.client().mutex("handed").unwrap();
        let guard = acquired_within(&third, Duration::from_secs(5), "lock passed on").await;
        guard.release().await.unwrap();
    }

    async fn acquires_whose_reply_never_came_leave_no_lock(backend: Backend) {
        let c = backend
            .builder()
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
        let mut con = backend.raw().await;

        // The lock's server (the node of its slot) is frozen, so each request is written but
        // not answered: one attempt times out (the client gives up on it), one is dropped by
        // its caller.
        let server = backend.server_of("dlock:{inflight}");
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
                let counter = dlock_core::ext::fence_counter_key("dlock:", "inflight").ok()?;
                let fence: u64 = con.get(counter).await.ok()?;
                (fence > first_fence).then_some(())
            }
        })
        .await;
        // … and whatever they took was released in the background, well before the 30 s lease.
        let other = backend.client().mutex("inflight").unwrap();
        let guard = acquired_within(
            &other,
            Duration::from_secs(5),
            "abandoned acquires cleaned up",
        )
        .await;
        guard.release().await.unwrap();
        let queued: usize = con.llen("dlock:{inflight}:queue").await.unwrap();
        assert_eq!(queued, 0);
    }
);
