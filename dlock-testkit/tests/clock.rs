//! The movable clock: a jump moves the server's `TIME` and expires keys whose lease it passes,
//! the monotonic-clock-based parts of the server keep working, and the offset survives a
//! restart. A server without the option refuses a jump.

// A panic is how a test fails, helpers included.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use dlock_testkit::{RedisServer, ServerOptions};

fn time_secs(server: &RedisServer) -> i64 {
    let (secs, _): (i64, i64) = redis::cmd("TIME")
        .query(&mut server.connection().unwrap())
        .unwrap();
    secs
}

#[test]
fn a_jump_moves_time_and_expires_keys() {
    let mut server = RedisServer::start_with(ServerOptions::new().movable_clock()).unwrap();
    let mut con = server.connection().unwrap();
    let () = redis::cmd("SET")
        .arg("short")
        .arg("v")
        .arg("PX")
        .arg(60_000)
        .query(&mut con)
        .unwrap();
    let () = redis::cmd("SET")
        .arg("long")
        .arg("v")
        .arg("PX")
        .arg(600_000)
        .query(&mut con)
        .unwrap();
    let before = time_secs(&server);
    server.jump_clock(Duration::from_secs(120)).unwrap();
    let after = time_secs(&server);
    assert!(after >= before + 120, "TIME {before} -> {after}");
    let short: Option<String> = redis::cmd("GET").arg("short").query(&mut con).unwrap();
    assert_eq!(short, None, "a 60 s lease survived a 120 s jump");
    let long: Option<String> = redis::cmd("GET").arg("long").query(&mut con).unwrap();
    assert_eq!(long.as_deref(), Some("v"));
    server.restart().unwrap();
    assert!(
        time_secs(&server) >= before + 120,
        "the offset was lost on restart"
    );
}

#[test]
fn a_server_without_the_option_refuses_a_jump() {
    let server = RedisServer::start().unwrap();
    let err = server.jump_clock(Duration::from_secs(1)).unwrap_err();
    assert!(err.to_string().contains("movable_clock"), "{err}");
}
