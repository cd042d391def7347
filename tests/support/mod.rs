//! Shared helpers of the integration tests: servers, clients, worker processes, polling.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use dlock_core::Client;
use dlock_testkit::{ChildGuard, RedisServer};

/// A fresh redis-server for one test.
pub(crate) fn redis() -> RedisServer {
    RedisServer::start().unwrap_or_else(|e| panic!("could not start redis-server: {e}"))
}

/// A client of `server` with a short command timeout, so failures show quickly.
pub(crate) fn client(server: &RedisServer) -> Client {
    Client::builder(server.url().as_str())
        .command_timeout(Duration::from_secs(2))
        .build()
        .expect("client")
}

/// An async plain connection for assertions on the raw Redis state.
pub(crate) async fn raw(server: &RedisServer) -> redis::aio::MultiplexedConnection {
    redis::Client::open(server.url())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("raw connection")
}

/// Polls `check` until it returns `Some`, failing the test after `limit`. For effects that
/// happen in the background (a released lock, a dropped subscription); not a timing check.
pub(crate) async fn eventually<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A `dlock-test-worker` process whose stdout lines can be awaited.
pub(crate) struct Worker {
    pub(crate) child: ChildGuard,
    lines: mpsc::Receiver<String>,
}

impl Worker {
    pub(crate) fn spawn(args: &[String]) -> Worker {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_dlock-test-worker"));
        cmd.args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = ChildGuard::spawn(cmd).expect("spawn worker");
        let stdout = child.child_mut().stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Worker { child, lines }
    }

    /// The next line the worker prints; fails the test on an `error` line or after `limit`.
    pub(crate) fn line(&self, limit: Duration) -> String {
        let line = self
            .lines
            .recv_timeout(limit)
            .unwrap_or_else(|e| panic!("worker printed nothing within {limit:?}: {e}"));
        assert!(!line.starts_with("error"), "worker failed: {line}");
        line
    }
}

/// Parses `key=value key=value` into the value of `key`.
pub(crate) fn field(line: &str, key: &str) -> u64 {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key}= in {line:?}"))
}
