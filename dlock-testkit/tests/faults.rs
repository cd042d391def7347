//! The faults a lock user injects, each against real servers and processes: a lock's keys
//! removed (`expire_lock`, on a server and routed on a cluster), client connections cut, and a
//! holder process frozen and resumed — also when the test fails while it is frozen.
//!
//! The keys here are written by hand in dlock's layout; `tests/repo/testkit_faults.rs` (workspace)
//! does the same against locks taken by dlock-core itself.

// A panic is how a test fails, helpers included.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use dlock_testkit::{
    ChildGuard, DEFAULT_KEY_PREFIX, RedisCluster, RedisServer, pause_process, redis_cli_binary,
};

/// Polls `condition` every 10 ms until it holds; panics after 10 s, naming `what`.
fn await_condition(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(
            Instant::now() < deadline,
            "still not true after 10 s: {what}"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

fn exists(con: &mut redis::Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query::<i64>(con).unwrap() == 1
}

fn run(con: &mut redis::Connection, args: &[&str]) {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query::<redis::Value>(con).unwrap();
}

#[test]
fn expire_lock_removes_the_holders_of_every_kind_and_keeps_the_queues() {
    assert_eq!(DEFAULT_KEY_PREFIX, "dlock:");
    let server = RedisServer::start().unwrap();
    let mut con = server.connection().unwrap();
    // A mutex with a waiter, a semaphore with a kept limit, a read-write lock: dlock's layout.
    run(&mut con, &["SET", "dlock:{m}", "owner", "PX", "60000"]);
    run(&mut con, &["RPUSH", "dlock:{m}:queue", "waiter"]);
    run(&mut con, &["HSET", "dlock:{s}:sem", "holder", "1"]);
    run(&mut con, &["ZADD", "dlock:{s}:sem:exp", "1", "holder"]);
    run(&mut con, &["SET", "dlock:{s}:sem:limit", "3"]);
    run(&mut con, &["HSET", "dlock:{r}:rw", "reader", "1"]);
    run(&mut con, &["ZADD", "dlock:{r}:rw:exp", "1", "reader"]);
    run(&mut con, &["SET", "other", "data"]);

    assert_eq!(server.expire_lock("m").unwrap(), 1);
    assert_eq!(server.expire_lock("s").unwrap(), 2);
    assert_eq!(server.expire_lock("r").unwrap(), 2);
    for gone in [
        "dlock:{m}",
        "dlock:{s}:sem",
        "dlock:{s}:sem:exp",
        "dlock:{r}:rw",
    ] {
        assert!(!exists(&mut con, gone), "{gone} is still there");
    }
    for kept in ["dlock:{m}:queue", "dlock:{s}:sem:limit", "other"] {
        assert!(exists(&mut con, kept), "{kept} was removed");
    }

    // Nothing left to remove: the test hears that its fault did not land.
    let error = server.expire_lock("m").unwrap_err().to_string();
    assert!(error.contains("no lock named `m`"), "{error}");
    assert!(error.contains("dlock:{m}, dlock:{m}:sem"), "{error}");
}

#[test]
fn expire_lock_with_prefix_reaches_only_that_prefix() {
    let server = RedisServer::start().unwrap();
    let mut con = server.connection().unwrap();
    run(&mut con, &["SET", "billing:{job}", "owner"]);
    run(&mut con, &["SET", "dlock:{job}", "owner"]);

    assert_eq!(
        server.expire_lock_with_prefix("billing:", "job").unwrap(),
        1
    );
    assert!(!exists(&mut con, "billing:{job}"));
    assert!(
        exists(&mut con, "dlock:{job}"),
        "another prefix's lock was removed"
    );
    assert!(server.expire_lock_with_prefix("billing:", "job").is_err());

    // Names dlock refuses can have no keys; they are refused before anything is sent.
    for (prefix, name) in [("dlock:", ""), ("dlock:", "a{b}"), ("pre{", "job")] {
        let error = server
            .expire_lock_with_prefix(prefix, name)
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("expire_lock: "), "{error}");
    }
    assert!(exists(&mut con, "dlock:{job}"));
}

#[test]
fn a_cluster_expires_a_lock_on_the_node_that_serves_it() {
    let cluster = RedisCluster::start().unwrap();
    let client = redis::cluster::ClusterClient::new(cluster.urls()).unwrap();
    let mut con = client.get_connection().unwrap();
    let names: Vec<String> = (0..12).map(|i| format!("job:{i}")).collect();
    for name in &names {
        let () = redis::cmd("SET")
            .arg(format!("dlock:{{{name}}}"))
            .arg("owner")
            .query(&mut con)
            .unwrap();
    }
    // The names are spread over the nodes, so most are not on the node asked first.
    let holding: HashSet<u16> = cluster
        .nodes()
        .iter()
        .filter(|node| {
            let keys: i64 = redis::cmd("DBSIZE")
                .query(&mut node.connection().unwrap())
                .unwrap();
            keys > 0
        })
        .map(RedisServer::port)
        .collect();
    assert!(holding.len() > 1, "every name is on one node: {holding:?}");

    for name in &names {
        assert_eq!(cluster.expire_lock(name).unwrap(), 1, "{name}");
        let left: i64 = redis::cmd("EXISTS")
            .arg(format!("dlock:{{{name}}}"))
            .query(&mut con)
            .unwrap();
        assert_eq!(left, 0, "{name}");
    }
    let error = cluster.expire_lock("job:0").unwrap_err().to_string();
    assert!(error.contains("no lock named `job:0`"), "{error}");
}

/// How many client connections `server` has, besides the one that asks. A client that closed
/// its socket is listed until the server has read the close, hence the waits below.
fn other_clients(server: &RedisServer) -> usize {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut server.connection().unwrap())
        .unwrap();
    list.lines().count() - 1
}

#[test]
fn cut_connections_breaks_every_client_connection_and_keeps_the_data() {
    let server = RedisServer::start().unwrap();
    let mut plain = server.connection().unwrap();
    run(&mut plain, &["SET", "k", "v"]);
    let mut subscriber = server.connection().unwrap();
    let mut pubsub = subscriber.as_pubsub();
    pubsub.subscribe("wake").unwrap();
    pubsub
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    await_condition("2 clients", || other_clients(&server) == 2);

    assert_eq!(server.cut_connections().unwrap(), 2);

    assert!(
        redis::cmd("PING").query::<String>(&mut plain).is_err(),
        "a connection opened before the cut still works"
    );
    // Cut, not idle: the read ends with an error at once rather than at the 5 s timeout.
    let started = Instant::now();
    let error = pubsub.get_message().unwrap_err();
    assert!(!error.is_timeout(), "{error}");
    assert!(started.elapsed() < Duration::from_secs(5), "{error}");

    let mut after = server.connection().unwrap();
    let value: String = redis::cmd("GET").arg("k").query(&mut after).unwrap();
    assert_eq!(value, "v");
    drop(after);
    await_condition("no client", || other_clients(&server) == 0);
    assert_eq!(server.cut_connections().unwrap(), 0, "nothing left to cut");
}

#[test]
fn a_cluster_cuts_the_connections_of_every_node() {
    let cluster = RedisCluster::start().unwrap();
    let mut cons: Vec<_> = cluster
        .nodes()
        .iter()
        .map(|node| node.connection().unwrap())
        .collect();
    for node in cluster.nodes() {
        await_condition("1 client per node", || other_clients(node) == 1);
    }
    assert_eq!(cluster.cut_connections().unwrap(), 3);
    for con in &mut cons {
        assert!(redis::cmd("PING").query::<String>(con).is_err());
    }
    // The cluster bus is not a client connection: the cluster is still whole.
    let info: String = redis::cmd("CLUSTER")
        .arg("INFO")
        .query(&mut cluster.nodes()[0].connection().unwrap())
        .unwrap();
    assert!(info.contains("cluster_state:ok"), "{info}");
}

/// A lease holder as a separate process: `redis-cli` renewing `holder` (a 400 ms lease) every
/// 50 ms until it is killed.
fn holder(server: &RedisServer) -> ChildGuard {
    let mut cmd = Command::new(redis_cli_binary().unwrap());
    cmd.args(["-p", &server.port().to_string(), "-r", "-1", "-i", "0.05"])
        .args(["SET", "holder", "me", "PX", "400"])
        .stdout(Stdio::null());
    ChildGuard::spawn(cmd).unwrap()
}

/// The process's state letter in `/proc/<pid>/stat` (`T`: stopped).
fn state(pid: u32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_name = &stat[stat.rfind(')').unwrap() + 1..];
    after_name.trim_start().chars().next().unwrap()
}

#[test]
fn a_paused_holder_loses_its_lease_and_renews_once_resumed() {
    let server = RedisServer::start().unwrap();
    let mut con = server.connection().unwrap();
    let holder = holder(&server);
    await_condition("the holder holds", || exists(&mut con, "holder"));

    let paused = holder.pause().unwrap();
    assert_eq!(paused.pid(), holder.pid());
    await_condition("the holder is stopped", || state(holder.pid()) == 'T');
    await_condition("the frozen holder's lease ran out", || {
        !exists(&mut con, "holder")
    });

    paused.resume().unwrap();
    await_condition("the holder renews again", || exists(&mut con, "holder"));
    assert_ne!(state(holder.pid()), 'T');
}

#[test]
fn a_test_that_fails_while_a_holder_is_paused_resumes_it() {
    let server = RedisServer::start().unwrap();
    let mut con = server.connection().unwrap();
    let holder = holder(&server);
    await_condition("the holder holds", || exists(&mut con, "holder"));

    let failed = catch_unwind(AssertUnwindSafe(|| {
        let _paused = holder.pause().unwrap();
        await_condition("the holder is stopped", || state(holder.pid()) == 'T');
        panic!("the test fails while the holder is frozen");
    }));
    assert!(failed.is_err());
    await_condition("the holder runs again", || state(holder.pid()) != 'T');
    run(&mut con, &["DEL", "holder"]);
    await_condition("the holder renews again", || exists(&mut con, "holder"));
}

#[test]
fn pause_process_freezes_a_process_the_harness_did_not_spawn() {
    let mut sleeper = Command::new("sleep").arg("60").spawn().unwrap();
    let pid = sleeper.id();
    let paused = pause_process(pid).unwrap();
    assert_eq!(paused.pid(), pid);
    await_condition("the process is stopped", || state(pid) == 'T');
    drop(paused);
    await_condition("the process runs again", || state(pid) != 'T');
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();

    for refused in [0, std::process::id(), u32::MAX] {
        let error = pause_process(refused).unwrap_err().to_string();
        assert!(error.starts_with("pause_process: "), "{refused}: {error}");
    }
}
