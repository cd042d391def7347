//! Polite release requests (`Client::request_release`, `Semaphore::request_release`,
//! `RwLock::request_release`): a watchdog holder learns of one within one renewal interval, a
//! fixed-lease holder when it extends; a holder that ignores it keeps the lock; a later holder
//! is never asked by an earlier request; nothing held means nobody asked; data dlock did not
//! write is refused and left alone.

use std::time::{Duration, Instant};

use dlock_core::{ErrorKind, Lease, MutexOptions};
use redis::AsyncCommands;

use crate::support::{Backend, backend_tests, eventually};

/// A 3 s watchdog lease: renewed every second.
fn watchdog() -> MutexOptions {
    MutexOptions::new().ttl(Duration::from_secs(3)).watchdog()
}

const INTERVAL: Duration = Duration::from_secs(1);

/// Waits until `lease` was renewed `n` more times (its safe-until moved on `n` times).
async fn renewed(lease: &Lease, n: usize) {
    let mut last = lease.safe_until();
    for _ in 0..n {
        last = eventually(Duration::from_secs(10), "a renewal", || async {
            let now = lease.safe_until();
            (now > last).then_some(now)
        })
        .await;
    }
}

backend_tests!(
    async fn a_watchdog_holder_learns_of_a_request_within_one_renewal_interval(backend: Backend) {
        let holder = backend.client();
        let guard = holder
            .mutex_with("ask:mutex", watchdog())
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .expect("free");
        let lease = guard.lease();
        assert!(!lease.is_release_requested());
        let asker = backend.client();
        let asked_at = Instant::now();
        assert_eq!(asker.request_release("ask:mutex").await.unwrap(), 1);
        tokio::time::timeout(INTERVAL * 3, lease.release_requested())
            .await
            .expect("the holder learns of the request");
        let latency = asked_at.elapsed();
        assert!(
            latency <= INTERVAL + Duration::from_millis(500),
            "learnt {latency:?} after the request; the promise is one renewal interval"
        );
        assert!(lease.is_release_requested());
        assert!(lease.is_held(), "a request takes nothing away");

        // Ignoring it: the lock stays ours through more renewals, and others still wait.
        renewed(&lease, 3).await;
        let other = asker.mutex("ask:mutex").unwrap();
        assert!(other.try_acquire().await.unwrap().is_none(), "still ours");
        assert!(guard.release().await.unwrap().was_held());
    }

    async fn a_later_holder_is_not_asked_by_an_earlier_request(backend: Backend) {
        let c = backend.client();
        let lock = c.mutex_with("ask:later", watchdog()).unwrap();
        assert_eq!(
            c.request_release("ask:later").await.unwrap(),
            0,
            "nobody holds it"
        );
        let first = lock.try_acquire().await.unwrap().expect("free");
        assert_eq!(c.request_release("ask:later").await.unwrap(), 1);
        first.release().await.unwrap();
        let second = lock.try_acquire().await.unwrap().expect("free again");
        let lease = second.lease();
        renewed(&lease, 2).await;
        assert!(
            !lease.is_release_requested(),
            "the request named the first holder only"
        );
        second.release().await.unwrap();
    }

    async fn a_fixed_lease_holder_learns_of_a_request_when_it_extends(backend: Backend) {
        let c = backend.client();
        let mut guard = c
            .mutex_with(
                "ask:fixed",
                MutexOptions::new().ttl(Duration::from_secs(30)),
            )
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .expect("free");
        assert_eq!(c.request_release("ask:fixed").await.unwrap(), 1);
        assert!(!guard.lease().is_release_requested(), "it renews nothing");
        let extended = guard.extend(Duration::from_secs(30)).await.unwrap();
        assert_eq!(extended, dlock_core::ExtendOutcome::Extended);
        assert!(guard.lease().is_release_requested());
        guard.release().await.unwrap();
    }

    async fn every_holder_of_a_semaphore_or_rw_lock_is_asked(backend: Backend) {
        let c = backend.client();
        let sem = c.semaphore_with("ask:sem", 3, watchdog()).unwrap();
        let a = sem.try_acquire(1).await.unwrap().expect("a permit");
        let b = sem.try_acquire(1).await.unwrap().expect("a permit");
        assert_eq!(sem.request_release().await.unwrap(), 2);
        for permit in [&a, &b] {
            tokio::time::timeout(INTERVAL * 3, permit.lease().release_requested())
                .await
                .expect("each permit holder learns of it");
        }
        a.release().await.unwrap();
        b.release().await.unwrap();
        assert_eq!(sem.request_release().await.unwrap(), 0);

        let rw = c.rw_lock_with("ask:rw", watchdog()).unwrap();
        let r1 = rw.try_read().await.unwrap().expect("a read");
        let r2 = rw.try_read().await.unwrap().expect("a read");
        assert_eq!(rw.request_release().await.unwrap(), 2);
        for read in [&r1, &r2] {
            tokio::time::timeout(INTERVAL * 3, read.lease().release_requested())
                .await
                .expect("each reader learns of it");
        }
        r1.release().await.unwrap();
        r2.release().await.unwrap();
    }

    async fn a_key_dlock_did_not_write_is_refused_and_left_alone(backend: Backend) {
        let c = backend.client();
        let mut con = backend.raw().await;
        let _: () = con
            .set("dlock:{ask:foreign}", "someone else's")
            .await
            .unwrap();
        let err = c.request_release("ask:foreign").await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
        let kept: String = con.get("dlock:{ask:foreign}").await.unwrap();
        assert_eq!(kept, "someone else's");
        let asks: bool = con.exists("dlock:{ask:foreign}:ask").await.unwrap();
        assert!(!asks, "nothing recorded");
    }
);

/// A mutex whose expiry someone removed (`PERSIST`) cannot be asked: the request could not
/// expire with the hold. Refused by name, nothing recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_without_an_expiry_is_refused_and_nothing_recorded() {
    let backend = Backend::single();
    let c = backend.client();
    let guard = c
        .mutex("ask:persisted")
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .expect("free");
    let mut con = backend.raw().await;
    let _: bool = con.persist("dlock:{ask:persisted}").await.unwrap();
    let err = c.request_release("ask:persisted").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
    assert!(err.to_string().contains("without an expiry"), "{err}");
    let asks: bool = con.exists("dlock:{ask:persisted}:ask").await.unwrap();
    assert!(!asks, "nothing recorded");
    assert!(guard.release().await.unwrap().was_held());
}
