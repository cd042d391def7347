//! The semaphore: at most `limit` permits held at once, strict FIFO (a large request is never
//! starved by small ones), pushed grants, per-holder leases (a crashed holder's permits come
//! back at its lease's end, nobody else's), fences that increase, and clear errors for requests
//! that could never be served or a limit that disagrees with the stored one.

use std::time::Duration;

use dlock_core::{ErrorKind, MutexOptions, Permit};
use redis::AsyncCommands;
use tokio::task::JoinHandle;

use crate::support::{Backend, Plain, backend_tests, queue_reaches};

/// Permits in use as the server counts them (an independent observer of the limit).
async fn used(con: &mut Plain, name: &str) -> u32 {
    let used: Option<u32> = con
        .hget(format!("dlock:{{{name}}}:sem"), "used")
        .await
        .unwrap();
    used.unwrap_or(0)
}

/// Waits until `n` requests are queued for the semaphore `name`.
async fn queued(con: &Plain, name: &str, n: usize) {
    queue_reaches(con, &format!("dlock:{{{name}}}:sem:queue"), n).await;
}

/// A one-permit semaphore `name` held (30 s lease) by one client, and another client's acquire
/// of it queued behind, whose wait (25 s) ends before that lease: only a release's push can
/// serve it. Returns the holder's permit and the waiting task.
async fn held_with_a_waiter(
    backend: &Backend,
    name: &str,
) -> (Permit, JoinHandle<dlock_core::Result<Permit>>) {
    let long = MutexOptions::new().ttl(Duration::from_secs(30));
    let sem = backend
        .client()
        .semaphore_with(name, 1, long.clone())
        .unwrap();
    let held = sem.try_acquire(1).await.unwrap().expect("free");
    let waiter = backend.client().semaphore_with(name, 1, long).unwrap();
    let waiting =
        tokio::spawn(async move { waiter.acquire_timeout(1, Duration::from_secs(25)).await });
    queued(&backend.raw().await, name, 1).await;
    (held, waiting)
}

backend_tests!(
    /// A raised limit admits the waiters that now fit at once; handles with the old limit follow
    /// the new one; a lowered limit takes nothing from the holders but admits nobody new until
    /// what is held fits under it.
    async fn set_limit_admits_and_restrains(backend: Backend) {
        let name = "sem-set";
        let long = MutexOptions::new().ttl(Duration::from_secs(30));
        let client = backend.client();
        let mut sem = client.semaphore_with(name, 1, long.clone()).unwrap();
        let first = sem.try_acquire(1).await.unwrap().expect("free");
        let mut waiting = Vec::new();
        let con = backend.raw().await;
        for i in 0..2 {
            let other = backend
                .client()
                .semaphore_with(name, 1, long.clone())
                .unwrap();
            waiting.push(tokio::spawn(async move {
                other.acquire_timeout(1, Duration::from_secs(25)).await
            }));
            queued(&con, name, i + 1).await;
        }
        assert_eq!(sem.set_limit(3).await.unwrap(), Some(1));
        assert_eq!(sem.limit(), 3);
        let mut permits = Vec::new();
        for w in waiting {
            permits.push(w.await.unwrap().expect("admitted by the raised limit"));
        }
        let mut raw = con.clone();
        assert_eq!(used(&mut raw, name).await, 3);
        // A limit set by set_limit is in force for every handle, whatever it was built with:
        // a handle built with 1 is weighed against 3 (and 3 are held).
        let stale = client.semaphore(name, 1).unwrap();
        assert!(stale.try_acquire(1).await.unwrap().is_none(), "3 of 3 held");

        assert_eq!(sem.set_limit(1).await.unwrap(), Some(3));
        assert_eq!(used(&mut raw, name).await, 3, "holders keep their permits");
        for p in permits {
            p.release().await.unwrap();
        }
        assert!(sem.try_acquire(1).await.unwrap().is_none(), "1 held of 1");
        first.release().await.unwrap();
        let again = sem.try_acquire(1).await.unwrap().expect("fits again");
        again.release().await.unwrap();
        assert_eq!(
            sem.set_limit(0).await.unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
    }

    /// `with_permits` runs its body holding the permits (the server counts them) and gives them
    /// back when the body ends.
    async fn with_permits_holds_them_for_the_body(backend: Backend) {
        let sem = backend.client().semaphore("sem-body", 3).unwrap();
        let con = backend.raw().await;
        let inside = sem
            .with_permits(2, dlock_core::Wait::No, |lease| {
                let mut con = con.clone();
                async move {
                    assert!(lease.is_held());
                    used(&mut con, "sem-body").await
                }
            })
            .await
            .unwrap();
        assert_eq!(inside, 2);
        let mut con = con.clone();
        assert_eq!(used(&mut con, "sem-body").await, 0);
    }

    async fn never_more_holders_than_permits(backend: Backend) {
        let sem = backend.client().semaphore("sem-limit", 3).unwrap();
        let mut con = backend.raw().await;
        let a = sem.try_acquire(1).await.unwrap().expect("free");
        let b = sem.try_acquire(2).await.unwrap().expect("free");
        assert_eq!(used(&mut con, "sem-limit").await, 3);
        assert!(
            sem.try_acquire(1).await.unwrap().is_none(),
            "a 4th permit of 3"
        );
        assert!(a.fencing_token() < b.fencing_token());
        assert!(a.release().await.unwrap().was_held());
        let c = sem
            .try_acquire(1)
            .await
            .unwrap()
            .expect("one permit is free again");
        assert!(c.fencing_token() > b.fencing_token());
        assert!(sem.try_acquire(1).await.unwrap().is_none());
        b.release().await.unwrap();
        c.release().await.unwrap();
        assert_eq!(used(&mut con, "sem-limit").await, 0);
        let exists: bool = con.exists("dlock:{sem-limit}:sem").await.unwrap();
        assert!(!exists, "nothing is left behind once every permit is back");
    }

    async fn a_release_wakes_the_waiter_long_before_the_lease_ends(backend: Backend) {
        let (held, waiting) = held_with_a_waiter(&backend, "sem-wake").await;
        let fence = held.fencing_token();
        held.release().await.unwrap();
        let permit = waiting
            .await
            .unwrap()
            .expect("the waiter is admitted by the release");
        assert!(permit.fencing_token() > fence);
        permit.release().await.unwrap();
    }

    async fn a_large_request_is_not_starved_by_small_ones(backend: Backend) {
        let long = MutexOptions::new().ttl(Duration::from_secs(30));
        let sem = backend
            .client()
            .semaphore_with("sem-big", 4, long.clone())
            .unwrap();
        let con = backend.raw().await;
        let mut small = Vec::new();
        for _ in 0..3 {
            small.push(sem.try_acquire(1).await.unwrap().expect("free"));
        }
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        // The large request queues first (it needs all 4) …
        let big = backend
            .client()
            .semaphore_with("sem-big", 4, long.clone())
            .unwrap();
        let tx_big = tx.clone();
        tokio::spawn(async move {
            let p = big
                .acquire_timeout(4, Duration::from_secs(20))
                .await
                .unwrap();
            tx_big.send("big").unwrap();
            p.release().await.unwrap();
        });
        queued(&con, "sem-big", 1).await;
        // … then single-permit requests arrive while one permit is still free …
        let one = backend
            .client()
            .semaphore_with("sem-big", 4, long.clone())
            .unwrap();
        assert!(
            one.try_acquire(1).await.unwrap().is_none(),
            "a free permit is not taken ahead of the queue's head"
        );
        let tx_small = tx.clone();
        tokio::spawn(async move {
            let p = one
                .acquire_timeout(1, Duration::from_secs(20))
                .await
                .unwrap();
            tx_small.send("small").unwrap();
            p.release().await.unwrap();
        });
        queued(&con, "sem-big", 2).await;
        // … and the singles held are released: the head gets all 4 first.
        for p in small {
            p.release().await.unwrap();
        }
        assert_eq!(rx.recv().await, Some("big"));
        assert_eq!(rx.recv().await, Some("small"));
    }

    async fn a_crashed_holders_permits_come_back_at_its_lease_end(backend: Backend) {
        let short = MutexOptions::new().ttl(Duration::from_millis(600));
        let sem = backend
            .client()
            .semaphore_with("sem-crash", 2, short.clone())
            .unwrap();
        let mut con = backend.raw().await;
        let survivor = backend
            .client()
            .semaphore_with(
                "sem-crash",
                2,
                MutexOptions::new().ttl(Duration::from_secs(30)),
            )
            .unwrap()
            .try_acquire(1)
            .await
            .unwrap()
            .expect("free");
        // A holder that never gives its permit back (as a crashed process): a fixed lease.
        std::mem::forget(sem.try_acquire(1).await.unwrap().expect("free"));
        let waiter = backend
            .client()
            .semaphore_with("sem-crash", 2, short)
            .unwrap();
        let started = std::time::Instant::now();
        let permit = waiter
            .acquire_timeout(1, Duration::from_secs(10))
            .await
            .expect("the crashed holder's permit comes back");
        let waited = started.elapsed();
        assert!(
            waited < Duration::from_secs(5),
            "woken near the lease's end, not polled late: {waited:?}"
        );
        assert_eq!(
            used(&mut con, "sem-crash").await,
            2,
            "the survivor keeps its permit"
        );
        assert!(survivor.remaining() > Duration::ZERO);
        permit.release().await.unwrap();
        assert!(survivor.release().await.unwrap().was_held());
    }

    async fn watchdog_permits_outlive_their_ttl(backend: Backend) {
        let renewed = MutexOptions::new()
            .ttl(Duration::from_millis(300))
            .watchdog();
        let sem = backend
            .client()
            .semaphore_with("sem-wd", 1, renewed)
            .unwrap();
        let permit = sem.try_acquire(1).await.unwrap().expect("free");
        tokio::time::sleep(Duration::from_millis(1_200)).await;
        let other = backend.client().semaphore("sem-wd", 1).unwrap();
        assert!(
            other.try_acquire(1).await.unwrap().is_none(),
            "renewed past 4 leases"
        );
        assert!(permit.release().await.unwrap().was_held());
    }

    async fn requests_that_cannot_be_served_are_refused_at_once(backend: Backend) {
        let c = backend.client();
        let sem = c.semaphore("sem-bad", 2).unwrap();
        for n in [0, 3] {
            let e = sem.try_acquire(n).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
        }
        assert_eq!(
            c.semaphore("sem-bad", 0).unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
        let held = sem.try_acquire(1).await.unwrap().expect("free");
        let other = c.semaphore("sem-bad", 5).unwrap();
        let e = other.try_acquire(1).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
        assert!(e.to_string().contains("limit of 2"), "{e}");
        held.release().await.unwrap();
    }

    async fn a_dropped_permit_is_given_back_and_admits_the_next(backend: Backend) {
        let (held, waiting) = held_with_a_waiter(&backend, "sem-drop").await;
        // Dropped, not released: the background release admits the waiter, long before the
        // 30 s lease would have.
        drop(held);
        let permit = waiting
            .await
            .unwrap()
            .expect("admitted by the dropped permit's release");
        permit.release().await.unwrap();
    }

    async fn shutdown_gives_back_every_permit_of_the_client(backend: Backend) {
        let long = MutexOptions::new().ttl(Duration::from_secs(30));
        let c = backend.client();
        let sem = c.semaphore_with("sem-shut", 3, long).unwrap();
        let a = sem.try_acquire(1).await.unwrap().expect("free");
        let b = sem.try_acquire(2).await.unwrap().expect("free");
        let mut con = backend.raw().await;
        assert_eq!(used(&mut con, "sem-shut").await, 3);
        c.shutdown(Duration::from_secs(5)).await;
        assert_eq!(
            used(&mut con, "sem-shut").await,
            0,
            "both permits of one client given back"
        );
        assert!(
            a.lease().lost().await.to_string().contains("shut"),
            "the holders are told"
        );
        drop((a, b));
    }

    async fn a_semaphore_and_a_mutex_of_one_name_are_separate(backend: Backend) {
        let c = backend.client();
        let guard = c
            .mutex("shared-name")
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .expect("free");
        let permit = c
            .semaphore("shared-name", 1)
            .unwrap()
            .try_acquire(1)
            .await
            .unwrap();
        let permit = permit.expect("the semaphore is not the mutex");
        assert!(permit.release().await.unwrap().was_held());
        assert!(guard.release().await.unwrap().was_held());
    }
);
