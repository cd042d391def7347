//! Tests of [`RedisReplicaSet`] and [`RedisSentinels`], against real `redis-server` processes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use dlock_testkit::{RedisReplicaSet, RedisSentinels, RedisServer, ServerOptions};

fn write(server: &RedisServer, key: &str, value: &str) {
    let mut con = server.connection().unwrap();
    let () = redis::cmd("SET")
        .arg(key)
        .arg(value)
        .query(&mut con)
        .unwrap();
}

fn get(server: &RedisServer, key: &str) -> Option<String> {
    let mut con = server.connection().unwrap();
    redis::cmd("GET").arg(key).query(&mut con).unwrap()
}

fn role(server: &RedisServer) -> String {
    let mut con = server.connection().unwrap();
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query(&mut con)
        .unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix("role:"))
        .unwrap_or("?")
        .trim()
        .to_owned()
}

#[test]
fn a_replica_set_replicates_a_write() {
    let set = RedisReplicaSet::start(1).unwrap();
    assert_eq!(role(set.master()), "master");
    assert_eq!(role(&set.replicas()[0]), "slave");

    let mut con = set.master().connection().unwrap();
    let () = redis::cmd("SET").arg("k").arg("v").query(&mut con).unwrap();
    // WAIT on the connection that wrote: it counts that connection's writes.
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(1000).query(&mut con).unwrap();
    assert_eq!(acked, 1);
    assert_eq!(get(&set.replicas()[0], "k").as_deref(), Some("v"));
    assert!(set.replication_offset(0).unwrap() >= set.master_offset().unwrap());
}

#[test]
fn a_paused_replica_acknowledges_nothing_until_resumed() {
    let set = RedisReplicaSet::start(1).unwrap();
    set.pause_replica(0).unwrap();

    let mut con = set.master().connection().unwrap();
    let () = redis::cmd("SET").arg("k").arg("v").query(&mut con).unwrap();
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(200).query(&mut con).unwrap();
    assert_eq!(acked, 0);

    set.resume_replica(0).unwrap();
    set.wait_synced().unwrap();
    assert_eq!(get(&set.replicas()[0], "k").as_deref(), Some("v"));
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(1000).query(&mut con).unwrap();
    assert_eq!(acked, 1);
}

#[test]
fn a_replica_promoted_by_hand_takes_writes() {
    let mut set = RedisReplicaSet::start(1).unwrap();
    set.kill_master();
    assert!(set.master().connection().is_err());
    set.promote_replica(0).unwrap();
    assert_eq!(role(&set.replicas()[0]), "master");
    write(&set.replicas()[0], "after", "failover");
    assert_eq!(
        get(&set.replicas()[0], "after").as_deref(),
        Some("failover")
    );
    assert!(set.promote_replica(5).is_err());
}

#[test]
fn replicas_of_a_password_protected_master_authenticate() {
    let options = ServerOptions::new().arg("requirepass", "s3cret");
    let set = RedisReplicaSet::start_with(1, options).unwrap();
    write(set.master(), "k", "v");
    set.wait_synced().unwrap();
    assert_eq!(get(&set.replicas()[0], "k").as_deref(), Some("v"));
}

#[test]
fn a_replica_set_needs_a_replica() {
    let error = RedisReplicaSet::start(0).unwrap_err();
    assert!(error.message().contains("at least one replica"));
}

#[test]
fn sentinels_promote_a_replica_when_the_master_dies() {
    let mut set = RedisReplicaSet::start(2).unwrap();
    let sentinels = RedisSentinels::start(&set).unwrap();
    let old = set.master().port();
    for index in 0..3 {
        assert_eq!(
            sentinels.master_addr(index).unwrap(),
            ("127.0.0.1".to_owned(), old)
        );
    }
    write(set.master(), "k", "before");
    set.wait_synced().unwrap();

    set.kill_master();
    let new = sentinels.wait_failover(old).unwrap();
    let promoted = set.replica_index(new).expect("a replica was promoted");
    for index in 0..3 {
        assert_eq!(
            sentinels.master_addr(index).unwrap(),
            ("127.0.0.1".to_owned(), new)
        );
    }
    let new_master = &set.replicas()[promoted];
    assert_eq!(role(new_master), "master");
    assert_eq!(get(new_master, "k").as_deref(), Some("before"));
    assert!((0..3).any(|index| sentinels.log(index).contains("+switch-master")));
}
