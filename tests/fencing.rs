//! Fencing tokens strictly increase per lock name: across acquire/release cycles, expiries,
//! clients, and a Redis restart that lost every key.

use std::time::Duration;

use dlock_core::{FencingToken, MutexOptions};
use redis::AsyncCommands;

use crate::support::{Backend, backend_tests, eventually};

backend_tests!(
    async fn tokens_increase_across_release_expiry_and_clients(backend: Backend) {
        let (a, b) = (backend.client(), backend.client());
        let short = || MutexOptions::new().ttl(Duration::from_millis(20));
        let mut seen: Vec<FencingToken> = Vec::new();
        for round in 0..10 {
            let lock = if round % 2 == 0 { &a } else { &b }
                .mutex("fenced")
                .unwrap();
            let guard = lock.acquire_timeout(Duration::from_secs(5)).await.unwrap();
            seen.push(guard.fencing_token().await.unwrap());
            guard.release().await.unwrap();
        }
        for _ in 0..3 {
            // Let the lease run out instead of releasing: the next acquire waits for it.
            let lock = a.mutex_with("fenced", short()).unwrap();
            let guard = lock.acquire_timeout(Duration::from_secs(5)).await.unwrap();
            seen.push(guard.fencing_token().await.unwrap());
            std::mem::forget(guard);
        }
        assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    }

    async fn tokens_keep_increasing_after_a_restart_that_lost_the_counter(mut backend: Backend) {
        let lock = backend.client().mutex("restart").unwrap();
        let before = lock.try_acquire().await.unwrap().expect("free lock");
        let old = before.fencing_token().await.unwrap();
        before.release().await.unwrap();

        backend.restart("dlock:{restart}");
        let fresh = backend.client().mutex("restart").unwrap();
        let after = eventually(Duration::from_secs(10), "acquire after restart", || async {
            fresh.try_acquire().await.ok().flatten()
        })
        .await;
        assert!(
            after.fencing_token().await.unwrap() > old,
            "a counter reset must not issue a smaller token ({} after {})",
            after.fencing_token().await.unwrap(),
            old
        );
    }

    /// The counter lives 7 days after the *last* acquisition of its name, by the hand-off path too:
    /// a lock in use never falls back on the clock floor alone.
    async fn the_counter_expiry_slides_with_each_acquisition(backend: Backend) {
        const WEEK_MS: i64 = 7 * 24 * 3600 * 1000;
        let mut con = backend.raw().await;
        let (a, b) = (backend.client(), backend.client());
        let fence_key = "dlock:{sliding}:fence";

        let first = a
            .mutex("sliding")
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .expect("free lock");
        // Fences are issued on demand: the counter appears with the first one.
        let exists: bool = con.exists(fence_key).await.unwrap();
        assert!(
            !exists,
            "an acquisition that asks for no fence touches no counter"
        );
        first.fencing_token().await.unwrap();
        let ttl: i64 = con.pttl(fence_key).await.unwrap();
        assert!(
            ttl > WEEK_MS - 60_000 && ttl <= WEEK_MS,
            "new counter: PTTL {ttl} ms"
        );

        // Age the counter, then hand the lock to a waiter: the grant refreshes it.
        let _: bool = con.pexpire(fence_key, 60_000).await.unwrap();
        let waiting = tokio::spawn(async move {
            let lock = b.mutex("sliding").unwrap();
            let guard = lock.acquire_timeout(Duration::from_secs(10)).await?;
            // Handed over with its token: no round trip needed.
            assert!(
                guard.issued_fencing_token().is_some(),
                "a hand-off carries the fencing token"
            );
            guard.fencing_token().await
        });
        eventually(Duration::from_secs(5), "waiter queued", || {
        let mut con = con.clone();
        async move { (con.llen::<_, i64>("dlock:{sliding}:queue").await.ok()? > 0).then_some(()) }
    })
    .await;
        let first_fence = first.fencing_token().await.unwrap();
        first.release().await.unwrap();
        let handed = waiting.await.unwrap().unwrap();
        assert!(handed > first_fence, "{handed} after {first_fence}");
        let ttl: i64 = con.pttl(fence_key).await.unwrap();
        assert!(ttl > WEEK_MS - 60_000, "after a hand-off: PTTL {ttl} ms");

        // Age it again, let the holder's lease go, and take the lock afresh: refreshed again.
        let _: bool = con.pexpire(fence_key, 60_000).await.unwrap();
        let _: i64 = con.del("dlock:{sliding}").await.unwrap();
        let again = a
            .mutex("sliding")
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .expect("free lock");
        assert!(again.fencing_token().await.unwrap() > handed);
        let ttl: i64 = con.pttl(fence_key).await.unwrap();
        assert!(
            ttl > WEEK_MS - 60_000,
            "after an acquisition: PTTL {ttl} ms"
        );
    }
);
