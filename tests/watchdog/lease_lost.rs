//! The loss of a lease reaches the holder: an external DEL or `force_unlock` within one renewal
//! interval, a Redis that died no later than safe-until, and `max_hold` by design.

use std::time::{Duration, Instant};

use dlock_core::{LostReason, MIN_WATCHDOG_TTL, MutexOptions};
use redis::AsyncCommands;

use crate::support::{Backend, backend_tests};

fn watchdog(lease_ms: u64) -> MutexOptions {
    MutexOptions::new()
        .ttl(Duration::from_millis(lease_ms))
        .watchdog()
}

backend_tests!(
    /// On a current-thread runtime, as written first: on more threads `lost()` may resolve
    /// before the token is cancelled (see the next test).
    #[flavor = "current_thread"]
    async fn an_external_delete_is_noticed_within_one_renewal_interval(backend: Backend) {
        let lock = backend.client().mutex_with("del", watchdog(900)).unwrap();
        let guard = lock.try_acquire().await.unwrap().expect("free");
        let token = guard.cancellation_token();
        let mut con = backend.raw().await;
        let _: usize = con.del("dlock:{del}").await.unwrap();
        // One renewal interval is 300 ms; allow scheduling slack on a busy machine.
        let lost = tokio::time::timeout(Duration::from_secs(3), guard.lost())
            .await
            .expect("lost() must resolve after the lock was deleted");
        assert_eq!(lost.reason(), LostReason::Removed);
        assert!(token.is_cancelled());
        assert!(!guard.release().await.unwrap().was_held());
    }

    /// Once `lost()` has resolved, the guard's cancellation token is cancelled: code that
    /// awaited the loss (or raced it) never finds the token live. The watchdog, on another
    /// thread, sets the loss before it cancels the token; a holder on a worker thread can see
    /// one without the other. Many short rounds, as the window is narrow.
    async fn the_token_is_cancelled_once_lost_resolves(backend: Backend) {
        let c = backend.client();
        let mut con = backend.raw().await;
        for round in 0..100 {
            let name = format!("race:{round}");
            let lock = c
                .mutex_with(&name, MutexOptions::new().ttl(MIN_WATCHDOG_TTL).watchdog())
                .unwrap();
            let guard = lock.try_acquire().await.unwrap().expect("free");
            let token = guard.cancellation_token();
            let _: usize = con.del(format!("dlock:{{{name}}}")).await.unwrap();
            tokio::time::timeout(Duration::from_secs(3), guard.lost())
                .await
                .expect("lost() must resolve after the lock was deleted");
            assert!(
                token.is_cancelled(),
                "round {round}: lost() resolved, the token is still live"
            );
        }
    }

    async fn force_unlock_reaches_the_holder_and_the_next_waiter(backend: Backend) {
        let lock = backend
            .client()
            .mutex_with("forced", watchdog(900))
            .unwrap();
        let guard = lock.try_acquire().await.unwrap().expect("free");
        let operator = backend.client();
        assert!(operator.force_unlock("forced").await.unwrap());
        assert!(
            !operator.force_unlock("forced").await.unwrap(),
            "nothing left to force"
        );
        let lost = tokio::time::timeout(Duration::from_secs(3), guard.lost())
            .await
            .expect("lost() after force_unlock");
        assert!(
            matches!(lost.reason(), LostReason::Removed | LostReason::TakenOver),
            "{lost}"
        );
        let next = backend.client().mutex("forced").unwrap();
        assert!(next.try_acquire().await.unwrap().is_some());
    }

    async fn a_dead_redis_makes_the_lease_lost_by_safe_until(mut backend: Backend) {
        let c = backend
            .builder()
            .command_timeout(Duration::from_millis(200))
            .build()
            .unwrap();
        let lock = c.mutex_with("dead", watchdog(1_000)).unwrap();
        let guard = lock.try_acquire().await.unwrap().expect("free");
        let token = guard.cancellation_token();
        backend.kill("dlock:{dead}");
        // The watchdog itself declares the loss: the token is cancelled without anyone awaiting
        // `lost()` (which would fire it on its own at safe-until).
        tokio::time::timeout(Duration::from_secs(5), token.cancelled())
            .await
            .expect("the cancellation token must fire when Redis is gone");
        let lost = tokio::time::timeout(Duration::from_secs(1), guard.lost())
            .await
            .expect("lost() must resolve once the token fired");
        assert_eq!(lost.reason(), LostReason::Unreachable);
        // It fired because safe-until passed, not before: the holder was not told too early.
        assert!(Instant::now() >= guard.safe_until());
        assert_eq!(guard.remaining(), Duration::ZERO);
    }

    async fn max_hold_ends_renewal_and_frees_the_lock(backend: Backend) {
        let options = watchdog(300).max_hold(Duration::from_millis(1_200));
        let lock = backend.client().mutex_with("maxhold", options).unwrap();
        let guard = lock.try_acquire().await.unwrap().expect("free");
        let token = guard.cancellation_token();
        let early_fence = guard.fencing_token().await.unwrap();
        let first_safe_until = guard.safe_until();
        tokio::time::timeout(Duration::from_secs(5), token.cancelled())
            .await
            .expect("the watchdog cancels the token at max_hold");
        let lost = tokio::time::timeout(Duration::from_secs(1), guard.lost())
            .await
            .expect("lost() at max_hold");
        assert_eq!(lost.reason(), LostReason::MaxHold);
        // Renewals carried the 300 ms lease past its first expiry, toward max_hold (1.2 s).
        assert!(
            guard.safe_until() >= first_safe_until + Duration::from_millis(600),
            "the lease was not renewed before max_hold"
        );
        let other = backend.client().mutex("maxhold").unwrap();
        let taken = other.acquire_timeout(Duration::from_secs(5)).await.unwrap();
        assert!(taken.fencing_token().await.unwrap() > early_fence);
    }

    async fn a_fixed_lease_is_lost_when_it_runs_out(backend: Backend) {
        let lock = backend
            .client()
            .mutex_with("fixed", MutexOptions::new().ttl(Duration::from_millis(150)))
            .unwrap();
        let guard = lock.try_acquire().await.unwrap().expect("free");
        let token = guard.cancellation_token();
        let lost = tokio::time::timeout(Duration::from_secs(3), guard.lost())
            .await
            .unwrap();
        assert_eq!(lost.reason(), LostReason::Expired);
        tokio::time::timeout(Duration::from_secs(3), token.cancelled())
            .await
            .expect("the cancellation token follows the lease");
    }
);
