//! dlock never writes to data it did not create. A lock key holding a value in another format
//! (or of another type, or a lock without expiry) is reported by name, and left as it was; so is
//! a fence key of a fenced write that holds anything but a fence as dlock writes it.

use std::time::Duration;

use dlock_core::{ErrorKind, ExtendOutcome, Fenced, FencingToken, ReleaseOutcome};
use redis::AsyncCommands;

use crate::support::{Backend, backend_tests};

fn assert_names_the_key(err: &dlock_core::Error, key: &str) {
    assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
    assert!(
        err.to_string().contains(key),
        "the error names the key: {err}"
    );
}

backend_tests!(
    async fn a_foreign_value_is_reported_and_never_modified(backend: Backend) {
        let c = backend.client();
        let mut con = backend.raw().await;
        let () = con.set("dlock:{x}", "hello").await.unwrap();
        let lock = c.mutex("x").unwrap();

        let err = lock.try_acquire().await.unwrap_err();
        assert_names_the_key(&err, "dlock:{x}");
        let err = lock
            .acquire_timeout(Duration::from_secs(2))
            .await
            .unwrap_err();
        assert_names_the_key(&err, "dlock:{x}");
        let err = c.inspect("x").await.unwrap_err();
        assert_names_the_key(&err, "dlock:{x}");
        let err = c.force_unlock("x").await.unwrap_err();
        assert_names_the_key(&err, "dlock:{x}");

        let value: String = con.get("dlock:{x}").await.unwrap();
        assert_eq!(value, "hello", "the foreign value was modified");
        let pttl: i64 = con.pttl("dlock:{x}").await.unwrap();
        assert_eq!(pttl, -1, "the foreign key was given an expiry");
        let queued: bool = con.exists("dlock:{x}:queue").await.unwrap();
        assert!(!queued, "nothing was queued on a foreign key");
    }

    async fn a_key_of_another_type_is_reported_and_never_modified(backend: Backend) {
        let c = backend.client();
        let mut con = backend.raw().await;
        let _: usize = con.rpush("dlock:{l}", "item").await.unwrap();
        let lock = c.mutex("l").unwrap();
        let err = lock.try_acquire().await.unwrap_err();
        assert_names_the_key(&err, "dlock:{l}");
        let err = lock
            .acquire_timeout(Duration::from_secs(2))
            .await
            .unwrap_err();
        assert_names_the_key(&err, "dlock:{l}");
        let err = c.force_unlock("l").await.unwrap_err();
        assert_names_the_key(&err, "dlock:{l}");
        let items: Vec<String> = con.lrange("dlock:{l}", 0, -1).await.unwrap();
        assert_eq!(items, ["item"]);
    }

    async fn a_lock_without_expiry_is_reported_not_waited_for(backend: Backend) {
        let c = backend.client();
        let mut con = backend.raw().await;
        // A lock value in dlock's format whose expiry someone removed (PERSIST).
        let value = "0123456789abcdef0123456789abcdef- elsewhere\x1f1\x1f";
        let () = con.set("dlock:{p}", value).await.unwrap();
        // `try_acquire` sees a lock in dlock's format held by another and answers "busy" (it
        // reads no expiry: one round trip of plain commands); a wait reads it and reports.
        let lock = c.mutex("p").unwrap();
        assert!(lock.try_acquire().await.unwrap().is_none());
        let err = lock
            .acquire_timeout(Duration::from_secs(5))
            .await
            .unwrap_err();
        assert_names_the_key(&err, "dlock:{p}");
        assert!(err.to_string().contains("no expiry"), "{err}");
        let still: String = con.get("dlock:{p}").await.unwrap();
        assert_eq!(still, value);
    }

    async fn a_held_lock_overwritten_by_another_program_is_left_alone(backend: Backend) {
        let c = backend.client();
        let mut con = backend.raw().await;
        let mut guard = c
            .mutex("o")
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .expect("free");
        let () = con.set("dlock:{o}", "someone else's").await.unwrap();
        assert_eq!(
            guard.extend(Duration::from_secs(60)).await.unwrap(),
            ExtendOutcome::TakenOver
        );
        assert_eq!(guard.release().await.unwrap(), ReleaseOutcome::TakenOver);
        let value: String = con.get("dlock:{o}").await.unwrap();
        assert_eq!(value, "someone else's");
        let pttl: i64 = con.pttl("dlock:{o}").await.unwrap();
        assert_eq!(pttl, -1);
    }
);

backend_tests!(
    async fn a_foreign_leader_record_is_refused_before_campaign_writes(backend: Backend) {
        let c = backend.client();
        let mut con = backend.raw().await;
        let record = "dlock:{election:e}:leader";
        let _: usize = con.hset(record, "owner", "billing").await.unwrap();
        let election = c.election("e").unwrap();
        let err = election
            .campaign_timeout("me", Duration::from_secs(5))
            .await
            .expect_err("a hash at the leader record is refused");
        assert_names_the_key(&err, record);
        let owner: String = con.hget(record, "owner").await.unwrap();
        assert_eq!(owner, "billing", "the foreign hash was modified");
        let pttl: i64 = con.pttl(record).await.unwrap();
        assert_eq!(pttl, -1, "the foreign key was given an expiry");

        // A string in another format: the same.
        let () = con.del(record).await.unwrap();
        let () = con.set(record, "leader=10.0.0.7").await.unwrap();
        let err = election
            .campaign_timeout("me", Duration::from_secs(5))
            .await
            .expect_err("a value dlock did not write is refused");
        assert_names_the_key(&err, record);
        let value: String = con.get(record).await.unwrap();
        assert_eq!(value, "leader=10.0.0.7");
        assert!(election.leader().await.unwrap().is_none());
    }

    async fn a_queue_of_another_type_is_refused_by_name(backend: Backend) {
        let c = backend.client();
        let mut con = backend.raw().await;
        let (key, queue) = ("dlock:{q}", "dlock:{q}:queue");
        let _: usize = con.hset(queue, "field", "theirs").await.unwrap();
        let lock = c.mutex("q").unwrap();

        // Free lock: the uncontended acquire is a plain SET NX and never reads the queue
        // (callers who wait keep the lock key, issue #35); the foreign key is left alone.
        let guard = lock.try_acquire().await.unwrap().expect("free");
        guard.release().await.unwrap();
        let exists: bool = con.exists(key).await.unwrap();
        assert!(!exists, "released");

        // Held by another: the waiting acquire's script would queue the caller.
        let () = con
            .set_ex(
                key,
                "0123456789abcdef0123456789abcdef-1 elsewhere\x1f1\x1f",
                60,
            )
            .await
            .unwrap();
        let err = lock
            .acquire_timeout(Duration::from_secs(2))
            .await
            .expect_err("refused");
        assert_names_the_key(&err, queue);
        let field: String = con.hget(queue, "field").await.unwrap();
        assert_eq!(field, "theirs", "the foreign queue was modified");
        let pttl: i64 = con.pttl(queue).await.unwrap();
        assert_eq!(pttl, -1, "the foreign queue was given an expiry");
    }

    async fn a_release_refuses_to_hand_off_to_a_queue_of_another_type(backend: Backend) {
        let c = backend.client();
        let mut con = backend.raw().await;
        let (key, queue) = ("dlock:{h}", "dlock:{h}:queue");
        let guard = c.mutex("h").unwrap().acquire().await.unwrap();
        // As if a waiter had queued (flag "w"), and the queue was then replaced by a hash.
        let _: usize = con.setrange(key, 32, "w").await.unwrap();
        let _: usize = con.hset(queue, "field", "theirs").await.unwrap();
        let held: String = con.get(key).await.unwrap();

        let err = guard.release().await.expect_err("refused");
        assert_names_the_key(&err, queue);
        let still: String = con.get(key).await.unwrap();
        assert_eq!(still, held, "the lock was changed");
        let field: String = con.hget(queue, "field").await.unwrap();
        assert_eq!(field, "theirs", "the foreign queue was modified");
        let err = c.force_unlock("h").await.unwrap_err();
        assert_names_the_key(&err, queue);
    }
);

backend_tests!(
    /// A fence key is read only in the form dlock writes it: a decimal u64 without sign or
    /// leading zeros. Another program's digit string is not a fence: `"0005"` is not fence 5
    /// (it would refuse a write with fence 999 as stale), and a number above `u64::MAX` is
    /// not a fence either (it was answered as a protocol error). Both, and every other
    /// non-canonical string, are refused by name, and nothing is written.
    async fn a_fence_key_holding_foreign_digits_is_refused_by_name(backend: Backend) {
        let c = backend.client();
        let mut con = backend.raw().await;
        let (key, fence_key) = ("data:{fd}", "data:{fd}:fence");
        let foreign = [
            "0005",
            "00",
            "+5",
            "-1",
            " 5",
            "5 ",
            "5.0",
            "1e3",
            "",
            "18446744073709551616",
            "99999999999999999999",
            "123456789012345678901",
            "018446744073709551615",
        ];
        for stored in foreign {
            let () = con.set(fence_key, stored).await.unwrap();
            let () = con.set(key, "theirs").await.unwrap();
            let err = c
                .fenced_set(key, FencingToken::new(999), "mine")
                .await
                .expect_err(&format!("a fence key holding {stored:?} is refused"));
            assert_names_the_key(&err, fence_key);
            let () = con.del(key).await.unwrap();
            let err = c
                .fenced_hset(key, FencingToken::new(999), &[("f", "mine")])
                .await
                .expect_err(&format!("a fence key holding {stored:?} is refused (hset)"));
            assert_names_the_key(&err, fence_key);
            let left: String = con.get(fence_key).await.unwrap();
            assert_eq!(left, stored, "the foreign fence key was modified");
            let exists: bool = con.exists(key).await.unwrap();
            assert!(!exists, "data written under a foreign fence ({stored:?})");
        }

        // The canonical forms at both ends are fences: 0 is below 999, u64::MAX above it.
        let () = con.set(fence_key, "0").await.unwrap();
        assert_eq!(
            c.fenced_set(key, FencingToken::new(999), "mine")
                .await
                .unwrap(),
            Fenced::Written
        );
        let () = con.set(fence_key, u64::MAX.to_string()).await.unwrap();
        assert_eq!(
            c.fenced_set(key, FencingToken::new(999), "late")
                .await
                .unwrap(),
            Fenced::Stale {
                stored: FencingToken::new(u64::MAX)
            }
        );
        let value: String = con.get(key).await.unwrap();
        assert_eq!(value, "mine");
    }
);
