//! Replica acknowledgement (`MutexOptions::durability`): a grant that replicas acknowledged
//! survives the failover that promotes one of them, one that was not is lost; a missed
//! acknowledgement releases the lock and says so (a lock handed to a waiter waits too); the
//! wait never stalls the client's shared connection; concurrent acquires share their waits;
//! `WAITAOF` on a server without the command (`COMMAND INFO`) is refused by name; a cancelled acquire leaves nothing
//! held.
//!
//! Single server with replicas only (`RedisReplicaSet`), not `backend_tests!`: `WAIT` counts
//! the replicas of one server, and dlock refuses durability on a Redis Cluster for now (see
//! `invalid_input.rs`).

use std::time::Duration;

use dlock_core::{Client, Durability, ErrorKind, MutexGuard, MutexOptions, Result};
use dlock_testkit::{RedisReplicaSet, RedisServer};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;

use crate::support::{client, eventually, raw};

/// The live replica (promoted in the survival case) and the lagging one.
const A: usize = 0;
const B: usize = 1;
const LIMIT: Duration = Duration::from_secs(20);

/// A master and replicas A and B, both online as the master sees them: a replica that has
/// just synced counts for `WAIT` only once it acknowledged (about a second later), and before
/// that even a `WAIT` on a connection that wrote nothing would wait for it.
async fn replica_set() -> RedisReplicaSet {
    let set =
        RedisReplicaSet::start(2).unwrap_or_else(|e| panic!("could not start a replica set: {e}"));
    let master = raw(set.master()).await;
    eventually(LIMIT, "both replicas online at the master", || {
        let mut con = master.clone();
        async move {
            let text: String = redis::cmd("INFO")
                .arg("replication")
                .query_async(&mut con)
                .await
                .unwrap();
            let online = text.lines().filter(|l| l.contains("state=online")).count();
            (online == 2).then_some(())
        }
    })
    .await;
    set
}

fn durable(n: u32, timeout: Duration, ttl: Duration) -> MutexOptions {
    MutexOptions::new()
        .ttl(ttl)
        .durability(Durability::Replicas { n, timeout })
}

/// `name:value` of `INFO <section>`.
async fn info(con: &mut MultiplexedConnection, section: &str, name: &str) -> Option<String> {
    let text: String = redis::cmd("INFO")
        .arg(section)
        .query_async(con)
        .await
        .unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .map(|value| value.trim().to_owned())
}

async fn offset(server: &RedisServer, field: &str) -> u64 {
    let mut con = raw(server).await;
    info(&mut con, "replication", field)
        .await
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {field} on 127.0.0.1:{}", server.port()))
}

/// Pauses replica B and makes its lag real: filler is written until B's socket buffers are
/// full and the master keeps B's stream in its own memory (`omem` of B's link), once live
/// replica A has everything (so A's link holds nothing back). From then on, what the master
/// writes is on the master and A only: B does not get it even when it runs again after the
/// master died.
async fn stall_b(set: &RedisReplicaSet) {
    set.pause_replica(B).unwrap();
    let mut master = raw(set.master()).await;
    // 1 MB values; B's socket buffers on loopback hold a few MB.
    let filler = "x".repeat(1 << 20);
    for i in 0..48 {
        let () = master.set(format!("filler:{i}"), &filler).await.unwrap();
        let target = offset(set.master(), "master_repl_offset").await;
        eventually(LIMIT, "replica A has caught up", || async {
            (offset(&set.replicas()[A], "slave_repl_offset").await >= target).then_some(())
        })
        .await;
        let clients: String = redis::cmd("CLIENT")
            .arg("LIST")
            .arg("TYPE")
            .arg("replica")
            .query_async(&mut master)
            .await
            .unwrap();
        // With Redis 7's shared replication buffer, a link's `omem` is what the master keeps
        // from the first block the replica has not been sent in full: caught-up A keeps at
        // most its last block, so a difference of a whole filler value is B's held back.
        let omem: Vec<u64> = clients
            .lines()
            .filter_map(|line| {
                line.split_whitespace()
                    .find_map(|f| f.strip_prefix("omem="))
                    .and_then(|v| v.parse().ok())
            })
            .collect();
        let (least, most) = (omem.iter().min(), omem.iter().max());
        if omem.len() == 2 && most.zip(least).is_some_and(|(m, l)| m - l >= 1 << 20) {
            return;
        }
    }
    panic!("replica B's link never filled up after 48 MB of filler");
}

/// Resolves once a client of `server` is blocked (in `WAIT`).
async fn blocked_in_wait(server: &RedisServer) {
    let con = raw(server).await;
    eventually(LIMIT, "a client blocked in WAIT", || {
        let mut con = con.clone();
        async move {
            let blocked = info(&mut con, "clients", "blocked_clients").await;
            (blocked.as_deref() != Some("0")).then_some(())
        }
    })
    .await;
}

async fn exists(server: &RedisServer, key: &str) -> bool {
    raw(server).await.exists(key).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_acknowledged_grant_survives_the_failover_to_the_replica_that_has_it() {
    // (a) Without acknowledgement: the lagging replica B never got the grant, and once B is
    // promoted another client takes the same lock there at once.
    let mut set = replica_set().await;
    stall_b(&set).await;
    let plain = client(set.master()).mutex("job").unwrap();
    let _held = plain.try_acquire().await.unwrap().expect("free");
    set.kill_master();
    set.resume_replica(B).unwrap();
    set.promote_replica(B).unwrap();
    let other = client(&set.replicas()[B]).mutex("job").unwrap();
    assert!(
        other.try_acquire().await.unwrap().is_some(),
        "an unacknowledged grant should be lost on the lagging replica"
    );
    drop(set);

    // (b) With n = 1, in the same set-up: while A is stopped too, the acquire stays in WAIT
    // (a WAIT on a connection that wrote nothing would count the stopped replicas at once);
    // once A runs and acknowledges, the guard is returned, and A, promoted, has the lock of
    // the same owner.
    let mut set = replica_set().await;
    let c = client(set.master());
    let options = durable(1, Duration::from_secs(10), Duration::from_secs(30));
    // A first durable acquire opens the client's acknowledgement connection while every
    // replica runs: a WAIT that followed no new write of its own on it would now count the
    // replicas that acknowledged this earlier round, and return at once below.
    let warm = c.mutex_with("warm-up", options.clone()).unwrap();
    warm.acquire().await.unwrap().release().await.unwrap();
    stall_b(&set).await;
    set.pause_replica(A).unwrap();
    let lock = c.mutex_with("job", options).unwrap();
    let mut acquiring = tokio::spawn(async move { lock.acquire().await });
    tokio::select! {
        biased;
        done = &mut acquiring => panic!("acknowledged while every replica was stopped: {done:?}"),
        () = blocked_in_wait(set.master()) => {}
    }
    set.resume_replica(A).unwrap();
    let guard = acquiring.await.unwrap().expect("acknowledged by replica A");
    let mut master = raw(set.master()).await;
    let value: String = master.get("dlock:{job}").await.unwrap();
    set.kill_master();
    set.promote_replica(A).unwrap();
    let mut promoted = raw(&set.replicas()[A]).await;
    let kept: Option<String> = promoted.get("dlock:{job}").await.unwrap();
    assert_eq!(kept.as_deref(), Some(value.as_str()), "same owner on A");
    let other = client(&set.replicas()[A]).mutex("job").unwrap();
    assert!(other.try_acquire().await.unwrap().is_none(), "still held");
    drop(guard);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missed_acknowledgement_releases_the_lock_and_says_by_how_much() {
    let set = replica_set().await;
    set.pause_replica(A).unwrap();
    set.pause_replica(B).unwrap();
    let c = client(set.master());
    let lock = c
        .mutex_with(
            "missed",
            durable(1, Duration::from_millis(200), Duration::from_secs(30)),
        )
        .unwrap();
    let err = lock.acquire().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotDurable, "{err}");
    assert!(err.is_not_durable());
    let text = err.to_string();
    assert!(text.contains("0 of the 1 replicas"), "{text}");
    assert!(text.contains("200ms"), "{text}");
    assert!(
        !exists(set.master(), "dlock:{missed}").await,
        "released before the error was returned"
    );
    let err = lock.try_acquire().await.unwrap_err();
    assert!(err.is_not_durable(), "{err}");
    assert!(!exists(set.master(), "dlock:{missed}").await);
    // The name is free for anyone.
    let plain = c.mutex("missed").unwrap();
    assert!(plain.try_acquire().await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_for_replicas_does_not_stall_the_clients_other_locks() {
    let set = replica_set().await;
    set.pause_replica(A).unwrap();
    set.pause_replica(B).unwrap();
    let c = client(set.master());
    let lock = c
        .mutex_with(
            "durable",
            durable(1, Duration::from_secs(20), Duration::from_secs(60)),
        )
        .unwrap();
    let acquiring = tokio::spawn(async move { lock.acquire().await });
    blocked_in_wait(set.master()).await;
    // The client's shared connection (command timeout 2 s) serves other locks meanwhile.
    for i in 0..20 {
        let other = c.mutex(&format!("other:{i}")).unwrap();
        let guard = other.acquire_timeout(Duration::from_secs(5)).await.unwrap();
        guard.release().await.unwrap();
    }
    assert!(
        !acquiring.is_finished(),
        "the durable acquire was still waiting for its replicas"
    );
    set.resume_replica(A).unwrap();
    set.resume_replica(B).unwrap();
    let guard = acquiring.await.unwrap().expect("acknowledged once resumed");
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_durable_acquires_share_their_waits() {
    const TASKS: usize = 50;
    let set = replica_set().await;
    let c = client(set.master());
    let mut master = raw(set.master()).await;
    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut master)
        .await
        .unwrap();
    let tasks: Vec<_> = (0..TASKS)
        .map(|i| {
            let lock = c
                .mutex_with(
                    &format!("many:{i}"),
                    durable(2, Duration::from_secs(5), Duration::from_secs(30)),
                )
                .unwrap();
            tokio::spawn(async move { lock.acquire().await })
        })
        .collect();
    let mut guards: Vec<MutexGuard> = Vec::new();
    for task in tasks {
        let guard: Result<MutexGuard> = task.await.unwrap();
        guards.push(guard.expect("acknowledged by both replicas"));
    }
    let stats = info(&mut master, "commandstats", "cmdstat_wait")
        .await
        .expect("WAIT ran");
    let waits: usize = stats
        .strip_prefix("calls=")
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    println!("{TASKS} concurrent durable acquires on one client: {waits} WAIT calls");
    assert!(
        (1..TASKS).contains(&waits),
        "{waits} WAITs for {TASKS} grants: not coalesced"
    );
    for guard in guards {
        guard.release().await.unwrap();
    }
}

/// `Durability::Aof` on a server without `WAITAOF` (Redis 7.0) is refused before anything is
/// taken; on one with it (Redis 7.2, Valkey) it waits. Which one, the test asks the server the
/// way dlock must (`COMMAND INFO`), never by its version string (Valkey reports 7.2.4 forever).
#[tokio::test]
async fn waitaof_is_refused_by_name_where_the_server_lacks_it() {
    let server = crate::support::redis();
    let mut con = raw(&server).await;
    let described: Vec<redis::Value> = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("WAITAOF")
        .query_async(&mut con)
        .await
        .unwrap();
    let has_waitaof = !matches!(described.as_slice(), [redis::Value::Nil]);
    let c: Client = client(&server);
    let lock = c
        .mutex_with(
            "aof",
            MutexOptions::new().durability(Durability::Aof {
                local: false,
                replicas: 1,
                timeout: Duration::from_millis(100),
            }),
        )
        .unwrap();
    let err = lock.acquire().await.unwrap_err();
    if has_waitaof {
        // The server runs WAITAOF: no replica to fsync it.
        assert_eq!(err.kind(), ErrorKind::NotDurable, "{err}");
    } else {
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
        let text = err.to_string();
        assert!(text.contains("no such command"), "{text}");
        assert!(text.contains("COMMAND INFO WAITAOF"), "{text}");
        assert!(text.contains("Durability::Replicas"), "{text}");
    }
    assert!(!exists(&server, "dlock:{aof}").await, "nothing held");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_acquire_cancelled_in_its_wait_leaves_the_lock_free() {
    let set = replica_set().await;
    set.pause_replica(A).unwrap();
    set.pause_replica(B).unwrap();
    let lock = client(set.master())
        .mutex_with(
            "cancelled",
            durable(1, Duration::from_secs(20), Duration::from_secs(60)),
        )
        .unwrap();
    let acquiring = tokio::spawn(async move { lock.acquire().await });
    blocked_in_wait(set.master()).await;
    assert!(
        exists(set.master(), "dlock:{cancelled}").await,
        "granted, waiting for its acknowledgement"
    );
    acquiring.abort();
    assert!(acquiring.await.unwrap_err().is_cancelled());
    eventually(LIMIT, "the cancelled grant released", || async {
        (!exists(set.master(), "dlock:{cancelled}").await).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_handed_to_a_durable_waiter_waits_for_its_acknowledgement_too() {
    let set = replica_set().await;
    let holder = client(set.master()).mutex("handed").unwrap();
    let held = holder.try_acquire().await.unwrap().expect("free");
    let waiter = client(set.master())
        .mutex_with(
            "handed",
            durable(1, Duration::from_millis(300), Duration::from_secs(30)),
        )
        .unwrap();
    let waiting = tokio::spawn(async move { waiter.acquire().await });
    let master = raw(set.master()).await;
    eventually(LIMIT, "the durable waiter queued", || {
        let mut con = master.clone();
        async move {
            let queued: usize = con.llen("dlock:{handed}:queue").await.unwrap();
            (queued == 1).then_some(())
        }
    })
    .await;
    set.pause_replica(A).unwrap();
    set.pause_replica(B).unwrap();
    // The release hands the lock to the waiter, whose grant is not acknowledged.
    held.release().await.unwrap();
    let err = waiting.await.unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotDurable, "{err}");
    assert!(
        !exists(set.master(), "dlock:{handed}").await,
        "the hand-off was given back"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acknowledgement_connection_closed_while_idle_is_opened_again() {
    let set = replica_set().await;
    let c = client(set.master());
    let lock = c
        .mutex_with(
            "reopened",
            durable(2, Duration::from_secs(5), Duration::from_secs(30)),
        )
        .unwrap();
    lock.acquire().await.unwrap().release().await.unwrap();
    // Every client connection but this one is closed (as the server's idle `timeout` does).
    let mut master = raw(set.master()).await;
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .arg("SKIPME")
        .arg("yes")
        .query_async(&mut master)
        .await
        .unwrap();
    // The shared connection reconnects on its next request; the acknowledgement's one too,
    // without failing the acquire that finds it closed.
    let plain = c.mutex("plain").unwrap();
    eventually(LIMIT, "the shared connection back", || async {
        plain.try_acquire().await.ok().flatten()
    })
    .await
    .release()
    .await
    .unwrap();
    let guard = lock
        .acquire()
        .await
        .expect("acknowledged on a new connection");
    guard.release().await.unwrap();
}
