//! Run with: `cargo run -p web -- [--redis-url URL] [--listen ADDR] [--name NAME]
//! [--provider-latency-ms N]`; this is start-up and shutdown.
//!
//! Configuration comes from flags, else from the environment (`DLOCK_REDIS_URL`, `LISTEN`,
//! `INSTANCE_NAME`, `PROVIDER_LATENCY_MS`), else from defaults. Once bound, the service prints
//! `listening on http://<addr>` on stdout (with `LISTEN=127.0.0.1:0`, the line tells a script or
//! a test which port it got); everything else it logs goes to stderr. SIGTERM or Ctrl-C stops
//! accepting connections, lets the requests in flight finish (and release their locks), and
//! exits 0.

use std::fmt;
use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use dlock_core::Client;
use metrics_exporter_prometheus::PrometheusBuilder;
use tokio::net::TcpListener;

use crate::log::log;
use crate::pay::Payments;
use crate::routes::{AppState, router};
use crate::store::Store;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const USAGE: &str = "usage: web [--redis-url URL] [--listen ADDR] [--name NAME] \
                     [--provider-latency-ms N]
  --redis-url            or DLOCK_REDIS_URL      default redis://127.0.0.1:6379/
  --listen               or LISTEN               default 127.0.0.1:3000 (port 0: any free port)
  --name                 or INSTANCE_NAME        default the bound address; shown as paid_by
  --provider-latency-ms  or PROVIDER_LATENCY_MS  default 50-200 ms, varying";

/// The service's settings.
#[derive(Clone, PartialEq, Eq)]
pub struct Config {
    /// The Redis of the locks and the orders.
    pub redis_url: String,
    /// Where to listen, `host:port`.
    pub listen: String,
    /// This replica's name in receipts; the bound address when `None`.
    pub name: Option<String>,
    /// The simulated provider's answer time; 50–200 ms, varying, when `None`.
    pub provider_latency: Option<Duration>,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            redis_url: _, // may carry a password
            listen,
            name,
            provider_latency,
        } = self;
        f.debug_struct("Config")
            .field("listen", listen)
            .field("name", name)
            .field("provider_latency", provider_latency)
            .finish_non_exhaustive()
    }
}

impl Config {
    /// Reads flags from `args` (without the program name), falling back to `env`.
    ///
    /// # Errors
    /// A message with the usage for an unknown flag, a flag without its value, or a latency
    /// that is not a whole number of milliseconds.
    pub fn parse(
        args: impl IntoIterator<Item = String>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, String> {
        let mut flags = std::collections::HashMap::new();
        let mut args = args.into_iter();
        while let Some(flag) = args.next() {
            let var = match flag.as_str() {
                "--redis-url" => "DLOCK_REDIS_URL",
                "--listen" => "LISTEN",
                "--name" => "INSTANCE_NAME",
                "--provider-latency-ms" => "PROVIDER_LATENCY_MS",
                other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
            };
            let value = args
                .next()
                .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
            flags.insert(var, value);
        }
        let get = |var: &str| flags.get(var).cloned().or_else(|| env(var));
        let provider_latency = match get("PROVIDER_LATENCY_MS") {
            Some(ms) => Some(Duration::from_millis(ms.parse().map_err(|_| {
                format!("provider latency {ms:?} is not a whole number of milliseconds")
            })?)),
            None => None,
        };
        Ok(Self {
            redis_url: get("DLOCK_REDIS_URL").unwrap_or_else(|| "redis://127.0.0.1:6379/".into()),
            listen: get("LISTEN").unwrap_or_else(|| "127.0.0.1:3000".into()),
            name: get("INSTANCE_NAME"),
            provider_latency,
        })
    }
}

/// The `web` binary: parse the configuration, serve until SIGTERM or Ctrl-C.
pub fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        print_usage();
        return ExitCode::SUCCESS;
    }
    let result = Config::parse(args, |var| std::env::var(var).ok())
        .map_err(BoxError::from)
        .and_then(|config| {
            let runtime = tokio::runtime::Runtime::new()
                .map_err(|e| format!("cannot start the Tokio runtime: {e}"))?;
            runtime.block_on(serve(config))
        });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log(format_args!("error: {e}"));
            ExitCode::FAILURE
        }
    }
}

/// Histogram buckets of every duration (seconds): from half a millisecond (an uncontended
/// acquire on a nearby Redis) to 10 s (a long wait, a long hold).
const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Connects to Redis, binds, prints `listening on http://<addr>`, and serves until SIGTERM or
/// Ctrl-C; then waits for the requests in flight.
///
/// # Errors
/// Redis does not answer at start-up, the address cannot be bound, or the server fails.
///
/// # Cancel safety
/// Dropping the future stops the server at once, without waiting for requests in flight.
pub async fn serve(config: Config) -> Result<(), BoxError> {
    // Installed before the lock client is built, which describes dlock's metrics to it (their
    // units among them) and registers the series listed before any traffic. Unit suffixes on:
    // Prometheus names say their unit (`dlock_acquire_duration_seconds`), as its naming
    // conventions ask; the exporter adds no `_total` to counters (dlock-core's CHANGELOG says
    // why the names are kept).
    let metrics = PrometheusBuilder::new()
        .set_enable_unit_suffix(true)
        .set_buckets(LATENCY_BUCKETS)
        .and_then(PrometheusBuilder::install_recorder)
        .map_err(|e| format!("cannot install the metrics recorder: {e}"))?;
    let locks = Client::builder(config.redis_url.as_str())
        .connect()
        .await
        .map_err(|e| format!("Redis (--redis-url / DLOCK_REDIS_URL) does not answer: {e}"))?;
    let listener = TcpListener::bind(&config.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
    let addr = listener.local_addr()?;
    announce(addr);
    let instance = config.name.unwrap_or_else(|| addr.to_string());
    let store = Store::new(locks.connection());
    let client = locks.clone();
    let payments = Payments::new(locks, store.clone(), instance, config.provider_latency);
    let state = AppState {
        payments: Arc::new(payments),
        store,
        metrics,
    };
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown_signal())
        .await
        .map_err(|e| format!("server failed: {e}"))?;
    // Requests have drained: give back whatever lock is still held or waited for, so that the
    // other replicas do not wait for its lease.
    let report = client.shutdown(Duration::from_secs(5)).await;
    log(format_args!("stopped; locks: {report}"));
    Ok(())
}

/// The line a test or a script waits for; written at once, and stdout is line-buffered.
fn announce(addr: SocketAddr) {
    // Serve even if nobody reads stdout (`println!` would panic on a closed pipe).
    let _ = writeln!(std::io::stdout(), "listening on http://{addr}");
}

fn print_usage() {
    // `web --help | head -1` closes the pipe early: not an error.
    let _ = writeln!(std::io::stdout(), "{USAGE}");
}

/// Resolves on SIGTERM (what orchestrators send) or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            log(format_args!("cannot listen for Ctrl-C ({e}); use SIGTERM"));
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut sigterm) => {
                sigterm.recv().await;
            }
            Err(e) => {
                log(format_args!("cannot listen for SIGTERM ({e}); use Ctrl-C"));
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
    log(format_args!(
        "shutting down: finishing the requests in flight"
    ));
}

#[cfg(test)]
#[allow(clippy::panic, reason = "a panic is how a test fails")]
mod tests {
    use super::*;

    fn parse(args: &[&str], env: &[(&str, &str)]) -> Result<Config, String> {
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Config::parse(args.iter().map(|a| (*a).to_owned()), move |var| {
            env.iter().find(|(k, _)| k == var).map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn flags_override_env_and_env_overrides_defaults() {
        let config = parse(
            &["--listen", "127.0.0.1:0"],
            &[
                ("LISTEN", "0.0.0.0:80"),
                ("DLOCK_REDIS_URL", "redis://r:7/"),
            ],
        );
        let config = config.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.listen, "127.0.0.1:0");
        assert_eq!(config.redis_url, "redis://r:7/");
        assert_eq!(config.name, None);
        assert_eq!(config.provider_latency, None);
    }

    #[test]
    fn defaults_and_latency() {
        let config =
            parse(&["--provider-latency-ms", "250"], &[]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.redis_url, "redis://127.0.0.1:6379/");
        assert_eq!(config.listen, "127.0.0.1:3000");
        assert_eq!(config.provider_latency, Some(Duration::from_millis(250)));
    }

    #[test]
    fn bad_arguments_are_explained() {
        for (args, needle) in [
            (&["--port", "1"][..], "unknown argument \"--port\""),
            (&["--listen"][..], "--listen needs a value"),
            (
                &["--provider-latency-ms", "1s"][..],
                "whole number of milliseconds",
            ),
        ] {
            let err = parse(args, &[]).err().unwrap_or_default();
            assert!(err.contains(needle), "{args:?}: {err}");
        }
    }

    #[test]
    fn debug_hides_the_redis_url() {
        let config =
            parse(&["--redis-url", "redis://:hunter2@h/"], &[]).unwrap_or_else(|e| panic!("{e}"));
        assert!(!format!("{config:?}").contains("hunter2"));
    }
}
