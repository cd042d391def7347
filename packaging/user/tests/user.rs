//! The packaged crates under test as a user tests with them: the program run against a
//! `redis-server` that dlock-testkit starts, and a `#[tokio::test]` that locks on one.

use dlock_core::Client;
use dlock_testkit::RedisServer;

#[test]
fn the_program_locks_on_a_real_server() {
    let server = RedisServer::start().expect("redis-server (dlock-testkit)");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dlock-packaged-user"))
        .arg(server.url())
        .output()
        .expect("run the program");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout.contains("order 7 paid under fencing token "),
        "{stdout}"
    );
    assert!(
        stdout.contains("scheduler built with job nightly"),
        "{stdout}"
    );
}

#[tokio::test]
async fn a_lock_on_a_test_kit_server() {
    let server = RedisServer::start().expect("redis-server (dlock-testkit)");
    let client = Client::builder(server.url().as_str())
        .connect()
        .await
        .unwrap();
    let mutex = client.mutex("user:1").unwrap();
    let guard = mutex.try_acquire().await.unwrap().expect("a free lock");
    assert!(
        mutex.try_acquire().await.unwrap().is_none(),
        "held: a second try gets nothing"
    );
    guard.release().await.unwrap();
    assert!(
        mutex.try_acquire().await.unwrap().is_some(),
        "released: free again"
    );
}
