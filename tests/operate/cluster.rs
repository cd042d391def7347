//! What only a Redis Cluster has. Every behaviour test runs on both backends (see
//! `support::backend_tests!`); here: every key of a lock shares one slot while different locks
//! spread over the masters, and wake-ups travel by sharded pub/sub (`SSUBSCRIBE` / `SPUBLISH`)
//! on the node that serves the lock's slot, nowhere else.

use std::collections::HashSet;
use std::time::Duration;

use dlock_core::{MutexOptions, ReleaseOutcome};
use dlock_testkit::RedisServer;
use redis::AsyncCommands;

use crate::support::{Backend, eventually};

/// The slot of `key`, as the server computes it.
fn keyslot(server: &RedisServer, key: &str) -> u16 {
    let mut con = server.connection().unwrap();
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(&mut con)
        .unwrap()
}

/// `PUBSUB <kind> <pattern>` on `server` alone.
fn channels(server: &RedisServer, kind: &str, pattern: &str) -> Vec<String> {
    let mut con = server.connection().unwrap();
    redis::cmd("PUBSUB")
        .arg(kind)
        .arg(pattern)
        .query(&mut con)
        .unwrap()
}

/// How many times `server` ran `command` (scripts' calls included), from `INFO commandstats`.
fn calls(server: &RedisServer, command: &str) -> u64 {
    let mut con = server.connection().unwrap();
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut con)
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:calls=")))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_run_on_a_cluster_with_one_slot_per_lock() {
    let backend = Backend::cluster();
    let node = &backend.servers()[0];
    let c = backend.client();
    let mut con = backend.raw().await;
    let mut slots = HashSet::new();
    let mut masters = HashSet::new();
    let mut fences = Vec::new();
    for i in 0..30 {
        let name = format!("order:{i}");
        let lock = c.mutex(&name).unwrap();
        let mut guard = lock.try_acquire().await.unwrap().expect("free");
        let key = format!("dlock:{{{name}}}");
        let slot = keyslot(node, &key);
        for suffix in [":queue", ":wake:someclient"] {
            assert_eq!(keyslot(node, &format!("{key}{suffix}")), slot);
        }
        // The fence counter shared by the slot's locks is in the slot too (by Redis's hash).
        let counter = dlock_core::ext::fence_counter_key("dlock:", &name).unwrap();
        assert_eq!(keyslot(node, &counter), slot, "{counter}");
        slots.insert(slot);
        masters.insert(backend.server_of(&key).port());
        let exists: bool = con.exists(&key).await.unwrap();
        assert!(exists);
        guard.extend(Duration::from_secs(5)).await.unwrap();
        fences.push(guard.fencing_token().await.unwrap());
        assert_eq!(guard.release().await.unwrap(), ReleaseOutcome::Released);
    }
    // 30 names land on many slots, and on every master of a 3-master cluster.
    assert!(slots.len() > 20, "{} distinct slots", slots.len());
    assert_eq!(masters.len(), 3, "locks on masters {masters:?}");
    let info = c.inspect("order:0").await.unwrap();
    assert!(info.is_none());
    assert!(fences.iter().all(|f| f.get() > 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_off_uses_sharded_pub_sub_on_the_node_of_the_slot() {
    let backend = Backend::cluster();
    let key = "dlock:{shard}";
    let owner = backend.server_of(key).port();
    let holder = backend.client();
    let guard = holder
        .mutex_with("shard", MutexOptions::new().ttl(Duration::from_secs(30)))
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .expect("free");
    let waiter = backend.client().mutex("shard").unwrap();
    // Its wait (20 s) ends before the holder's lease (30 s) would: only a wake-up can serve it.
    let waiting =
        tokio::spawn(async move { waiter.acquire_timeout(Duration::from_secs(20)).await });
    let con = backend.raw().await;
    eventually(Duration::from_secs(10), "waiter queued", || {
        let mut con = con.clone();
        async move {
            let n: usize = con.llen("dlock:{shard}:queue").await.ok()?;
            (n == 1).then_some(())
        }
    })
    .await;
    // The waiter listens on a shard channel of the node of the lock's slot, and only there.
    for server in backend.servers() {
        let sharded = channels(server, "SHARDCHANNELS", "dlock:{shard}:wake:*");
        let want = usize::from(server.port() == owner);
        assert_eq!(sharded.len(), want, "node {}: {sharded:?}", server.port());
        let global = channels(server, "CHANNELS", "dlock:*");
        assert!(global.is_empty(), "node {}: {global:?}", server.port());
    }
    guard.release().await.unwrap();
    let acquired = waiting.await.unwrap().expect("handed off");
    acquired.release().await.unwrap();
    // The release told it with SPUBLISH (from the script, on the slot's node), never PUBLISH,
    // which a cluster would broadcast to every node.
    for server in backend.servers() {
        let spublish = calls(server, "spublish");
        assert_eq!(
            spublish > 0,
            server.port() == owner,
            "node {}: {spublish} SPUBLISH",
            server.port()
        );
        assert_eq!(calls(server, "publish"), 0, "node {}", server.port());
    }
}
