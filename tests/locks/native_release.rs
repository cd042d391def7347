//! The native release (issue #48): on a server with `DELIFEQ` (Valkey 9.1 here), a hold the
//! uncontended `SET` took is released by that one command, no script; a 0 from it (the value
//! changed: a waiter flagged it, the lease ran out, another owner took it) sends release.lua
//! next, whose answer the caller gets, so waiters are still served and outcomes read as before.
//! On a server without the command (Redis 7.0, Valkey 8.1) nothing changes: release.lua only.
//! Which one the server is, the tests ask it as dlock does (`COMMAND INFO DELIFEQ`), never by
//! its version; what ran, they read from `INFO commandstats` (`cmdstat_delifeq`).

use std::time::Duration;

use dlock_core::{MutexOptions, ReleaseOutcome};
use redis::AsyncCommands;

use crate::support::{Backend, Plain, backend_tests, eventually, take_and_release};

/// Whether the backend's servers have `DELIFEQ`, asked as dlock asks.
async fn has_delifeq(backend: &Backend) -> bool {
    let server = &backend.servers()[0];
    let mut con = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let described: Vec<redis::Value> = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("DELIFEQ")
        .query_async(&mut con)
        .await
        .unwrap();
    !matches!(described.as_slice(), [redis::Value::Nil])
}

/// `DELIFEQ` and script calls (`EVALSHA`, `EVAL`) the servers ran so far.
async fn counts(backend: &Backend) -> (u64, u64) {
    let scripts = backend.evalsha_calls().await + backend.calls("eval").await;
    (backend.calls("delifeq").await, scripts)
}

/// Waits until a waiter has flagged `key` (the `w` after the token: someone is queued).
async fn flagged(con: &Plain, key: &str) {
    eventually(Duration::from_secs(10), "a waiter flags the lock", || {
        let mut con = con.clone();
        async move {
            let value: String = con.get(key).await.ok()?;
            (value.as_bytes().get(32) == Some(&b'w')).then_some(())
        }
    })
    .await;
}

/// Waits until `key` is gone (its lease ran out).
async fn gone(con: &Plain, key: &str) {
    eventually(Duration::from_secs(5), "the lease runs out", || {
        let mut con = con.clone();
        async move { (!con.exists::<_, bool>(key).await.ok()?).then_some(()) }
    })
    .await;
}

backend_tests!(
    async fn a_plain_hold_is_released_by_delifeq_where_the_server_has_it(backend: Backend) {
        let native = has_delifeq(&backend).await;
        let client = backend.client();
        let lock = client
            .mutex_with("nat:plain", MutexOptions::new().label("w1"))
            .unwrap();
        // The first release asks the server whether it has DELIFEQ, and loads what it needs.
        take_and_release(&lock).await;
        let (delifeq, scripts) = counts(&backend).await;
        let mut con = backend.raw().await;
        for _ in 0..3 {
            let guard = lock.try_acquire().await.unwrap().expect("free lock");
            assert_eq!(guard.release().await.unwrap(), ReleaseOutcome::Released);
            assert!(!con.exists::<_, bool>("dlock:{nat:plain}").await.unwrap());
        }
        let (delifeq_after, scripts_after) = counts(&backend).await;
        if native {
            assert_eq!(delifeq_after - delifeq, 3, "each release is one DELIFEQ");
            assert_eq!(scripts_after, scripts, "and no script");
        } else {
            assert_eq!(delifeq_after, 0, "no DELIFEQ where the server has none");
            assert_eq!(scripts_after - scripts, 3, "each release is release.lua");
        }
    }

    async fn a_waiter_queued_before_the_release_is_still_handed_the_lock(backend: Backend) {
        let native = has_delifeq(&backend).await;
        let lock = backend.client().mutex("nat:waited").unwrap();
        take_and_release(&lock).await;
        let guard = lock.try_acquire().await.unwrap().expect("free lock");
        // Another client (another process): this client does not know it waits.
        let other = backend.client().mutex("nat:waited").unwrap();
        let waiter =
            tokio::spawn(async move { other.acquire_timeout(Duration::from_secs(20)).await });
        let con = backend.raw().await;
        flagged(&con, "dlock:{nat:waited}").await;
        let (delifeq, _) = counts(&backend).await;
        assert_eq!(guard.release().await.unwrap(), ReleaseOutcome::Released);
        // DELIFEQ answered 0 (the value is flagged), and release.lua handed the lock on.
        let expected = u64::from(native);
        assert_eq!(counts(&backend).await.0 - delifeq, expected);
        let handed = waiter
            .await
            .unwrap()
            .expect("the release hands the lock on");
        assert_eq!(handed.release().await.unwrap(), ReleaseOutcome::Released);
    }

    async fn a_release_after_the_lease_ran_out_reports_what_it_did_before(backend: Backend) {
        let native = has_delifeq(&backend).await;
        let short = MutexOptions::new().ttl(Duration::from_millis(50));
        let client = backend.client();
        let lock = client.mutex_with("nat:expired", short.clone()).unwrap();
        take_and_release(&lock).await;
        let con = backend.raw().await;
        let (delifeq, _) = counts(&backend).await;

        // Expired, and nobody took it: release.lua says "expired".
        let guard = lock.try_acquire().await.unwrap().expect("free lock");
        gone(&con, "dlock:{nat:expired}").await;
        assert_eq!(guard.release().await.unwrap(), ReleaseOutcome::Expired);

        // Expired, and another owner holds it: "held by another", and it keeps the lock.
        let guard = lock.try_acquire().await.unwrap().expect("free lock");
        gone(&con, "dlock:{nat:expired}").await;
        let next = backend.client().mutex("nat:expired").unwrap();
        let fresh = next
            .try_acquire()
            .await
            .unwrap()
            .expect("expired lock is free");
        assert_eq!(guard.release().await.unwrap(), ReleaseOutcome::TakenOver);
        let probe = backend.client().mutex("nat:expired").unwrap();
        assert!(probe.try_acquire().await.unwrap().is_none(), "still held");
        assert_eq!(fresh.release().await.unwrap(), ReleaseOutcome::Released);

        // Two DELIFEQ that answered 0, and the new holder's that answered 1.
        let expected = if native { 3 } else { 0 };
        assert_eq!(counts(&backend).await.0 - delifeq, expected);
    }

    async fn a_client_with_its_own_waiter_skips_delifeq(backend: Backend) {
        // The waiter is this client's: the release knows the lock is flagged, and goes to
        // release.lua at once (no DELIFEQ answering 0 first: one round trip, not two).
        let lock = backend.client().mutex("nat:local").unwrap();
        take_and_release(&lock).await;
        let guard = lock.try_acquire().await.unwrap().expect("free lock");
        let same = lock.clone();
        let waiter =
            tokio::spawn(async move { same.acquire_timeout(Duration::from_secs(20)).await });
        let con = backend.raw().await;
        flagged(&con, "dlock:{nat:local}").await;
        let (delifeq, scripts) = counts(&backend).await;
        assert_eq!(guard.release().await.unwrap(), ReleaseOutcome::Released);
        let handed = waiter
            .await
            .unwrap()
            .expect("the release hands the lock on");
        let (delifeq_after, scripts_after) = counts(&backend).await;
        assert_eq!(
            delifeq_after, delifeq,
            "no DELIFEQ for a lock this client waits for"
        );
        assert!(scripts_after > scripts, "release.lua ran");
        assert_eq!(handed.release().await.unwrap(), ReleaseOutcome::Released);
    }
);
