//! Running the binary, servers, clients, polling.

use std::time::{Duration, Instant};

use dlock_core::Client;
use dlock_testkit::RedisServer;

/// What one run of `dlock` did.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Run {
    /// The JSON document on stdout.
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:?}"))
    }

    /// Fails the test unless the run exited with `code`.
    pub(crate) fn expect(self, code: i32) -> Self {
        assert_eq!(self.code, code, "unexpected exit code: {self:?}");
        self
    }
}

/// Runs `dlock` with `args` (no `DLOCK_REDIS_URL` unless `env` sets it, stdin empty and not a
/// terminal), bounded by a minute so that a hang fails the test.
pub(crate) async fn dlock_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    tokio::task::spawn_blocking(move || {
        let mut cmd = assert_cmd::Command::new(env!("CARGO_BIN_EXE_dlock"));
        cmd.args(&args)
            .env_remove("DLOCK_REDIS_URL")
            .timeout(Duration::from_secs(60));
        for (k, v) in &env {
            cmd.env(k, v);
        }
        let output = cmd.output().expect("run dlock");
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    })
    .await
    .unwrap()
}

/// Runs `dlock` with `args`.
pub(crate) async fn dlock(args: &[&str]) -> Run {
    dlock_env(args, &[]).await
}

/// A fresh redis-server for one test.
pub(crate) fn redis() -> RedisServer {
    RedisServer::start().unwrap_or_else(|e| panic!("could not start redis-server: {e}"))
}

/// A dlock client of `url`.
pub(crate) fn client(url: &str) -> Client {
    Client::builder(url)
        .command_timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// Polls `check` until it returns `Some`, failing the test after `limit`: for effects that
/// happen in the background, not a timing check.
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
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// This process as dlock records a holder: host name and pid.
pub(crate) fn me() -> (String, u32) {
    (dlock_core::ext::host_name(), std::process::id())
}
