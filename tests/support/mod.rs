//! Shared helpers of the integration tests: servers, clients, worker processes, polling.
//!
//! Behaviour tests take a [`Backend`] and run on both (see [`backend_tests!`]); the helpers
//! on a bare [`RedisServer`] below serve the tests that run on one server only (the scheduler's
//! and the examples').

mod backend;
pub(crate) mod sched_delay;
mod target;

pub(crate) use backend::{Backend, backend_tests};
pub(crate) use target::Plain;

use std::process::Command;
use std::time::{Duration, Instant};

use dlock_core::{Client, Mutex, MutexGuard};
use dlock_testkit::{ChildGuard, LineChild, RedisServer};
use redis::AsyncCommands;

/// Whether the test `name` cannot run here because the server under test has no TLS (the
/// Valkey builds of `.deps/`, `dlock_testkit::ServerFlavour::tls_skip_reason`): it then says
/// so by name, and the caller returns. `make test-compat` repeats it in its summary.
#[allow(clippy::print_stdout)] // the skip is said by name in the test's output
pub(crate) fn skipped_without_tls(name: &str) -> bool {
    let flavour = dlock_testkit::server_flavour().unwrap_or_else(|e| panic!("{e}"));
    match flavour.tls_skip_reason() {
        Some(why) => {
            println!("SKIPPED {name}: {why}");
            true
        }
        None => false,
    }
}

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

/// Takes the free lock `lock` and releases it: the connection, the scripts and the slot's fence
/// counter are then warm.
pub(crate) async fn take_and_release(lock: &Mutex) {
    lock.try_acquire()
        .await
        .unwrap()
        .expect("free")
        .release()
        .await
        .unwrap();
}

/// The guard of `lock` as soon as a `try_acquire` gets it, within `limit` (what is awaited is
/// named by `what` in the failure).
pub(crate) async fn acquired_within(lock: &Mutex, limit: Duration, what: &str) -> MutexGuard {
    eventually(limit, what, || async {
        lock.try_acquire().await.ok().flatten()
    })
    .await
}

/// A mutex round through `client` (a user's rights, TLS): acquired with the watchdog, a fence, a waiter queued
/// (seen by `inspect`), renewed past its 600 ms lease, handed over on release, and the new
/// holder's lock forced open (`force_unlock`), which its lease reports.
pub(crate) async fn mutex_round(client: &Client) {
    let lock = client
        .mutex_with(
            "order:1",
            dlock_core::MutexOptions::new()
                .ttl(Duration::from_millis(600))
                .watchdog(),
        )
        .unwrap();
    let guard = lock.acquire().await.unwrap();
    assert!(guard.fencing_token().await.unwrap().get() > 0);
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.acquire_timeout(Duration::from_secs(10)).await })
    };
    let info = eventually(Duration::from_secs(5), "a queued waiter", || async {
        client
            .inspect("order:1")
            .await
            .unwrap()
            .filter(|i| i.waiters == 1)
    })
    .await;
    assert!(info.remaining > Duration::ZERO);
    // Renewed past its 600 ms lease by the watchdog, then handed over on release.
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert!(guard.lease().is_held(), "renewed past its lease");
    guard.release().await.unwrap();
    let second = waiter.await.unwrap().unwrap();
    assert!(client.force_unlock("order:1").await.unwrap());
    assert!(second.lost().await.reason() != dlock_core::LostReason::Released);
}

/// A `dlock-test-worker` process whose stdout lines can be awaited.
pub(crate) struct Worker(LineChild);

impl Worker {
    pub(crate) fn spawn(args: &[String]) -> Worker {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_dlock-test-worker"));
        cmd.args(args);
        Worker(LineChild::spawn(cmd).expect("spawn worker"))
    }

    /// The next line the worker has printed, if any (without waiting); fails the test on an
    /// `error` line.
    pub(crate) fn try_line(&self) -> Option<String> {
        let line = self.0.try_line()?;
        assert!(!line.starts_with("error"), "worker failed: {line}");
        Some(line)
    }

    /// The next line the worker prints; fails the test on an `error` line or after `limit`.
    pub(crate) fn line(&self, limit: Duration) -> String {
        let line = self.0.line(limit).unwrap_or_else(|e| panic!("{e}"));
        assert!(!line.starts_with("error"), "worker failed: {line}");
        line
    }

    /// The process (pid, signals).
    pub(crate) fn child(&self) -> &ChildGuard {
        self.0.process()
    }

    /// The process, to kill it or wait for it.
    pub(crate) fn child_mut(&mut self) -> &mut ChildGuard {
        self.0.process_mut()
    }
}

/// Parses `key=value key=value` into the value of `key`.
pub(crate) fn field(line: &str, key: &str) -> u64 {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key}= in {line:?}"))
}

/// Runs the worker's `command` (`count` or `macro-count`) in two processes of 4 tasks each on
/// the lock `name` for `turns` turns in all, then checks what mutual exclusion promises: no
/// holder saw another inside, no turn timed out, every turn was counted (none lost to a
/// read-pause-write race), and the fencing tokens, appended in acquisition order, strictly
/// increase.
pub(crate) async fn two_processes_count(backend: &Backend, command: &str, name: &str, turns: u64) {
    let args: Vec<String> = vec![
        command.into(),
        backend.worker_arg(),
        format!("name={name}"),
        "tasks=4".into(),
        format!("limit={turns}"),
    ];
    let workers = [Worker::spawn(&args), Worker::spawn(&args)];
    let mut acquired = 0;
    for worker in &workers {
        let summary = worker.line(Duration::from_secs(240));
        assert_eq!(
            field(&summary, "overlaps"),
            0,
            "two holders at once: {summary}"
        );
        assert_eq!(field(&summary, "timeouts"), 0, "{summary}");
        acquired += field(&summary, "acquired");
    }
    assert_eq!(acquired, turns);

    let mut con = backend.raw().await;
    let counter: u64 = con.get(format!("{name}:counter")).await.unwrap();
    assert_eq!(counter, turns, "lost updates: {}", turns - counter);
    let fences: Vec<u64> = con.lrange(format!("{name}:fences"), 0, -1).await.unwrap();
    assert_eq!(u64::try_from(fences.len()).unwrap(), turns);
    assert!(
        fences.windows(2).all(|w| w[0] < w[1]),
        "fencing tokens must strictly increase in acquisition order"
    );
}

/// The log lines (`tracing` events at debug and above, formatted without colours) of the
/// current thread while it lives: a test on a current-thread runtime sees everything dlock
/// logs for it, and awaits a line instead of sleeping.
pub(crate) struct LogCapture {
    lines: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    _default: tracing::subscriber::DefaultGuard,
}

/// A writer into shared bytes, for a `tracing` subscriber whose output a test reads.
#[derive(Clone)]
pub(crate) struct Sink(pub(crate) std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl LogCapture {
    pub(crate) fn start() -> LogCapture {
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = Sink(lines.clone());
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .with_writer(move || sink.clone())
            .finish();
        LogCapture {
            lines,
            _default: tracing::subscriber::set_default(subscriber),
        }
    }

    /// Every line logged so far that contains `text`.
    pub(crate) fn matching(&self, text: &str) -> Vec<String> {
        String::from_utf8_lossy(&self.lines.lock().unwrap())
            .lines()
            .filter(|line| line.contains(text))
            .map(str::to_owned)
            .collect()
    }

    /// The first line that contains `text`, once logged; fails the test after `limit`.
    pub(crate) async fn wait_for(&self, text: &str, limit: Duration) -> String {
        eventually(limit, &format!("a log line with {text:?}"), || async {
            self.matching(text).into_iter().next()
        })
        .await
    }
}

/// Waits until the queue `key` (a lock's `…:queue` list) holds `n` waiting requests.
pub(crate) async fn queue_reaches(con: &Plain, key: &str, n: usize) {
    eventually(Duration::from_secs(10), "requests queued", || {
        let mut con = con.clone();
        async move {
            let len: usize = con.llen(key).await.ok()?;
            (len == n).then_some(())
        }
    })
    .await;
}

/// Waits until the list `key` holds something: a worker's first write has landed.
pub(crate) async fn has_written(con: &Plain, key: &str) {
    eventually(Duration::from_secs(10), "the holder writes", || {
        let mut con = con.clone();
        async move {
            let n: usize = con.llen(key).await.ok()?;
            (n > 0).then_some(())
        }
    })
    .await;
}

/// The observer of shared holds: one hash outside the lock, `r` readers (or holders of
/// permits) and `w` writers inside right now, changed and read in one script by each holder as
/// it enters and leaves (`tests/locks/rwlock.rs`, `tests/locks/macro_lock.rs`).
const OBSERVE: &str = "redis.call('HINCRBY', KEYS[1], ARGV[1], ARGV[2]) \
                       return redis.call('HMGET', KEYS[1], 'r', 'w')";

/// Enters (`+1`) or leaves (`-1`) as a reader (`"r"`) or writer (`"w"`) of the lock `name`;
/// returns who is inside right after (`0` reads without a change).
pub(crate) async fn observe(con: &mut Plain, name: &str, role: &str, delta: i64) -> (i64, i64) {
    let inside: (Option<i64>, Option<i64>) = redis::Script::new(OBSERVE)
        .key(format!("obs:{{{name}}}"))
        .arg(role)
        .arg(delta)
        .invoke_async(con)
        .await
        .unwrap();
    (inside.0.unwrap_or(0), inside.1.unwrap_or(0))
}
