//! Guarded writes (`guard.guarded()…exec()`) and fence-checked sets (`Client::fenced_set`), on
//! both backends: a guarded batch is applied while the hold is ours, and refused — changing
//! nothing — once the lock was forced open, ran out, was taken over, or its holder process was
//! paused (SIGSTOP) past its lease; a fenced set refuses a writer whose token is smaller than
//! the stored one, exactly for every u64. Misuse is refused before anything is sent: keys of
//! another cluster slot, dlock's own keys, unsupported commands, guards of several locks.

use std::time::Duration;

use dlock_core::{
    Client, ErrorKind, Fenced, FencingToken, Guarded, LostReason, MutexOptions, Refused,
};
use redis::AsyncCommands;

use crate::support::{Backend, Plain, Worker, backend_tests, eventually, has_written};

/// The lock every test here takes, and data keys in its slot (its name as hash tag).
const LOCK: &str = "acct:7";
const BALANCE: &str = "balance:{acct:7}";
const HISTORY: &str = "history:{acct:7}";
const PROFILE: &str = "profile:{acct:7}";

/// The data keys as the test reads them back: (balance, history, profile status).
async fn data(con: &mut Plain) -> (Option<String>, Vec<String>, Option<String>) {
    let balance: Option<String> = con.get(BALANCE).await.unwrap();
    let history: Vec<String> = con.lrange(HISTORY, 0, -1).await.unwrap();
    let status: Option<String> = con.hget(PROFILE, "status").await.unwrap();
    (balance, history, status)
}

/// A batch over three keys of three types, with a read among the writes.
async fn batch(guard: &dlock_core::MutexGuard, amount: i64) -> dlock_core::Result<Guarded> {
    guard
        .guarded()
        .incr(BALANCE, amount)
        .rpush(HISTORY, amount)
        .hset(PROFILE, "status", "active")
        .get(BALANCE)
        .exec()
        .await
}

/// A mutex of `client` with a fixed lease of `ttl` (no watchdog).
fn lock(client: &Client, ttl: Duration) -> dlock_core::Mutex {
    client
        .mutex_with(LOCK, MutexOptions::new().ttl(ttl))
        .unwrap()
}

/// The lock, taken by `client` for 30 s.
async fn held(client: &Client) -> dlock_core::MutexGuard {
    lock(client, Duration::from_secs(30))
        .acquire()
        .await
        .unwrap()
}

backend_tests!(
    async fn a_guarded_batch_applies_while_held_in_one_step(backend: Backend) {
        let client = backend.client();
        let guard = held(&client).await;
        let outcome = batch(&guard, 120).await.unwrap();
        assert!(outcome.is_applied(), "{outcome:?}");
        assert_eq!(outcome.replies().unwrap().len(), 4);
        assert_eq!(outcome.reply::<i64>(0).unwrap(), 120);
        assert_eq!(outcome.reply::<i64>(1).unwrap(), 1);
        assert_eq!(outcome.reply::<String>(3).unwrap(), "120");
        assert_eq!(
            outcome.reply::<i64>(4).unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
        let mut con = backend.raw().await;
        assert_eq!(
            data(&mut con).await,
            (
                Some("120".into()),
                vec!["120".into()],
                Some("active".into())
            )
        );
        // The same lease goes on: a second batch adds to the first.
        assert!(batch(&guard, 5).await.unwrap().is_applied());
        assert_eq!(data(&mut con).await.0.as_deref(), Some("125"));
        assert!(guard.release().await.unwrap().was_held());
    }

    async fn a_guarded_batch_is_refused_and_changes_nothing_once_the_lock_was_forced_open(
        backend: Backend,
    ) {
        let client = backend.client();
        let guard = held(&client).await;
        assert!(client.force_unlock(LOCK).await.unwrap());
        let outcome = batch(&guard, 50).await.unwrap();
        assert_eq!(outcome, Guarded::Refused(Refused::Lost));
        assert!(outcome.replies().is_none());
        assert_eq!(
            outcome.reply::<i64>(0).unwrap_err().kind(),
            ErrorKind::LeaseLost
        );
        let mut con = backend.raw().await;
        assert_eq!(data(&mut con).await, (None, vec![], None));
        // The refusal tells the lease, too.
        assert!(!guard.lease().is_held());
    }

    async fn a_guarded_batch_is_refused_after_expiry_and_after_a_takeover(backend: Backend) {
        let client = backend.client();
        let short = lock(&client, Duration::from_millis(300));
        let guard = short.acquire().await.unwrap();
        let mut con = backend.raw().await;
        // Ran out in Redis (the key is gone), nobody else holds it.
        eventually(Duration::from_secs(5), "the lease runs out", || {
            let mut con = con.clone();
            async move {
                let exists: bool = con.exists("dlock:{acct:7}").await.ok()?;
                (!exists).then_some(())
            }
        })
        .await;
        assert_eq!(
            batch(&guard, 1).await.unwrap(),
            Guarded::Refused(Refused::Lost)
        );

        // Ran out and taken by another holder, who writes.
        let guard = short.acquire().await.unwrap();
        let other = lock(&backend.client(), Duration::from_secs(30))
            .acquire_timeout(Duration::from_secs(5))
            .await
            .unwrap();
        assert!(batch(&other, 7).await.unwrap().is_applied());
        assert_eq!(
            batch(&guard, 1000).await.unwrap(),
            Guarded::Refused(Refused::TakenOver)
        );
        assert_eq!(guard.lost().await.reason(), LostReason::TakenOver);
        assert_eq!(
            data(&mut con).await,
            (Some("7".into()), vec!["7".into()], Some("active".into()))
        );
    }

    async fn shared_holds_guard_writes_by_their_own_record(backend: Backend) {
        let client = backend.client();
        let long = client.semaphore(LOCK, 2).unwrap().acquire(1).await.unwrap();
        let short = client
            .semaphore_with(LOCK, 2, MutexOptions::new().ttl(Duration::from_millis(300)))
            .unwrap()
            .acquire(1)
            .await
            .unwrap();
        assert!(
            short
                .guarded()
                .set(BALANCE, 1)
                .exec()
                .await
                .unwrap()
                .is_applied()
        );
        // The short permit's deadline passes on the server's clock. Its record stays until a
        // call purges it (the long permit keeps the semaphore's keys alive): the guarded write
        // goes by the deadline, not by the record.
        let mut con = backend.raw().await;
        let exp = "dlock:{acct:7}:sem:exp";
        let deadlines: Vec<(String, u64)> = con.zrange_withscores(exp, 0, -1).await.unwrap();
        let short_deadline = deadlines.iter().map(|(_, d)| *d).min().unwrap();
        eventually(
            Duration::from_secs(5),
            "the deadline passes on the server",
            || {
                let mut con = con.clone();
                async move {
                    let (secs, micros): (u64, u64) =
                        redis::cmd("TIME").query_async(&mut con).await.ok()?;
                    (secs * 1000 + micros / 1000 > short_deadline).then_some(())
                }
            },
        )
        .await;
        let still: Vec<(String, u64)> = con.zrange_withscores(exp, 0, -1).await.unwrap();
        assert_eq!(
            still.len(),
            2,
            "the short permit's record is still there: {still:?}"
        );
        assert_eq!(
            short.guarded().set(BALANCE, 2).exec().await.unwrap(),
            Guarded::Refused(Refused::Lost)
        );
        assert!(
            long.guarded()
                .get(BALANCE)
                .exec()
                .await
                .unwrap()
                .is_applied()
        );
        long.release().await.unwrap();

        // A read-write lock's writer and readers guard by their records the same way.
        let rw = client.rw_lock(LOCK).unwrap();
        let write = rw.write().await.unwrap();
        assert!(
            write
                .guarded()
                .set(BALANCE, 3)
                .exec()
                .await
                .unwrap()
                .is_applied()
        );
        write.release().await.unwrap();
        let read = rw.read().await.unwrap();
        assert!(
            read.guarded()
                .get(BALANCE)
                .exec()
                .await
                .unwrap()
                .is_applied()
        );
        read.release().await.unwrap();
        assert_eq!(data(&mut con).await.0.as_deref(), Some("3"));
    }

    async fn types_are_checked_before_the_first_write_and_run_time_failures_are_per_command(
        backend: Backend,
    ) {
        let client = backend.client();
        let guard = held(&client).await;
        let mut con = backend.raw().await;
        let _: () = con.rpush(PROFILE, "a list").await.unwrap();
        // HSET on a list: refused as a whole, the INCR before it included.
        let err = guard
            .guarded()
            .incr(BALANCE, 1)
            .hset(PROFILE, "status", "x")
            .exec()
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Redis);
        assert!(
            err.to_string().contains(PROFILE) && err.to_string().contains("list"),
            "{err}"
        );
        let balance: Option<String> = con.get(BALANCE).await.unwrap();
        assert_eq!(balance, None);
        // Followed through the batch: deleted first, the key may become a hash.
        let outcome = guard
            .guarded()
            .del(PROFILE)
            .hset(PROFILE, "status", "x")
            .exec()
            .await
            .unwrap();
        assert!(outcome.is_applied());
        // INCR of a string that is not a number fails at run time: its error is its reply,
        // the commands around it ran (as in EXEC).
        let _: () = con.set(BALANCE, "not a number").await.unwrap();
        let outcome = guard
            .guarded()
            .rpush(HISTORY, "before")
            .incr(BALANCE, 1)
            .rpush(HISTORY, "after")
            .exec()
            .await
            .unwrap();
        let replies = outcome.replies().unwrap();
        assert!(
            replies[1]
                .as_ref()
                .is_err_and(|e| e.contains("not an integer")),
            "{replies:?}"
        );
        assert_eq!(
            outcome.reply::<i64>(1).unwrap_err().kind(),
            ErrorKind::Redis
        );
        assert_eq!(data(&mut con).await.1, ["before", "after"]);
    }

    async fn misuse_is_refused_before_anything_is_sent(backend: Backend) {
        let client = backend.client();
        let guard = held(&client).await;
        let refused = |e: dlock_core::Error, needle: &str| {
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
            assert!(e.to_string().contains(needle), "{needle:?} not in: {e}");
        };
        // dlock's own keys: the lock itself would be opened by a DEL.
        refused(
            guard
                .guarded()
                .del("dlock:{acct:7}")
                .exec()
                .await
                .unwrap_err(),
            "dlock:{acct:7}",
        );
        refused(
            guard
                .guarded()
                .cmd("EVAL", BALANCE, "x")
                .exec()
                .await
                .unwrap_err(),
            "EVAL",
        );
        refused(guard.guarded().exec().await.unwrap_err(), "no command");
        // As many arguments as the script can spread (Lua's unpack stops at 8,000), and no more.
        let most: Vec<u32> = (0..7_000).collect();
        let outcome = guard.guarded().rpush(HISTORY, &most).exec().await.unwrap();
        assert_eq!(outcome.reply::<usize>(0).unwrap(), 7_000);
        let too_many: Vec<u32> = (0..7_001).collect();
        refused(
            guard
                .guarded()
                .rpush(HISTORY, &too_many)
                .exec()
                .await
                .unwrap_err(),
            "7001 arguments",
        );
        let fields: Vec<(u32, u32)> = (0..3_501).map(|i| (i, i)).collect();
        refused(
            client
                .fenced_hset("wide:{acct:7}", FencingToken::new(1), &fields)
                .await
                .unwrap_err(),
            "3501 fields",
        );
        let fields = &fields[..3_500];
        assert!(
            client
                .fenced_hset("wide:{acct:7}", FencingToken::new(1), fields)
                .await
                .unwrap()
                .is_written()
        );
        // Keys of another slot: refused on a cluster, where one script reaches one slot.
        let elsewhere = guard
            .guarded()
            .set("balance:acct:8", 1)
            .set(BALANCE, 1)
            .exec()
            .await;
        if backend.is_cluster() {
            let e = elsewhere.unwrap_err();
            refused(e, "`balance:acct:8` is not in the lock's cluster slot");
        } else {
            assert!(elsewhere.unwrap().is_applied());
        }
        // Several locks cannot guard one write.
        let multi = client
            .multi_lock(["acct:7:a", "acct:7:b"])
            .unwrap()
            .acquire()
            .await
            .unwrap();
        refused(
            multi.guarded().set(BALANCE, 1).exec().await.unwrap_err(),
            "MultiGuard",
        );
        multi.release().await.unwrap();
        assert!(guard.release().await.unwrap().was_held());
    }

    async fn a_fenced_set_refuses_a_smaller_token_exactly(backend: Backend) {
        let client = backend.client();
        let mut con = backend.raw().await;
        let (older, newer) = (FencingToken::new(u64::MAX - 1), FencingToken::new(u64::MAX));
        assert_eq!(
            client.fenced_set("report", newer, "new").await.unwrap(),
            Fenced::Written
        );
        // The same token writes again (a retry, or the holder's second write).
        assert!(
            client
                .fenced_set("report", newer, "newer")
                .await
                .unwrap()
                .is_written()
        );
        // One less, past 2^53 where doubles cannot tell them apart: refused.
        assert_eq!(
            client.fenced_set("report", older, "stale").await.unwrap(),
            Fenced::Stale { stored: newer }
        );
        let value: String = con.get("report").await.unwrap();
        assert_eq!(value, "newer");
        let stored: String = con.get("{report}:fence").await.unwrap();
        assert_eq!(stored, u64::MAX.to_string());

        // The hash form: one fence for the record, other fields kept.
        let key = "order:{acct:7}";
        let _: () = con.hset(key, "note", "kept").await.unwrap();
        let first = FencingToken::new(10);
        assert!(
            client
                .fenced_hset(key, first, &[("status", "paid"), ("by", "a")])
                .await
                .unwrap()
                .is_written()
        );
        assert_eq!(
            client
                .fenced_hset(key, FencingToken::new(9), &[("status", "refunded")])
                .await
                .unwrap(),
            Fenced::Stale { stored: first }
        );
        let record: std::collections::BTreeMap<String, String> = con.hgetall(key).await.unwrap();
        assert_eq!(
            record.into_iter().collect::<Vec<_>>(),
            [
                ("by".to_owned(), "a".to_owned()),
                ("note".to_owned(), "kept".to_owned()),
                ("status".to_owned(), "paid".to_owned())
            ]
        );
        // A key of another type is not overwritten.
        let err = client
            .fenced_set(key, FencingToken::new(11), "x")
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Redis, "{err}");
        assert!(err.to_string().contains("holds a hash"), "{err}");
    }
);

backend_tests!(
    /// A holder process paused (SIGSTOP) past its lease, while another process takes the lock
    /// and writes: resumed, its next guarded write is refused, and nothing of it lands after
    /// the new holder's. The worker checks nothing itself (`write guarded=1`).
    async fn a_paused_holders_guarded_write_is_refused_after_it_resumes(backend: Backend) {
        let paused = Worker::spawn(&[
            "write".into(),
            backend.worker_arg(),
            "name=paused".into(),
            "ttl_ms=500".into(),
            "period_ms=200".into(),
            "guarded=1".into(),
        ]);
        let line = paused.line(Duration::from_secs(30));
        let old_fence: u64 = line["acquired ".len()..].parse().unwrap();
        let con = backend.raw().await;
        has_written(&con, "{paused}:writes").await;
        paused.child().stop().unwrap();

        let taker = backend.client().mutex("paused").unwrap();
        let guard = taker
            .acquire_timeout(Duration::from_secs(10))
            .await
            .unwrap();
        let new_fence = guard.fencing_token().await.unwrap().get();
        assert!(new_fence > old_fence);
        assert!(
            guard
                .guarded()
                .rpush("{paused}:writes", "taken")
                .exec()
                .await
                .unwrap()
                .is_applied()
        );

        paused.child().cont().unwrap();
        let verdict = paused.line(Duration::from_secs(10));
        assert_eq!(verdict, "refused TakenOver");
        let mut con = con.clone();
        let writes: Vec<String> = con.lrange("{paused}:writes", 0, -1).await.unwrap();
        let taken = writes.iter().position(|w| w == "taken").unwrap();
        assert!(
            writes[taken + 1..].is_empty(),
            "the paused holder wrote after the lock was taken: {writes:?}"
        );
        assert!(writes[..taken].iter().all(|w| *w == old_fence.to_string()));
        assert!(guard.release().await.unwrap().was_held());
    }
);
