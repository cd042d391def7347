//! The scripts' contracts, driven directly: a request that runs twice (its first reply was lost)
//! leaves the same state as running once, and release hands off only to live waiters.

use dlock_core::__private::conformance::Source;
use redis::AsyncCommands;

use crate::support::{Backend, Plain, backend_tests};

/// The lock key, and the queue key the scripts derive from it.
const KEYS: [&str; 2] = ["t:{r}", "t:{r}:queue"];

/// The fence counter of the lock's slot, which the client names for the scripts.
fn counter() -> String {
    dlock_core::ext::fence_counter_key("t:", "r").unwrap()
}
const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

async fn acquire(con: &mut Plain, token: &str, mode: &str, entry: &str) -> Vec<i64> {
    let script = redis::Script::new(&Source::Acquire.text());
    let mut call = script.key(KEYS[0]);
    call.arg(format!("{token}- host\x1f1\x1f"))
        .arg(10_000)
        .arg(mode)
        .arg(entry)
        .arg(counter());
    // A fresh acquisition answers with the bare fence (the fast path); normalise it to the
    // array form {1, fence, pttl} of the other outcomes.
    match call.invoke_async(con).await.unwrap() {
        redis::Value::Int(fence) => vec![1, fence, 10_000],
        other => redis::from_redis_value(other).unwrap(),
    }
}

/// A semaphore `t:{s}:sem` of 1 permit: shared_acquire.lua's attempt of `token` (weight 1,
/// lease 10 s) in `mode` with its queue `entry`; the reply's first item (1: holds, 0: not now).
async fn shared(con: &mut Plain, token: &str, mode: &str, entry: &str) -> i64 {
    let counter = dlock_core::ext::fence_counter_key("t:", "s").unwrap();
    let reply: Vec<i64> = redis::Script::new(&Source::SharedAcquire.text())
        .key(SEM[0])
        .arg(token)
        .arg(1)
        .arg(1)
        .arg("keep")
        .arg(10_000)
        .arg(mode)
        .arg(entry)
        .arg(counter)
        .arg("host\x1f2\x1f")
        .invoke_async(con)
        .await
        .unwrap();
    reply[0]
}

/// The semaphore's hash and queue.
const SEM: [&str; 2] = ["t:{s}:sem", "t:{s}:sem:queue"];

/// A 32-digit token of its own for each `i`.
fn token(i: usize) -> String {
    format!("{i:032x}")
}

/// `B` joins the queue at `queue` (a lock held by `A`) with `join` (a first attempt: token,
/// entry, answering 0 for "queued"), then 200 others, then `B`'s join again, as a resend: each
/// is queued once, `B` first.
async fn join_resent_after_many_others(
    con: &mut Plain,
    queue: &str,
    entry: impl Fn(&str) -> String,
    mut join: impl AsyncFnMut(&mut Plain, &str, &str) -> i64,
) {
    assert_eq!(join(con, B, &entry(B)).await, 0);
    for i in 0..200 {
        let other = token(i);
        assert_eq!(join(con, &other, &entry(&other)).await, 0);
    }
    assert_eq!(
        join(con, B, &entry(B)).await,
        0,
        "the resend finds B queued"
    );
    let queued: Vec<String> = con.lrange(queue, 0, -1).await.unwrap();
    assert_eq!(queued.len(), 201, "B and the 200 others, once each");
    assert_eq!(queued[0], entry(B), "B keeps its place");
}

async fn release(con: &mut Plain, token: &str) -> i64 {
    // A hand-off answers {2, grant}; the other outcomes are bare integers.
    match redis::Script::new(&Source::Release.text())
        .key(KEYS[0])
        .arg(token)
        .arg(counter())
        .invoke_async(con)
        .await
        .unwrap()
    {
        redis::Value::Array(items) => redis::from_redis_value(items[0].clone()).unwrap(),
        other => redis::from_redis_value(other).unwrap(),
    }
}

backend_tests!(
    async fn a_repeated_acquire_returns_the_same_fence(backend: Backend) {
        let mut con = backend.raw().await;
        let first = acquire(&mut con, A, "try", "").await;
        let again = acquire(&mut con, A, "try", "").await;
        assert_eq!(first[0], 1);
        assert_eq!(again[0], 1);
        assert_eq!(
            first[1], again[1],
            "a retried acquire must not issue a new fence"
        );
        let fence: i64 = con.get(counter()).await.unwrap();
        assert_eq!(fence, first[1], "the counter moved once");
    }

    async fn a_repeated_queued_attempt_queues_once(backend: Backend) {
        let mut con = backend.raw().await;
        // How this backend's clients are woken: PUBLISH, or SPUBLISH on a cluster.
        let publish = backend.publish_mode();
        assert_eq!(acquire(&mut con, A, "try", "").await[0], 1);
        let entry = format!("{B} 00ff 10000 {publish} host\x1f2\x1f");
        for _ in 0..3 {
            let reply = acquire(&mut con, B, "wait", &entry).await;
            assert_eq!(reply[0], 0);
            assert!(reply[1] > 0, "PTTL of the holder");
            assert!(reply[2] > 1_600_000_000_000, "server time in ms");
        }
        let queued: Vec<String> = con.lrange(KEYS[1], 0, -1).await.unwrap();
        assert_eq!(queued, vec![entry.clone()]);
        let reply = acquire(&mut con, B, "last", &entry).await;
        assert_eq!(reply[0], 0);
        let queued: usize = con.llen(KEYS[1]).await.unwrap();
        assert_eq!(queued, 0, "the last attempt leaves the queue");
    }

    /// Issue #44: a waiting acquire's first attempt ("join") resent after more than 128 others
    /// joined (a cluster client resends a request whose reply it lost) queues once. It looked
    /// for its entry among the last 128 only, and queued a second one.
    async fn a_join_resent_after_many_others_queues_once(backend: Backend) {
        let mut con = backend.raw().await;
        let publish = backend.publish_mode();
        let entry = |token: &str| format!("1 {token} 00ff 10000 {publish} host\x1f2\x1f");
        assert_eq!(acquire(&mut con, A, "try", "").await[0], 1);
        let join = async |con: &mut Plain, token: &str, entry: &str| {
            acquire(con, token, "join", entry).await[0]
        };
        join_resent_after_many_others(&mut con, KEYS[1], entry, join).await;
    }

    /// The same for a semaphore's request (shared_acquire.lua "join", new in issue #44): a
    /// request queued twice would be admitted twice.
    async fn a_shared_join_resent_after_many_others_queues_once(backend: Backend) {
        let mut con = backend.raw().await;
        let publish = backend.publish_mode();
        let entry = |token: &str| format!("1 {token} 00ff 10000 {publish} 1 host\x1f2\x1f");
        // The requests' client listens: a head whose client is gone would be dropped.
        let _listener = backend.subscribe("t:{s}:sem:wake:00ff").await;
        assert_eq!(shared(&mut con, A, "", "").await, 1);
        let join = async |con: &mut Plain, token: &str, entry: &str| {
            shared(con, token, "join", entry).await
        };
        join_resent_after_many_others(&mut con, SEM[1], entry, join).await;
    }

    /// Issue #44: a first attempt's mark (`<lock>:joined:<token>`) goes when its entry leaves
    /// the queue — handed the lock, or by the request's last attempt — so a request that ends
    /// leaves nothing behind; a mutex's and a semaphore's alike.
    async fn a_request_that_leaves_the_queue_leaves_no_join_mark(backend: Backend) {
        let mut con = backend.raw().await;
        let publish = backend.publish_mode();
        let _mutex_listener = backend.subscribe("t:{r}:wake:00ff").await;
        let _sem_listener = backend.subscribe("t:{s}:sem:wake:00ff").await;
        let mark = |key: &str, token: &str| format!("{key}:joined:{token}");
        let marks = |con: &mut Plain, keys: Vec<String>| {
            let mut con = con.clone();
            async move {
                let n: usize = con.exists(keys).await.unwrap();
                n
            }
        };
        let entry = |token: &str| format!("1 {token} 00ff 10000 {publish} host\x1f2\x1f");
        let c = token(1);
        assert_eq!(acquire(&mut con, A, "try", "").await[0], 1);
        assert_eq!(acquire(&mut con, B, "join", &entry(B)).await[0], 0);
        assert_eq!(acquire(&mut con, &c, "join", &entry(&c)).await[0], 0);
        let both = vec![mark(KEYS[0], B), mark(KEYS[0], &c)];
        assert_eq!(marks(&mut con, both.clone()).await, 2, "each join marked");
        assert_eq!(release(&mut con, A).await, 2, "handed to B");
        assert_eq!(acquire(&mut con, &c, "last", &entry(&c)).await[0], 0);
        assert_eq!(marks(&mut con, both).await, 0, "B handed the lock, C gone");

        let entry = |token: &str| format!("1 {token} 00ff 10000 {publish} 1 host\x1f2\x1f");
        assert_eq!(shared(&mut con, A, "", "").await, 1);
        assert_eq!(shared(&mut con, B, "join", &entry(B)).await, 0);
        assert_eq!(shared(&mut con, &c, "join", &entry(&c)).await, 0);
        let both = vec![mark(SEM[0], B), mark(SEM[0], &c)];
        assert_eq!(marks(&mut con, both.clone()).await, 2, "each join marked");
        assert_eq!(shared(&mut con, &c, "last", &entry(&c)).await, 0);
        let released: i64 = redis::Script::new(&Source::SharedRelease.text())
            .key(SEM[0])
            .arg(A)
            .arg(dlock_core::ext::fence_counter_key("t:", "s").unwrap())
            .invoke_async(&mut con)
            .await
            .unwrap();
        assert_eq!(released, 1, "A's permit goes to B");
        assert_eq!(marks(&mut con, both).await, 0, "B admitted, C gone");
    }

    /// Issue #44: the mutex queue expires with the key kept for it (it had no expiry: the
    /// entries of waiters that all died stayed forever), and each step that keeps the key keeps
    /// the queue as long: a waiter's attempt, the holder's renewal.
    async fn the_queue_expires_with_the_key_kept_for_it(backend: Backend) {
        let mut con = backend.raw().await;
        let publish = backend.publish_mode();
        let expiry = |con: &mut Plain, key: &'static str| {
            let mut con = con.clone();
            async move {
                let at: i64 = redis::cmd("PEXPIRETIME")
                    .arg(key)
                    .query_async(&mut con)
                    .await
                    .unwrap();
                at
            }
        };
        assert_eq!(acquire(&mut con, A, "try", "").await[0], 1);
        let entry = format!("1 {B} 00ff 10000 {publish} host\x1f2\x1f");
        assert_eq!(acquire(&mut con, B, "join", &entry).await[0], 0);
        let kept = expiry(&mut con, KEYS[0]).await;
        assert!(kept > 0, "the key is kept for the waiter");
        assert_eq!(
            expiry(&mut con, KEYS[1]).await,
            kept,
            "the queue expires with it"
        );
        let extended: Vec<i64> = redis::Script::new(&Source::Extend.text())
            .key(KEYS[0])
            .arg(A)
            .arg(60_000)
            .invoke_async(&mut con)
            .await
            .unwrap();
        assert_eq!(extended, vec![1]);
        let renewed = expiry(&mut con, KEYS[0]).await;
        assert!(
            renewed > kept,
            "the renewal keeps the key a lease past its new deadline"
        );
        assert_eq!(
            expiry(&mut con, KEYS[1]).await,
            renewed,
            "and the queue with it"
        );
    }

    async fn a_repeated_release_never_touches_the_next_owner(backend: Backend) {
        let mut con = backend.raw().await;
        assert_eq!(acquire(&mut con, A, "try", "").await[0], 1);
        assert_eq!(release(&mut con, A).await, 1);
        assert_eq!(
            release(&mut con, A).await,
            0,
            "second release finds nothing held"
        );
        assert_eq!(acquire(&mut con, B, "try", "").await[0], 1);
        assert_eq!(release(&mut con, A).await, -1, "held by another owner");
        assert_eq!(
            release(&mut con, "").await,
            -1,
            "an empty token owns nothing"
        );
        assert_eq!(
            release(&mut con, &B[..8]).await,
            -1,
            "a partial token owns nothing"
        );
        let extended: Vec<i64> = redis::Script::new(&Source::Extend.text())
            .key(KEYS[0])
            .arg(A)
            .arg(60_000)
            .invoke_async(&mut con)
            .await
            .unwrap();
        assert_eq!(extended, vec![-1]);
        let value: String = con.get(KEYS[0]).await.unwrap();
        assert!(value.starts_with(B), "B still holds the lock");
    }

    async fn release_skips_waiters_whose_client_is_gone(backend: Backend) {
        let mut con = backend.raw().await;
        // How this backend's clients are woken: PUBLISH, or SPUBLISH on a cluster.
        let publish = backend.publish_mode();
        assert_eq!(acquire(&mut con, A, "try", "").await[0], 1);
        // A queue entry of a client that subscribes to nothing: it crashed after queueing.
        let entry = format!("{B} dead 10000 {publish} host\x1f2\x1f");
        assert_eq!(acquire(&mut con, B, "wait", &entry).await[0], 0);
        assert_eq!(release(&mut con, A).await, 1, "nobody live to hand off to");
        let exists: bool = con.exists(KEYS[0]).await.unwrap();
        assert!(!exists, "a dead waiter must not inherit the lock");
        let queued: usize = con.llen(KEYS[1]).await.unwrap();
        assert_eq!(queued, 0);
    }

    async fn release_hands_off_to_a_live_waiter_and_tells_it(backend: Backend) {
        let mut con = backend.raw().await;
        // How this backend's clients are woken: PUBLISH, or SPUBLISH on a cluster.
        let publish = backend.publish_mode();
        let mut listener = backend.subscribe("t:{r}:wake:beef").await;
        let first = acquire(&mut con, A, "try", "").await;
        let entry = format!("{B} beef 7000 {publish} host\x1f2\x1flabel");
        assert_eq!(acquire(&mut con, B, "wait", &entry).await[0], 0);
        assert_eq!(release(&mut con, A).await, 2);

        let value: String = con.get(KEYS[0]).await.unwrap();
        assert!(value.starts_with(B));
        assert!(
            value.contains(" host\x1f2\x1flabel\x1f"),
            "the waiter's metadata, then the fence issued with the hand-off: {value:?}"
        );
        let pttl: i64 = con.pttl(KEYS[0]).await.unwrap();
        assert!(
            pttl > 5_000 && pttl <= 7_000,
            "the waiter's own lease: {pttl}"
        );

        let payload = listener.next_message().await;
        let parts: Vec<&str> = payload.split(' ').collect();
        assert_eq!(parts[0], B);
        let fence: i64 = parts[1].parse().unwrap();
        assert!(fence > first[1], "the hand-off issues a new, larger fence");
        assert_eq!(parts[3], "7000");
        // The waiter's own acquire now finds the lock is its own.
        let mine = acquire(&mut con, B, "wait", &entry).await;
        assert_eq!(mine[..2], [1, fence]);
    }

    async fn a_queued_waiter_flags_the_lock_so_release_hands_off(backend: Backend) {
        let mut con = backend.raw().await;
        // How this backend's clients are woken: PUBLISH, or SPUBLISH on a cluster.
        let publish = backend.publish_mode();
        assert_eq!(acquire(&mut con, A, "try", "").await[0], 1);
        let value: String = con.get(KEYS[0]).await.unwrap();
        assert_eq!(&value[32..33], "-", "nobody waits: release may just delete");
        let entry = format!("{B} dead 10000 {publish} host\x1f2\x1f");
        assert_eq!(acquire(&mut con, B, "wait", &entry).await[0], 0);
        let value: String = con.get(KEYS[0]).await.unwrap();
        assert_eq!(&value[32..33], "w", "a waiter marks the lock");
    }

    async fn fences_are_floored_at_the_server_clock(backend: Backend) {
        let mut con = backend.raw().await;
        // A counter that ran ahead of the clock (or a clock that stepped back) still increases.
        let ahead: i64 = 9_000_000_000_000_000;
        let () = con.set(counter(), ahead).await.unwrap();
        let reply = acquire(&mut con, A, "try", "").await;
        assert_eq!(reply[..2], [1, ahead + 1]);
        assert_eq!(release(&mut con, A).await, 1);
        // A lost counter restarts at the server clock (microseconds), not at 1.
        let _: usize = con.del(counter()).await.unwrap();
        let reply = acquire(&mut con, A, "try", "").await;
        assert!(
            reply[1] > 1_700_000_000_000_000,
            "floored at server time: {}",
            reply[1]
        );
        assert_eq!(release(&mut con, A).await, 1);
        let pttl: i64 = con.pttl(counter()).await.unwrap();
        assert_eq!(pttl, -1, "one counter per slot, kept: it has no expiry");
    }
);
