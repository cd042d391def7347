//! The same scripts on a real 3-master Redis Cluster: every key of a lock shares one slot,
//! different locks spread over the masters, and acquire / release / hand-off (sharded pub/sub) /
//! watchdog / fencing behave as on a single server.

use std::collections::HashSet;
use std::time::Duration;

use dlock_core::{Client, LostReason, MutexOptions, ReleaseOutcome};
use dlock_testkit::RedisCluster;
use redis::AsyncCommands;

use crate::support::eventually;

fn cluster() -> RedisCluster {
    RedisCluster::start().unwrap_or_else(|e| panic!("could not start a cluster: {e}"))
}

fn client(cluster: &RedisCluster) -> Client {
    Client::cluster_builder(cluster.urls())
        .command_timeout(Duration::from_secs(2))
        .build()
        .unwrap()
}

async fn raw(cluster: &RedisCluster) -> redis::cluster_async::ClusterConnection {
    redis::cluster::ClusterClient::new(cluster.urls())
        .unwrap()
        .get_async_connection()
        .await
        .unwrap()
}

/// The slot of `key`, as the server computes it.
fn keyslot(cluster: &RedisCluster, key: &str) -> u16 {
    let mut con = cluster.nodes()[0].connection().unwrap();
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(&mut con)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_run_on_a_cluster_with_one_slot_per_lock() {
    let cluster = cluster();
    let c = client(&cluster);
    let mut con = raw(&cluster).await;
    let mut slots = HashSet::new();
    let mut fences = Vec::new();
    for i in 0..30 {
        let name = format!("order:{i}");
        let lock = c.mutex(&name).unwrap();
        let mut guard = lock.try_acquire().await.unwrap().expect("free");
        let slot = keyslot(&cluster, &format!("dlock:{{{name}}}"));
        for suffix in [":fence", ":queue", ":wake:someclient"] {
            assert_eq!(
                keyslot(&cluster, &format!("dlock:{{{name}}}{suffix}")),
                slot
            );
        }
        slots.insert(slot);
        let exists: bool = con.exists(format!("dlock:{{{name}}}")).await.unwrap();
        assert!(exists);
        guard.extend(Duration::from_secs(5)).await.unwrap();
        fences.push(guard.fencing_token().await.unwrap());
        assert_eq!(guard.release().await.unwrap(), ReleaseOutcome::Released);
    }
    // 30 names land on many slots, hence on every master of a 3-master cluster.
    assert!(slots.len() > 20, "{} distinct slots", slots.len());
    let info = c.inspect("order:0").await.unwrap();
    assert!(info.is_none());
    assert!(fences.iter().all(|f| f.get() > 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_off_uses_sharded_pub_sub() {
    let cluster = cluster();
    let holder = client(&cluster);
    let guard = holder
        .mutex_with("shard", MutexOptions::new().ttl(Duration::from_secs(30)))
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .expect("free");
    let waiter = client(&cluster).mutex("shard").unwrap();
    // Its wait (20 s) ends before the holder's lease (30 s) would: only SPUBLISH can serve it.
    let waiting =
        tokio::spawn(async move { waiter.acquire_timeout(Duration::from_secs(20)).await });
    let con = raw(&cluster).await;
    eventually(Duration::from_secs(10), "waiter queued", || {
        let mut con = con.clone();
        async move {
            let n: usize = con.llen("dlock:{shard}:queue").await.ok()?;
            (n == 1).then_some(())
        }
    })
    .await;
    guard.release().await.unwrap();
    let acquired = waiting.await.unwrap().expect("handed off");
    acquired.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_renews_locks_in_many_slots_and_reports_loss() {
    let cluster = cluster();
    let c = client(&cluster);
    let options = MutexOptions::new()
        .ttl(Duration::from_millis(600))
        .watchdog();
    let mut guards = Vec::new();
    for i in 0..12 {
        let lock = c.mutex_with(&format!("wd:{i}"), options.clone()).unwrap();
        guards.push(lock.try_acquire().await.unwrap().expect("free"));
    }
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    for guard in &guards {
        assert!(
            guard.lease().is_held(),
            "renewed past its 600 ms lease: {guard:?}"
        );
    }
    let mut con = raw(&cluster).await;
    let _: usize = con.del("dlock:{wd:3}").await.unwrap();
    let lost = tokio::time::timeout(Duration::from_secs(3), guards[3].lost())
        .await
        .expect("loss noticed");
    assert_eq!(lost.reason(), LostReason::Removed);
    for guard in guards {
        guard.release().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lock_goes_to_the_oldest_waiter_not_a_newcomer() {
    let cluster = cluster();
    let short = MutexOptions::new().ttl(Duration::from_millis(500));
    let holder = client(&cluster).mutex_with("fifo-c", short).unwrap();
    // A holder that vanishes without releasing: only the lease frees the lock.
    std::mem::forget(holder.try_acquire().await.unwrap().expect("free"));
    let waiter = client(&cluster).mutex("fifo-c").unwrap();
    let waiting =
        tokio::spawn(async move { waiter.acquire_timeout(Duration::from_secs(20)).await });
    let con = raw(&cluster).await;
    eventually(Duration::from_secs(10), "waiter queued", || {
        let mut con = con.clone();
        async move {
            let n: usize = con.llen("dlock:{fifo-c}:queue").await.ok()?;
            (n == 1).then_some(())
        }
    })
    .await;
    // The newcomer's attempt that finds the key gone hands it to the waiter (SPUBLISH from
    // the acquire script) and is told "busy".
    let newcomer = client(&cluster).mutex("fifo-c").unwrap();
    while !waiting.is_finished() {
        if let Some(guard) = newcomer.try_acquire().await.unwrap() {
            panic!("a newcomer overtook the queue: {guard:?}");
        }
    }
    let guard = waiting.await.unwrap().expect("the waiter got the lock");
    assert_eq!(guard.release().await.unwrap(), ReleaseOutcome::Released);
}
