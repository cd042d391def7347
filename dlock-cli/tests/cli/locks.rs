//! `dlock locks`: lists the held mutexes, semaphores and read-write locks with their holders —
//! not their queues, the fence counters, keys of other programs or keys outside the prefix —
//! as a table and as JSON; on a standalone server and on every master of a cluster.

use std::time::Duration;

use dlock_core::{Client, MutexOptions};
use dlock_testkit::RedisCluster;
use redis::AsyncCommands;

use crate::support::{client, dlock, eventually, me, redis};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_every_kind_with_its_holder_and_nothing_else() {
    let server = redis();
    let url = server.url();
    let holder = client(&url);
    let other = client(&url);
    let options = MutexOptions::new()
        .ttl(Duration::from_secs(60))
        .label("pay handler");
    let order = holder.mutex_with("order:42", options).unwrap();
    let guard = order.try_acquire().await.unwrap().unwrap();
    let fence = guard.fencing_token().await.unwrap().get();
    // A waiter: the lock gets a queue key, which is not a lock.
    let waiting = other.mutex("order:42").unwrap();
    let waiter =
        tokio::spawn(async move { waiting.acquire_timeout(Duration::from_secs(60)).await });
    let permits = holder
        .semaphore("exports", 5)
        .unwrap()
        .try_acquire(2)
        .await
        .unwrap()
        .unwrap();
    let read = holder
        .rw_lock("prices")
        .unwrap()
        .try_read()
        .await
        .unwrap()
        .unwrap();
    // Not dlock's: a key shaped like a lock key under the prefix, and keys outside it.
    let mut raw = redis::Client::open(url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let _: () = raw.set("dlock:{not-a-lock}", "hello").await.unwrap();
    let _: () = raw.set("app:{order:42}", "x").await.unwrap();
    let _: () = raw.set("visits", 1).await.unwrap();
    eventually(Duration::from_secs(10), "the waiter is queued", || async {
        let info = holder.inspect("order:42").await.unwrap()?;
        (info.waiters == 1).then_some(())
    })
    .await;

    let run = dlock(&["--url", &url, "locks", "--json"]).await.expect(0);
    let doc = run.json();
    let (host, pid) = me();
    let locks = doc["locks"].as_array().unwrap();
    let names: Vec<&str> = locks.iter().map(|l| l["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["exports", "order:42", "prices"], "{doc:#}");
    let mutex = &locks[1];
    assert_eq!(mutex["kind"], "mutex");
    assert_eq!(mutex["waiters"], 1);
    assert_eq!(mutex["since"], serde_json::Value::Null);
    let h = &mutex["holders"][0];
    assert_eq!(h["host"], host.as_str());
    assert_eq!(h["pid"], pid);
    assert_eq!(h["label"], "pay handler");
    assert_eq!(h["mode"], "exclusive");
    assert_eq!(h["fencing_token"], fence);
    let ttl = h["ttl_ms"].as_u64().unwrap();
    assert!(ttl > 0 && ttl <= 60_000, "{ttl}");
    let sem = &locks[0];
    assert_eq!(
        (sem["kind"].as_str(), sem["limit"].as_u64()),
        (Some("semaphore"), Some(5))
    );
    assert_eq!(sem["holders"][0]["permits"], 2);
    assert_eq!(sem["holders"][0]["pid"], pid);
    let rw = &locks[2];
    assert_eq!(rw["kind"], "rw_lock");
    assert_eq!(rw["holders"][0]["mode"], "read");
    assert_eq!(
        doc["foreign_keys"],
        serde_json::json!(["dlock:{not-a-lock}"])
    );

    // The table: one row per holder, the foreign key left out with a note.
    let run = dlock(&["--url", &url, "locks"]).await.expect(0);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{}", run.stdout);
    assert!(lines[0].starts_with("NAME"), "{}", run.stdout);
    let row = lines.iter().find(|l| l.starts_with("order:42")).unwrap();
    for cell in [
        "mutex",
        host.as_str(),
        &pid.to_string(),
        "pay handler",
        "not recorded",
        &fence.to_string(),
    ] {
        assert!(row.contains(cell), "{cell:?} missing from {row:?}");
    }
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("exports") && l.contains("semaphore 2/5"))
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("prices") && l.contains("rw-lock read"))
    );
    assert!(!run.stdout.contains("not-a-lock") && !run.stdout.contains("queue"));
    assert!(run.stderr.contains("dlock:{not-a-lock}"), "{}", run.stderr);

    // A pattern narrows the list; a pattern that matches nothing exits 3.
    let run = dlock(&["--url", &url, "locks", "order:*", "--json"])
        .await
        .expect(0);
    assert_eq!(run.json()["locks"].as_array().unwrap().len(), 1);
    let run = dlock(&["--url", &url, "locks", "nothing:*"])
        .await
        .expect(3);
    assert!(run.stdout.is_empty(), "{run:?}");
    assert!(
        run.stderr.contains("no lock matching `nothing:*`"),
        "{run:?}"
    );
    // Another prefix is another set of locks.
    dlock(&["--url", &url, "--prefix", "app:", "locks"])
        .await
        .expect(3);

    drop((permits, read));
    guard.release().await.unwrap();
    waiter.await.unwrap().unwrap().release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_the_locks_of_every_master_of_a_cluster() {
    let cluster = RedisCluster::start().unwrap_or_else(|e| panic!("cluster: {e}"));
    let urls = cluster.urls();
    let holder = Client::cluster_builder(urls.iter().map(String::as_str))
        .build()
        .unwrap();
    let mut guards = Vec::new();
    for i in 0..24 {
        let lock = holder.mutex(&format!("shard-{i}")).unwrap();
        guards.push(lock.try_acquire().await.unwrap().unwrap());
    }
    // The locks are spread over every master.
    for node in cluster.nodes() {
        let mut con = node.connection().unwrap();
        let keys: u64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
        assert!(keys > 0, "a master without locks: spread them wider");
    }
    // Detected from one node's URL, or told with --cluster and several seeds.
    let detected = dlock(&["--url", &urls[0], "locks", "--json"])
        .await
        .expect(0);
    let seeds = dlock(&[
        "--cluster",
        "--url",
        &urls[1],
        "--url",
        &urls[2],
        "locks",
        "--json",
    ])
    .await
    .expect(0);
    for run in [detected, seeds] {
        let doc = run.json();
        let mut names: Vec<&str> = doc["locks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["name"].as_str().unwrap())
            .collect();
        names.sort_unstable();
        let mut expected: Vec<String> = (0..24).map(|i| format!("shard-{i}")).collect();
        expected.sort_unstable();
        assert_eq!(names, expected, "{doc:#}");
        assert_eq!(doc["locks"][0]["holders"][0]["pid"], std::process::id());
    }
    for guard in guards {
        guard.release().await.unwrap();
    }
}
