//! Fencing tokens strictly increase per lock name: across acquire/release cycles, expiries,
//! clients, and a Redis restart that lost every key.

use std::time::Duration;

use dlock_core::{FencingToken, MutexOptions};
use redis::AsyncCommands;

use crate::support::{Backend, acquired_within, backend_tests, eventually};

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
        let after = acquired_within(&fresh, Duration::from_secs(10), "acquire after restart").await;
        assert!(
            after.fencing_token().await.unwrap() > old,
            "a counter reset must not issue a smaller token ({} after {})",
            after.fencing_token().await.unwrap(),
            old
        );
    }

    /// Every path issues its fence from the counter of the lock's slot — the acquisition's own
    /// round trip (`fenced`), on demand, a hand-off — so one name's fences increase whichever
    /// path issued them. The counter does not expire, and a counter lost on its own (evicted,
    /// deleted) is raised to the server clock on every path.
    async fn every_path_takes_its_fence_from_the_slot_counter(backend: Backend) {
        let mut con = backend.raw().await;
        let counter = dlock_core::ext::fence_counter_key("dlock:", "slot").unwrap();
        let (a, b) = (backend.client(), backend.client());
        let fenced = a.mutex_with("slot", MutexOptions::new().fenced()).unwrap();
        let plain = a.mutex("slot").unwrap();
        let waiting = b.mutex("slot").unwrap();
        let mut seen: Vec<u64> = Vec::new();

        for lost in [false, true] {
            // The acquisition's own round trip (the first ever also creates the counter).
            for _ in 0..3 {
                if lost {
                    let _: usize = con.del(&counter).await.unwrap();
                }
                let guard = fenced.try_acquire().await.unwrap().expect("free");
                let fence = guard
                    .issued_fencing_token()
                    .expect("issued with the lock")
                    .get();
                if !lost {
                    let last: u64 = con.get(&counter).await.unwrap();
                    assert_eq!(fence, last, "the counter holds the last fence issued");
                }
                seen.push(fence);
                guard.release().await.unwrap();
            }
            // On demand.
            if lost {
                let _: usize = con.del(&counter).await.unwrap();
            }
            let guard = plain.try_acquire().await.unwrap().expect("free");
            seen.push(guard.fencing_token().await.unwrap().get());
            // A hand-off to a waiter.
            let handed = tokio::spawn({
                let waiting = waiting.clone();
                async move {
                    let guard = waiting.acquire_timeout(Duration::from_secs(10)).await?;
                    let fence = guard.issued_fencing_token().expect("a hand-off carries it");
                    guard.release().await?;
                    Ok::<_, dlock_core::Error>(fence.get())
                }
            });
            eventually(Duration::from_secs(5), "waiter queued", || {
                let mut con = con.clone();
                async move {
                    (con.llen::<_, i64>("dlock:{slot}:queue").await.ok()? > 0).then_some(())
                }
            })
            .await;
            if lost {
                let _: usize = con.del(&counter).await.unwrap();
            }
            guard.release().await.unwrap();
            seen.push(handed.await.unwrap().unwrap());
        }
        assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
        let pttl: i64 = con.pttl(&counter).await.unwrap();
        assert_eq!(pttl, -1, "the slot's counter does not expire");
    }
);

/// A crash that loses the latest writes, with the server back at once from an older snapshot,
/// must not let the fenced fast path hand out a fence issued before the crash. Its plain `INCR`
/// is taken only on a connection on which the slot's counter was floored at the server clock
/// (dlock-core's `fence_epoch.rs`); the reconnected client floors it anew. Until 0.x's
/// session 26 an `INCR` within 500 ms of `TIME` was taken on any connection, and a restart this
/// fast handed the lost fences out again.
#[tokio::test]
async fn a_fast_restart_from_an_older_snapshot_never_repeats_a_fence() {
    let mut server = dlock_testkit::RedisServer::start().unwrap();
    let client = dlock_core::Client::builder(server.url()).build().unwrap();
    let other = dlock_core::Client::builder(server.url()).build().unwrap();
    let lock = client
        .mutex_with("snapshot", MutexOptions::new().fenced())
        .unwrap();
    let fence_of = |guard: &dlock_core::MutexGuard| {
        guard
            .issued_fencing_token()
            .expect("fenced: issued with the lock")
            .get()
    };
    // The first acquires floor the slot's counter on this connection; the later ones take a
    // plain INCR there.
    let mut seen = Vec::new();
    for _ in 0..3 {
        let guard = lock.try_acquire().await.unwrap().expect("free");
        seen.push(fence_of(&guard));
        guard.release().await.unwrap();
    }
    let mut con = server.connection().unwrap();
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    for _ in 0..5 {
        let guard = lock.try_acquire().await.unwrap().expect("free");
        seen.push(fence_of(&guard));
        guard.release().await.unwrap();
    }
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    let highest = *seen.last().unwrap();

    server.crash_and_recover().unwrap();
    let counter = dlock_core::ext::fence_counter_key("dlock:", "snapshot").unwrap();
    let restored: u64 = redis::cmd("GET")
        .arg(&counter)
        .query(&mut server.connection().unwrap())
        .unwrap();
    assert!(
        restored < highest,
        "the snapshot holds an older counter ({restored}, last fence {highest})"
    );

    // The same client (its connection reconnects) and a client that never saw the old server.
    for (who, lock) in [
        ("the reconnected client", &lock),
        (
            "another client",
            &other
                .mutex_with("snapshot", MutexOptions::new().fenced())
                .unwrap(),
        ),
    ] {
        let mut last = highest;
        for _ in 0..3 {
            let guard =
                acquired_within(lock, Duration::from_secs(10), "acquire after the crash").await;
            let fence = fence_of(&guard);
            assert!(
                fence > last,
                "{who} was given fence {fence} after {last} (highest before the crash: {highest})"
            );
            last = fence;
            guard.release().await.unwrap();
        }
    }
}

/// The fenced fast path floors a slot's counter once per connection (`fence.lua`, which reads
/// `TIME`) and takes plain `INCR`s on that connection afterwards; a new connection (here the
/// old one killed server-side, as a restart or a failover would) floors it again first. Counted
/// by the server's `TIME` calls: the plain path sends none.
#[tokio::test]
async fn a_slot_is_floored_once_per_connection() {
    let server = dlock_testkit::RedisServer::start().unwrap();
    let client = dlock_core::Client::builder(server.url()).build().unwrap();
    let lock = client
        .mutex_with("per-connection", MutexOptions::new().fenced())
        .unwrap();
    let mut con = server.connection().unwrap();
    let time_calls = |con: &mut redis::Connection| -> u64 {
        let info: String = redis::cmd("INFO").arg("commandstats").query(con).unwrap();
        info.lines()
            .find_map(|line| line.strip_prefix("cmdstat_time:calls="))
            .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
    };
    let mut last = 0;
    let mut take = async |lock: &dlock_core::Mutex| {
        let guard = lock.try_acquire().await.unwrap().expect("free");
        let fence = guard.issued_fencing_token().expect("fenced").get();
        assert!(fence > last, "fence {fence} after {last}");
        last = fence;
        guard.release().await.unwrap();
    };
    for round in ["a new client", "a reconnected client"] {
        let before = time_calls(&mut con);
        // The first acquires see the new connection, name it and floor the slot by script
        // (at most one each).
        for _ in 0..3 {
            take(&lock).await;
        }
        let floored = time_calls(&mut con);
        assert!(
            (before + 1..=before + 3).contains(&floored),
            "{round}: {} script floors for 3 acquires",
            floored - before
        );
        for _ in 0..20 {
            take(&lock).await;
        }
        assert_eq!(
            time_calls(&mut con),
            floored,
            "{round}: a floored slot went on to the script again"
        );
        let killed: u64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("normal")
            .arg("SKIPME")
            .arg("yes")
            .query(&mut con)
            .unwrap();
        assert!(killed >= 1);
        // The client reconnects on its next request (which may fail with the old socket).
        eventually(Duration::from_secs(10), "reconnected", || async {
            client.mutex("ping").unwrap().try_acquire().await.ok()
        })
        .await;
    }
}

/// The server's command counts (`INFO commandstats`), by command name.
fn command_calls(con: &mut redis::Connection) -> std::collections::BTreeMap<String, u64> {
    let info: String = redis::cmd("INFO").arg("commandstats").query(con).unwrap();
    info.lines()
        .filter_map(|line| {
            let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = stats
                .strip_prefix("calls=")?
                .split(',')
                .next()?
                .parse()
                .ok()?;
            Some((name.to_owned(), calls))
        })
        .collect()
}

/// A warm fenced acquire (its slot floored on this connection) is one `MULTI` of `SET`, `INCR`
/// and `CLIENT GETNAME` (the `EXISTS` of the queue went with issue #35: callers who wait keep
/// the lock key, so the `SET` fails), and no fence depends on a key other than the slot's
/// counter. Until issue 27 the `MULTI` also read dlock 0.1's per-name counter (`GET
/// <lock>:fence`), and every fence was raised above a number found there.
#[tokio::test]
async fn a_warm_fenced_acquire_is_five_commands_and_reads_no_other_key() {
    let server = dlock_testkit::RedisServer::start().unwrap();
    let client = dlock_core::Client::builder(server.url()).build().unwrap();
    let fenced = client
        .mutex_with("warm", MutexOptions::new().fenced())
        .unwrap();
    let mut con = server.connection().unwrap();
    // Another program's key at the name dlock 0.1 used, far ahead of the clock.
    let other: u64 = 9_000_000_000_000_000_000;
    let () = redis::Commands::set(&mut con, "dlock:{warm}:fence", other).unwrap();
    // Warm: the first acquires name the connection and floor the slot (see
    // a_slot_is_floored_once_per_connection).
    for _ in 0..3 {
        let guard = fenced.try_acquire().await.unwrap().expect("free");
        let fence = guard.issued_fencing_token().expect("fenced").get();
        assert!(fence < other, "fence {fence} raised above another key");
        guard.release().await.unwrap();
    }
    let guard = client.mutex("warm").unwrap().try_acquire().await.unwrap();
    let guard = guard.expect("free");
    let fence = guard.fencing_token().await.unwrap().get();
    assert!(
        fence < other,
        "fence {fence} on demand raised above another key"
    );
    guard.release().await.unwrap();

    let before = command_calls(&mut con);
    let guard = fenced.try_acquire().await.unwrap().expect("free");
    let after = command_calls(&mut con);
    assert!(guard.issued_fencing_token().expect("fenced").get() < other);
    guard.release().await.unwrap();
    let sent: std::collections::BTreeMap<&str, u64> = after
        .iter()
        .filter(|(name, _)| name.as_str() != "info")
        .map(|(name, calls)| {
            (
                name.as_str(),
                calls - before.get(name).copied().unwrap_or(0),
            )
        })
        .filter(|(_, calls)| *calls > 0)
        .collect();
    let expected = [
        ("client|getname", 1),
        ("exec", 1),
        ("incr", 1),
        ("multi", 1),
        ("set", 1),
    ];
    assert_eq!(
        sent,
        expected.into_iter().collect(),
        "one warm fenced acquire"
    );
}
