//! Tests of the harness itself, against real `redis-server` processes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;
use std::io::ErrorKind;
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::thread;
use std::time::Duration;

use dlock_testkit::{ChildGuard, RedisCluster, RedisNodes, RedisServer, ServerOptions};
use redis::Value;

/// PING on a new connection; panics with the harness's full report on failure.
fn ping(server: &RedisServer) -> String {
    let mut con = server.connection().unwrap();
    redis::cmd("PING").query(&mut con).unwrap()
}

fn refuses_connections(port: u16) -> bool {
    matches!(
        TcpStream::connect(("127.0.0.1", port)),
        Err(e) if e.kind() == ErrorKind::ConnectionRefused
    )
}

#[test]
fn server_starts_and_answers_ping() {
    let server = RedisServer::start().unwrap();
    assert_eq!(ping(&server), "PONG");
    assert_eq!(
        server.url(),
        format!("redis://127.0.0.1:{}/", server.port())
    );
    assert!(server.pid().is_some());
    assert!(server.dir().is_dir());
    assert!(server.log().contains("Ready to accept connections"));
}

#[test]
fn killed_server_refuses_connections() {
    let mut server = RedisServer::start().unwrap();
    server.kill();
    assert_eq!(server.pid(), None);
    assert!(server.connection().is_err());
    assert!(refuses_connections(server.port()));
    server.kill(); // idempotent
    assert!(server.pause().is_err());
}

#[test]
fn restart_keeps_the_port_and_loses_the_data() {
    let mut server = RedisServer::start().unwrap();
    let port = server.port();
    let old_pid = server.pid();
    let mut con = server.connection().unwrap();
    let () = redis::cmd("SET").arg("k").arg("v").query(&mut con).unwrap();

    server.restart().unwrap();
    assert_eq!(server.port(), port);
    assert_ne!(server.pid(), old_pid);
    let mut con = server.connection().unwrap();
    let value: Option<String> = redis::cmd("GET").arg("k").query(&mut con).unwrap();
    assert_eq!(value, None);
    assert!(
        server
            .log()
            .contains("dlock-testkit: restart with empty data")
    );

    // A killed server can be restarted too.
    server.kill();
    server.restart().unwrap();
    assert_eq!(ping(&server), "PONG");
}

#[test]
fn restart_waits_while_its_port_is_taken() {
    let mut server = RedisServer::start().unwrap();
    server.kill();
    let squatter = TcpListener::bind(("127.0.0.1", server.port())).unwrap();
    let release = thread::spawn(move || {
        thread::sleep(Duration::from_millis(300));
        drop(squatter);
    });
    server.restart().unwrap();
    release.join().unwrap();
    assert_eq!(ping(&server), "PONG");
    assert!(server.log().contains("Address already in use"));
}

#[test]
fn paused_server_does_not_answer_until_resumed() {
    let server = RedisServer::start().unwrap();
    let mut con = server.connection().unwrap();
    con.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();

    server.pause().unwrap();
    let paused: redis::RedisResult<String> = redis::cmd("PING").query(&mut con);
    assert!(paused.is_err(), "a paused server answered: {paused:?}");

    server.resume().unwrap();
    assert_eq!(ping(&server), "PONG");
}

#[test]
fn dropping_a_paused_server_does_not_hang() {
    let server = RedisServer::start().unwrap();
    let port = server.port();
    server.pause().unwrap();
    drop(server);
    assert!(refuses_connections(port));
}

#[test]
fn dropped_server_refuses_connections() {
    let server = RedisServer::start().unwrap();
    let port = server.port();
    let dir = server.dir().to_path_buf();
    drop(server);
    assert!(refuses_connections(port));
    assert!(!dir.exists());
}

#[test]
fn extra_arguments_reach_the_server() {
    let server = RedisServer::start_with(ServerOptions::new().arg("maxmemory", "10mb")).unwrap();
    let mut con = server.connection().unwrap();
    let (_, value): (String, String) = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory")
        .query(&mut con)
        .unwrap();
    assert_eq!(value, "10485760");
}

#[test]
fn password_protected_server_url_authenticates() {
    let server =
        RedisServer::start_with(ServerOptions::new().arg("requirepass", "s3cret/x")).unwrap();
    assert!(server.url().starts_with("redis://:s3cret%2Fx@127.0.0.1:"));
    assert_eq!(ping(&server), "PONG");
}

#[test]
fn a_bad_configuration_fails_with_the_servers_own_explanation() {
    let error = RedisServer::start_with(ServerOptions::new().arg("maxmemory", "lots"))
        .unwrap_err()
        .to_string();
    assert!(error.contains("exited during startup"), "{error}");
    assert!(error.contains("FATAL CONFIG FILE ERROR"), "{error}");
    assert!(error.contains("command: /"), "{error}");
}

#[test]
fn reserved_options_are_rejected() {
    let error = RedisServer::start_with(ServerOptions::new().arg("port", "6379")).unwrap_err();
    assert!(error.message().contains("set by the harness"), "{error}");
}

#[test]
fn cluster_of_three_covers_every_slot() {
    let cluster = RedisCluster::start().unwrap();
    assert_eq!(cluster.urls().len(), 3);
    for node in cluster.nodes() {
        let mut con = node.connection().unwrap();
        let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut con).unwrap();
        assert!(info.contains("cluster_state:ok"), "{info}");
    }

    let mut con = cluster.nodes()[0].connection().unwrap();
    let ranges: Vec<Value> = redis::cmd("CLUSTER").arg("SLOTS").query(&mut con).unwrap();
    let mut covered = 0;
    let mut masters = HashSet::new();
    for range in ranges {
        let Value::Array(items) = range else {
            panic!("unexpected CLUSTER SLOTS entry {range:?}")
        };
        let (Value::Int(start), Value::Int(end), Value::Array(master)) =
            (&items[0], &items[1], &items[2])
        else {
            panic!("unexpected CLUSTER SLOTS entry {items:?}")
        };
        covered += end - start + 1;
        masters.insert(format!("{:?}", master[1]));
    }
    assert_eq!(covered, 16_384);
    assert_eq!(masters.len(), 3);
}

#[test]
fn cluster_needs_three_masters() {
    let error = RedisCluster::start_masters(2).unwrap_err();
    assert!(error.message().contains("at least 3 masters"), "{error}");
}

#[test]
fn nodes_are_independent_servers_on_distinct_ports() {
    let mut nodes = RedisNodes::start(3).unwrap();
    let ports: HashSet<u16> = nodes.nodes().iter().map(RedisServer::port).collect();
    assert_eq!(ports.len(), 3);
    assert_eq!(nodes.urls().len(), 3);

    nodes.nodes_mut()[0].kill();
    assert!(nodes.nodes()[0].connection().is_err());
    assert_eq!(ping(&nodes.nodes()[1]), "PONG");
    assert!(RedisNodes::start(0).is_err());
}

#[test]
fn child_guard_stops_continues_and_kills() {
    let mut cmd = Command::new("sleep");
    cmd.arg("60");
    let mut child = ChildGuard::spawn(cmd).unwrap();
    child.stop().unwrap();
    child.cont().unwrap();
    assert!(
        child
            .wait_timeout(Duration::from_millis(50))
            .unwrap()
            .is_none()
    );
    child.kill();
    let status = child.wait_timeout(Duration::ZERO).unwrap().unwrap();
    assert!(!status.success());
    assert!(child.stop().is_err(), "signalled a reaped child");
    child.kill(); // idempotent
}

#[test]
fn child_guard_reports_exit_and_spawn_errors() {
    let mut child = ChildGuard::spawn(Command::new("true")).unwrap();
    let status = child.wait_timeout(Duration::from_secs(10)).unwrap();
    assert!(status.unwrap().success());

    let error = ChildGuard::spawn(Command::new("/nonexistent/program")).unwrap_err();
    assert!(error.message().contains("/nonexistent/program"), "{error}");
}
