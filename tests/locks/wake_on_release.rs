//! Waiters are woken by the release itself (push, not polling), in arrival order, and by the
//! fallback timer when a lease simply expires.

use std::time::Duration;

use dlock_core::MutexOptions;
use redis::AsyncCommands;

use crate::support::{Backend, backend_tests, eventually};

backend_tests!(
    async fn release_wakes_the_waiter_long_before_the_lease_ends(backend: Backend) {
        let long = MutexOptions::new().ttl(Duration::from_secs(30));
        let holder = backend.client().mutex_with("wake", long.clone()).unwrap();
        let guard = holder.try_acquire().await.unwrap().expect("free lock");

        let waiter = backend.client().mutex_with("wake", long).unwrap();
        // Its wait (25 s) ends before the holder's lease (30 s) would: only the push can serve it.
        let waiting =
            tokio::spawn(async move { waiter.acquire_timeout(Duration::from_secs(25)).await });
        let con = backend.raw().await;
        eventually(Duration::from_secs(10), "waiter queued", || {
            let mut con = con.clone();
            async move {
                let n: usize = con.llen("dlock:{wake}:queue").await.ok()?;
                (n == 1).then_some(())
            }
        })
        .await;
        guard.release().await.unwrap();
        let acquired = waiting.await.unwrap().expect("the waiter gets the lock");
        acquired.release().await.unwrap();
    }

    async fn waiters_are_served_in_arrival_order(backend: Backend) {
        let c = backend.client();
        let first = c
            .mutex("fifo")
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .expect("free");
        let mut con = backend.raw().await;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for i in 0..4u32 {
            // A separate client per waiter, as if each were its own process.
            let lock = backend.client().mutex("fifo").unwrap();
            let tx = tx.clone();
            tokio::spawn(async move {
                let guard = lock.acquire_timeout(Duration::from_secs(20)).await.unwrap();
                tx.send(i).unwrap();
                tokio::time::sleep(Duration::from_millis(10)).await;
                guard.release().await.unwrap();
            });
            let want = usize::try_from(i + 1).unwrap();
            eventually(Duration::from_secs(10), "waiter queued", || {
                let mut con = con.clone();
                async move {
                    let queued: usize = con.llen("dlock:{fifo}:queue").await.ok()?;
                    (queued == want).then_some(())
                }
            })
            .await;
        }
        first.release().await.unwrap();
        let mut order = Vec::new();
        for _ in 0..4 {
            order.push(rx.recv().await.unwrap());
        }
        assert_eq!(order, vec![0, 1, 2, 3]);
        let queued: usize = con.llen("dlock:{fifo}:queue").await.unwrap();
        assert_eq!(queued, 0);
    }

    async fn an_expired_lease_wakes_the_waiter_through_the_fallback_timer(backend: Backend) {
        let short = MutexOptions::new().ttl(Duration::from_millis(300));
        let holder = backend.client().mutex_with("expire", short).unwrap();
        let guard = holder.try_acquire().await.unwrap().expect("free lock");
        // A holder that vanished without releasing: only the lease frees the lock.
        std::mem::forget(guard);
        let waiter = backend.client().mutex("expire").unwrap();
        let acquired = waiter
            .acquire_timeout(Duration::from_secs(10))
            .await
            .unwrap();
        acquired.release().await.unwrap();
    }

    async fn a_busy_lock_times_out_and_leaves_nothing_queued(backend: Backend) {
        let c = backend.client();
        let _held = c
            .mutex("busy")
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .expect("free");
        let other = backend.client();
        let err = other
            .mutex("busy")
            .unwrap()
            .acquire_timeout(Duration::from_millis(200))
            .await
            .unwrap_err();
        assert!(err.is_busy(), "{err}");
        assert!(err.to_string().contains("busy"), "{err}");
        let mut con = backend.raw().await;
        let queued: usize = con.llen("dlock:{busy}:queue").await.unwrap();
        assert_eq!(queued, 0);
        let zero = other
            .mutex("busy")
            .unwrap()
            .acquire_timeout(Duration::ZERO)
            .await
            .unwrap_err();
        assert!(zero.is_busy());
    }
);
