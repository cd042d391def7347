//! Secrets never leak: with a known password in the URL, every `Debug`/`Display` of dlock's
//! types and errors, every `tracing` event at TRACE and every `log` record of the redis crate
//! at TRACE in a session — connecting, locking, waiting, a wrong password, a server that went
//! away, a malformed URL, a cluster builder — is searched for it.
//!
//! Standalone server (plus a cluster builder that never connects): what is searched is text
//! made by the client, the same on both backends.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex as StdMutex, OnceLock};
use std::time::Duration;

use dlock_core::{Client, MutexOptions};
use dlock_testkit::{RedisServer, ServerOptions};

use crate::support::Sink;

const PASSWORD: &str = "hunter2-Zq9x-s3cr3t";

/// Every `log` record while `RECORDING` is on (the redis crate logs through `log`; the logger
/// is process-wide, so it is installed once and switched on only by this test).
static RECORDING: AtomicBool = AtomicBool::new(false);
static RECORDS: StdMutex<Vec<String>> = StdMutex::new(Vec::new());

struct Recorder;

impl log::Log for Recorder {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        RECORDING.load(Ordering::Relaxed)
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            RECORDS.lock().unwrap().push(format!(
                "{} {} {}",
                record.level(),
                record.target(),
                record.args()
            ));
        }
    }

    fn flush(&self) {}
}

fn record_log() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        log::set_logger(&Recorder).expect("no other `log` logger in this binary");
        log::set_max_level(log::LevelFilter::Trace);
    });
    RECORDING.store(true, Ordering::Relaxed);
}

/// Collects text to search, and what produced it (for the failure message).
#[derive(Default)]
struct Seen(Vec<(String, String)>);

impl Seen {
    fn add(&mut self, what: &str, text: impl Into<String>) {
        self.0.push((what.to_owned(), text.into()));
    }

    fn error(&mut self, what: &str, err: &dlock_core::Error) {
        self.add(what, format!("{err} | {err:?}"));
        let mut source = std::error::Error::source(err);
        while let Some(s) = source {
            self.add(what, format!("{s} | {s:?}"));
            source = s.source();
        }
    }
}

#[test]
fn the_password_appears_in_no_output_of_a_session() {
    let mut server =
        RedisServer::start_with(ServerOptions::new().arg("requirepass", PASSWORD)).unwrap();
    let url = format!("redis://:{PASSWORD}@127.0.0.1:{}/", server.port());
    let lines = std::sync::Arc::new(StdMutex::new(Vec::<u8>::new()));
    let subscriber = {
        let lines = lines.clone();
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(move || Sink(lines.clone()))
            .finish()
    };
    let _events = tracing::subscriber::set_default(subscriber);
    record_log();
    // The recorder works (whatever the redis crate logs in this session is recorded with it).
    log::trace!(target: "secrets-canary", "recording");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut seen = Seen::default();

    runtime.block_on(async {
        let builder = Client::builder(url.as_str()).command_timeout(Duration::from_millis(500));
        seen.add("ClientBuilder Debug", format!("{builder:?}"));
        let client = builder.build().unwrap();
        seen.add("Client Debug", format!("{client:?}"));
        let lock = client
            .mutex_with(
                "order:1",
                MutexOptions::new().ttl(Duration::from_secs(1)).watchdog(),
            )
            .unwrap();
        seen.add("Mutex Debug", format!("{lock:?}"));
        let guard = lock.acquire().await.unwrap();
        seen.add("MutexGuard Debug", format!("{guard:?}"));
        let waiter = lock.acquire_timeout(Duration::from_millis(100)).await;
        seen.error("busy", &waiter.unwrap_err());
        seen.add(
            "HolderInfo Debug",
            format!("{:?}", client.inspect("order:1").await),
        );
        seen.add("Connection Debug", format!("{:?}", client.connection()));
        guard.release().await.unwrap();

        // A wrong password, a malformed URL with a password, a cluster builder.
        let wrong = format!("redis://:{PASSWORD}x@127.0.0.1:{}/", server.port());
        let err = Client::builder(wrong.as_str()).connect().await.unwrap_err();
        seen.error("wrong password", &err);
        let malformed = format!("redis://:{PASSWORD}@127.0.0.1:notaport/");
        let err = Client::builder(malformed.as_str()).build().unwrap_err();
        seen.error("malformed URL", &err);
        let cluster = Client::cluster_builder([url.as_str(), url.as_str()]);
        seen.add("cluster ClientBuilder Debug", format!("{cluster:?}"));

        // The server goes away while the client holds and renews a lock.
        let held = lock.acquire().await.unwrap();
        server.kill();
        let lost = held.lost().await;
        seen.add("lease lost", format!("{lost} | {lost:?}"));
        let err = lock.try_acquire().await.unwrap_err();
        seen.error("server down", &err);
        let report = client.shutdown(Duration::from_millis(500)).await;
        seen.add("shutdown report", format!("{report:?}"));
    });
    RECORDING.store(false, Ordering::Relaxed);

    seen.add(
        "tracing events (TRACE)",
        String::from_utf8_lossy(&lines.lock().unwrap()).into_owned(),
    );
    let records = RECORDS.lock().unwrap().join("\n");
    assert!(
        records.contains("secrets-canary"),
        "the log recorder saw nothing"
    );
    seen.add("log records (TRACE)", records);
    let searched: usize = seen.0.iter().map(|(_, text)| text.len()).sum();
    assert!(
        searched > 2_000,
        "too little output to search: {searched} bytes"
    );
    assert!(
        seen.0
            .iter()
            .any(|(what, t)| what == "wrong password" && !t.is_empty()),
        "the wrong password produced no error text"
    );
    for (what, text) in &seen.0 {
        assert!(
            !text.contains(PASSWORD) && !text.contains(&PASSWORD[..12]),
            "{what} shows the password: {text}"
        );
    }
}
