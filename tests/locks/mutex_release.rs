//! Release and extend are owner-checked: a guard whose lease ran out never touches the lock of
//! the next holder, and is told so by a distinct outcome.

use std::time::Duration;

use dlock_core::{ExtendOutcome, MutexOptions, ReleaseOutcome};
use redis::AsyncCommands;

use crate::support::{Backend, Plain, backend_tests, eventually};

backend_tests!(
    async fn release_frees_the_lock(backend: Backend) {
        let lock = backend.client().mutex("rel").unwrap();
        let guard = lock.try_acquire().await.unwrap().expect("free lock");
        assert_eq!(guard.name(), "rel");
        assert!(guard.remaining() > Duration::from_secs(20));
        assert_eq!(guard.release().await.unwrap(), ReleaseOutcome::Released);
        let mut con = backend.raw().await;
        let exists: bool = con.exists("dlock:{rel}").await.unwrap();
        assert!(!exists);
        assert!(lock.try_acquire().await.unwrap().is_some());
    }

    async fn held_lock_is_not_acquired_twice(backend: Backend) {
        let lock = backend.client().mutex("twice").unwrap();
        let _held = lock.try_acquire().await.unwrap().expect("free lock");
        // Another task of the same client is another owner …
        let same_client = lock.clone();
        let from_task =
            tokio::spawn(async move { same_client.try_acquire().await.unwrap().is_none() });
        assert!(from_task.await.unwrap());
        // … and so is another client (another process).
        let other = backend.client().mutex("twice").unwrap();
        assert!(other.try_acquire().await.unwrap().is_none());
    }

    async fn expired_owner_cannot_release_or_extend_the_new_holder(backend: Backend) {
        let short = MutexOptions::new().ttl(Duration::from_millis(50));
        let old_owner = backend.client().mutex_with("taken", short).unwrap();
        let mut stale = old_owner.try_acquire().await.unwrap().expect("free lock");
        let mut con = backend.raw().await;
        lease_runs_out(&mut con, "dlock:{taken}").await;
        assert_eq!(stale.remaining(), Duration::ZERO);

        let new_owner = backend.client().mutex("taken").unwrap();
        let fresh = new_owner
            .try_acquire()
            .await
            .unwrap()
            .expect("expired lock is free");
        let pttl_before: i64 = con.pttl("dlock:{taken}").await.unwrap();

        assert_eq!(
            stale.extend(Duration::from_secs(60)).await.unwrap(),
            ExtendOutcome::TakenOver
        );
        let pttl_after: i64 = con.pttl("dlock:{taken}").await.unwrap();
        assert!(
            pttl_after <= pttl_before,
            "the stale owner extended the new holder's lease"
        );
        assert_eq!(stale.release().await.unwrap(), ReleaseOutcome::TakenOver);

        // The new holder still holds it, and only it can release it.
        let probe = backend.client().mutex("taken").unwrap();
        assert!(probe.try_acquire().await.unwrap().is_none());
        assert_eq!(fresh.release().await.unwrap(), ReleaseOutcome::Released);
    }

    async fn expired_and_free_is_reported_as_expired(backend: Backend) {
        let lock = backend
            .client()
            .mutex_with("gone", MutexOptions::new().ttl(Duration::from_millis(30)))
            .unwrap();
        let mut guard = lock.try_acquire().await.unwrap().expect("free lock");
        let mut con = backend.raw().await;
        lease_runs_out(&mut con, "dlock:{gone}").await;
        assert_eq!(
            guard.extend(Duration::from_secs(5)).await.unwrap(),
            ExtendOutcome::Expired
        );
        let exists: bool = con.exists("dlock:{gone}").await.unwrap();
        assert!(!exists, "extend must not re-create an expired lock");
        assert_eq!(guard.release().await.unwrap(), ReleaseOutcome::Expired);
    }

    async fn release_finds_its_lock_whatever_happened_to_the_value(backend: Backend) {
        // The release names its owner by the whole value its uncontended acquire wrote (one
        // comparison in release.lua); a value changed since — a fence added on demand, a waiter's
        // flag — must still be recognised by its token, and the lock released or handed on.
        let labelled = MutexOptions::new().label("pay-7");
        let client = backend.client();
        let mut con = backend.raw().await;

        let lock = client.mutex_with("val:plain", labelled.clone()).unwrap();
        let guard = lock.try_acquire().await.unwrap().expect("free lock");
        assert_eq!(guard.release().await.unwrap(), ReleaseOutcome::Released);
        assert!(!con.exists::<_, bool>("dlock:{val:plain}").await.unwrap());

        let lock = client.mutex_with("val:fenced", labelled.clone()).unwrap();
        let guard = lock.try_acquire().await.unwrap().expect("free lock");
        let before: String = con.get("dlock:{val:fenced}").await.unwrap();
        guard.fencing_token().await.unwrap();
        let after: String = con.get("dlock:{val:fenced}").await.unwrap();
        assert_ne!(
            before, after,
            "the fence on demand is written into the value"
        );
        assert_eq!(guard.release().await.unwrap(), ReleaseOutcome::Released);
        assert!(!con.exists::<_, bool>("dlock:{val:fenced}").await.unwrap());

        let lock = client.mutex_with("val:waited", labelled).unwrap();
        let guard = lock.try_acquire().await.unwrap().expect("free lock");
        let other = backend.client().mutex("val:waited").unwrap();
        let waiter =
            tokio::spawn(async move { other.acquire_timeout(Duration::from_secs(10)).await });
        eventually(Duration::from_secs(5), "the waiter flags the lock", || {
            let mut con = con.clone();
            async move {
                let value: String = con.get("dlock:{val:waited}").await.ok()?;
                (value.as_bytes().get(32) == Some(&b'w')).then_some(())
            }
        })
        .await;
        assert_eq!(guard.release().await.unwrap(), ReleaseOutcome::Released);
        let handed = waiter
            .await
            .unwrap()
            .expect("the release hands the lock on");
        assert_eq!(handed.release().await.unwrap(), ReleaseOutcome::Released);
    }

    async fn extend_renews_the_lease(backend: Backend) {
        let lock = backend
            .client()
            .mutex_with("ext", MutexOptions::new().ttl(Duration::from_millis(500)))
            .unwrap();
        let mut guard = lock.try_acquire().await.unwrap().expect("free lock");
        assert_eq!(
            guard.extend(Duration::from_secs(60)).await.unwrap(),
            ExtendOutcome::Extended
        );
        assert_eq!(guard.ttl(), Duration::from_secs(60));
        let mut con = backend.raw().await;
        let pttl: i64 = con.pttl("dlock:{ext}").await.unwrap();
        assert!(pttl > 50_000, "PTTL after extend: {pttl}");
        assert!(guard.remaining() > Duration::from_secs(50));
        assert_eq!(guard.release().await.unwrap(), ReleaseOutcome::Released);
    }
);

/// Returns once `key` is gone: its lease ran out on the server.
async fn lease_runs_out(con: &mut Plain, key: &str) {
    eventually(Duration::from_secs(5), "the lease runs out", || {
        let mut con = con.clone();
        async move { (!con.exists::<_, bool>(key).await.ok()?).then_some(()) }
    })
    .await;
}
