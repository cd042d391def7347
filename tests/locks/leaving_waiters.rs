//! Nobody waits behind a request that left: a semaphore or read-write lock request that gives up
//! (its wait timed out), or whose client died, admits at once whatever fits behind it — long
//! before an unrelated holder's lease ends. And the limit in force: `set_limit` is never undone
//! (not by a queued request heavier than the new limit, not by the last holder leaving, not by a
//! handle built with another limit).
//!
//! Every holder here has a 60 s lease. A request behind one that leaves waits without a deadline
//! of its own (its own last attempt would admit it and hide the bug), and the test gives it 20 s:
//! a request served only when a holder's lease ends would take 60 s.

use std::future::Future;
use std::time::Duration;

use dlock_core::{ErrorKind, MutexOptions, Permit};
use redis::AsyncCommands;

use crate::support::{Backend, backend_tests, queue_reaches};

/// Holders' leases: far longer than any wait below.
fn long() -> MutexOptions {
    MutexOptions::new().ttl(Duration::from_secs(60))
}

/// Far below the holders' 60 s lease, far above a push's round trip.
async fn promptly<T>(request: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), request)
        .await
        .expect("served when the request ahead left, not when an unrelated lease ended")
}

fn sem_key(name: &str) -> String {
    format!("dlock:{{{name}}}:sem")
}

backend_tests!(
    /// Limit 3, 2 permits held: X asks for 3 with a short wait, Y for 1 behind it. When X's wait
    /// ends, the free permit goes to Y at once (it used to wait for the holders' leases).
    async fn a_timed_out_request_admits_what_fits_behind_it(backend: Backend) {
        let name = "leave-sem";
        let client = backend.client();
        let sem = client.semaphore_with(name, 3, long()).unwrap();
        let held = sem.try_acquire(2).await.unwrap().expect("free");
        let con = backend.raw().await;
        let x = {
            let sem = backend.client().semaphore_with(name, 3, long()).unwrap();
            tokio::spawn(async move { sem.acquire_timeout(3, Duration::from_millis(500)).await })
        };
        queue_reaches(&con, &format!("{}:queue", sem_key(name)), 1).await;
        let y = {
            let sem = backend.client().semaphore_with(name, 3, long()).unwrap();
            tokio::spawn(async move { sem.acquire(1).await })
        };
        let e = x.await.unwrap().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
        let y: Permit = promptly(y).await.unwrap().unwrap();
        assert!(held.lease().is_held(), "the first holder still holds");
        y.release().await.unwrap();
        held.release().await.unwrap();
    }

    /// A reader holds; W asks to write with a short wait, R to read behind W. When W gives up
    /// only readers hold, so R is admitted at once.
    async fn a_writer_that_gave_up_lets_the_readers_behind_it_in(backend: Backend) {
        let name = "leave-rw";
        let rw = backend.client().rw_lock_with(name, long()).unwrap();
        let reading = rw.try_read().await.unwrap().expect("free");
        let con = backend.raw().await;
        let w = {
            let rw = backend.client().rw_lock_with(name, long()).unwrap();
            tokio::spawn(async move { rw.write_timeout(Duration::from_millis(500)).await })
        };
        queue_reaches(&con, &format!("dlock:{{{name}}}:rw:queue"), 1).await;
        let r = {
            let rw = backend.client().rw_lock_with(name, long()).unwrap();
            tokio::spawn(async move { rw.read().await })
        };
        let e = w.await.unwrap().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
        let r = promptly(r).await.unwrap().unwrap();
        assert!(reading.lease().is_held());
        r.release().await.unwrap();
        reading.release().await.unwrap();
    }

    /// A crashed client's queued request at the head (its client no longer listens) does not
    /// keep a fitting request behind it waiting for an unrelated lease.
    async fn a_dead_clients_request_at_the_head_is_skipped(backend: Backend) {
        let name = "leave-dead";
        let sem = backend.client().semaphore_with(name, 2, long()).unwrap();
        let held = sem.try_acquire(1).await.unwrap().expect("free");
        // What a client that crashed while queued leaves behind: its entry (weight 2, which does
        // not fit beside the holder), and nobody subscribed to its wake channel.
        let mut con = backend.raw().await;
        let queue = format!("{}:queue", sem_key(name));
        let entry = format!(
            "1 {} {} 60000 {} 2 gone\x1f1\x1f",
            "ab".repeat(16),
            "cd".repeat(8),
            backend.publish_mode()
        );
        let _: () = con.rpush(&queue, entry).await.unwrap();
        let y = backend.client().semaphore_with(name, 2, long()).unwrap();
        let y = promptly(y.acquire(1))
            .await
            .expect("admitted past the dead request");
        let left: usize = con.llen(&queue).await.unwrap();
        assert_eq!(left, 0, "the dead request was dropped");
        y.release().await.unwrap();
        held.release().await.unwrap();
    }

    /// `set_limit` below a queued request's weight fails that request at once (it could never be
    /// served) and admits what fits behind it; the lowered limit stays in force after the last
    /// holder leaves, for every handle.
    async fn a_lowered_limit_refuses_heavier_queued_requests_and_stays(backend: Backend) {
        let name = "limit-lowered";
        let mut sem = backend.client().semaphore_with(name, 3, long()).unwrap();
        let held = sem.try_acquire(1).await.unwrap().expect("free");
        let con = backend.raw().await;
        let queue = format!("{}:queue", sem_key(name));
        let x = {
            let sem = backend.client().semaphore_with(name, 3, long()).unwrap();
            tokio::spawn(async move { sem.acquire(3).await })
        };
        queue_reaches(&con, &queue, 1).await;
        let y = {
            let sem = backend.client().semaphore_with(name, 3, long()).unwrap();
            tokio::spawn(async move { sem.acquire(1).await })
        };
        queue_reaches(&con, &queue, 2).await;
        assert_eq!(sem.set_limit(2).await.unwrap(), Some(3));
        let e = promptly(x).await.unwrap().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
        assert!(e.to_string().contains("limit in Redis is 2"), "{e}");
        let y = promptly(y).await.unwrap().expect("1 held + 1 fits under 2");
        held.release().await.unwrap();
        y.release().await.unwrap();

        // Nobody holds or waits now: the limit of 2 is still the one in force, even for a
        // handle built with 3.
        let other = backend.client().semaphore_with(name, 3, long()).unwrap();
        let e = other.try_acquire(3).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
        let a = other.try_acquire(1).await.unwrap().expect("1 of 2");
        let b = other.try_acquire(1).await.unwrap().expect("2 of 2");
        assert!(
            other.try_acquire(1).await.unwrap().is_none(),
            "a 3rd permit under the limit of 2"
        );
        a.release().await.unwrap();
        b.release().await.unwrap();
    }

    /// `set_limit` on a semaphore nobody holds is kept: a handle built with a larger limit takes
    /// no more than it.
    async fn a_limit_set_on_an_idle_semaphore_is_kept(backend: Backend) {
        let name = "limit-idle";
        let mut sem = backend.client().semaphore_with(name, 3, long()).unwrap();
        assert_eq!(sem.set_limit(1).await.unwrap(), None);
        let other = backend.client().semaphore_with(name, 3, long()).unwrap();
        let one = other.try_acquire(1).await.unwrap().expect("1 of 1");
        assert!(
            other.try_acquire(1).await.unwrap().is_none(),
            "a 2nd permit under the limit of 1"
        );
        one.release().await.unwrap();
        let mut con = backend.raw().await;
        let kept: (Option<u32>, i64) = redis::pipe()
            .get(format!("{}:limit", sem_key(name)))
            .pttl(format!("{}:limit", sem_key(name)))
            .query_async(&mut con)
            .await
            .unwrap();
        assert_eq!(kept, (Some(1), -1), "a limit set by set_limit persists");
    }

    /// Foreign data at a shared lock's queue or expiry key is refused by name before anything
    /// is written (the lock's hash used to be left without an expiry).
    async fn foreign_data_at_derived_keys_is_refused_by_name(backend: Backend) {
        let mut con = backend.raw().await;
        for (name, suffix) in [
            ("foreign-q", ":queue"),
            ("foreign-exp", ":exp"),
            ("foreign-limit", ":limit"),
        ] {
            let derived = format!("{}{suffix}", sem_key(name));
            let _: () = con.set(&derived, "not dlock's").await.unwrap();
            let sem = backend.client().semaphore(name, 2).unwrap();
            let e = sem.try_acquire(1).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::WrongType, "{e}");
            assert!(e.to_string().contains(&derived), "names the key: {e}");
            let written: bool = con.exists(sem_key(name)).await.unwrap();
            assert!(!written, "nothing written before the refusal");
        }
    }
);
