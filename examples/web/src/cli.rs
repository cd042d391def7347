//! Run with: `cargo run -p web -- [--redis-url URL] [--store redis|postgres] [--postgres-url
//! URL] [--listen ADDR] [--name NAME] [--provider-latency-ms N] [--lock-ttl-ms N]`; this is
//! start-up and shutdown.
//!
//! Configuration comes from flags, else from the environment (`DLOCK_REDIS_URL`, `STORE`,
//! `POSTGRES_URL`, `LISTEN`, `INSTANCE_NAME`, `PROVIDER_LATENCY_MS`, `LOCK_TTL_MS`), else from
//! defaults. Once bound, the service prints
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

const USAGE: &str = "usage: web [--redis-url URL] [--store redis|postgres] [--postgres-url URL] \
                     [--listen ADDR] [--name NAME] [--provider-latency-ms N] [--lock-ttl-ms N]
  --redis-url            or DLOCK_REDIS_URL      default redis://127.0.0.1:6379/ (the locks)
  --store                or STORE                default redis: where the orders are kept
  --postgres-url         or POSTGRES_URL         with --store postgres (required): a tokio-postgres
                                                 connection string, e.g.
                                                 'host=/var/run/postgresql user=web dbname=shop'
                                                 or postgresql://web:PASSWORD@db.internal/shop
                                                 (no TLS); the tables are created if missing
  --listen               or LISTEN               default 127.0.0.1:3000 (port 0: any free port)
  --name                 or INSTANCE_NAME        default the bound address; shown as paid_by
  --provider-latency-ms  or PROVIDER_LATENCY_MS  default 50-200 ms, varying
  --lock-ttl-ms          or LOCK_TTL_MS          default 10000: the order lock's lease, renewed
                                                 while a payment runs (at least 100)";

/// The lease of an order's lock when `--lock-ttl-ms` is not given.
const DEFAULT_LOCK_TTL: Duration = Duration::from_secs(10);

/// Where the orders are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// In the Redis of the locks (the default): no other server needed.
    Redis,
    /// In PostgreSQL, at `--postgres-url`.
    Postgres,
}

/// The service's settings.
#[derive(Clone, PartialEq, Eq)]
pub struct Config {
    /// The Redis of the locks (and of the orders, with [`StoreKind::Redis`]).
    pub redis_url: String,
    /// Where the orders are kept.
    pub store: StoreKind,
    /// The PostgreSQL connection string, with [`StoreKind::Postgres`] (required then, and
    /// refused otherwise).
    pub postgres_url: Option<String>,
    /// Where to listen, `host:port`.
    pub listen: String,
    /// This replica's name in receipts; the bound address when `None`.
    pub name: Option<String>,
    /// The simulated provider's answer time; 50–200 ms, varying, when `None`.
    pub provider_latency: Option<Duration>,
    /// The lease of an order's lock (the lock client's default TTL).
    pub lock_ttl: Duration,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            redis_url: _,    // may carry a password
            postgres_url: _, // may carry a password
            store,
            listen,
            name,
            provider_latency,
            lock_ttl,
        } = self;
        f.debug_struct("Config")
            .field("store", store)
            .field("listen", listen)
            .field("name", name)
            .field("provider_latency", provider_latency)
            .field("lock_ttl", lock_ttl)
            .finish_non_exhaustive()
    }
}

impl Config {
    /// Reads flags from `args` (without the program name), falling back to `env`.
    ///
    /// # Errors
    /// A message with the usage for an unknown flag or a flag without its value; a message
    /// saying what to change for a latency or lease that is not a whole number of milliseconds
    /// (or a lease under 100 ms), a store other than `redis` or `postgres`, `--store postgres`
    /// without `--postgres-url`, or a PostgreSQL URL with the Redis store.
    pub fn parse(
        args: impl IntoIterator<Item = String>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, String> {
        let mut flags = std::collections::HashMap::new();
        let mut args = args.into_iter();
        while let Some(flag) = args.next() {
            let var = match flag.as_str() {
                "--redis-url" => "DLOCK_REDIS_URL",
                "--store" => "STORE",
                "--postgres-url" => "POSTGRES_URL",
                "--lock-ttl-ms" => "LOCK_TTL_MS",
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
        let lock_ttl = match get("LOCK_TTL_MS") {
            Some(ms) => match ms.parse() {
                Ok(ms) if ms >= 100 => Duration::from_millis(ms),
                _ => {
                    return Err(format!(
                        "lock TTL {ms:?} (--lock-ttl-ms / LOCK_TTL_MS) is not a whole number of \
                         milliseconds of at least 100 (the watchdog renews every third of it)"
                    ));
                }
            },
            None => DEFAULT_LOCK_TTL,
        };
        let postgres_url = get("POSTGRES_URL").filter(|url| !url.is_empty());
        let store = match get("STORE").as_deref() {
            None | Some("redis") => StoreKind::Redis,
            Some("postgres") => StoreKind::Postgres,
            Some(other) => {
                return Err(format!(
                    "unknown store {other:?} (--store / STORE): use redis or postgres"
                ));
            }
        };
        match (store, &postgres_url) {
            (StoreKind::Postgres, None) => {
                return Err(
                    "--store postgres needs a connection string: --postgres-url (or \
                            POSTGRES_URL), e.g. --postgres-url 'host=/var/run/postgresql \
                            user=web dbname=shop'"
                        .into(),
                );
            }
            (StoreKind::Redis, Some(_)) => {
                return Err(
                    "a PostgreSQL URL is set (--postgres-url / POSTGRES_URL) but the \
                            orders would go to Redis: add --store postgres (or unset it)"
                        .into(),
                );
            }
            _ => {}
        }
        Ok(Self {
            redis_url: get("DLOCK_REDIS_URL").unwrap_or_else(|| "redis://127.0.0.1:6379/".into()),
            store,
            postgres_url,
            listen: get("LISTEN").unwrap_or_else(|| "127.0.0.1:3000".into()),
            name: get("INSTANCE_NAME"),
            provider_latency,
            lock_ttl,
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

/// Connects to Redis (and to PostgreSQL with `--store postgres`, creating its tables if
/// missing), binds, prints `listening on http://<addr>`, and serves until SIGTERM or Ctrl-C;
/// then waits for the requests in flight.
///
/// # Errors
/// Redis or PostgreSQL does not answer at start-up (or PostgreSQL refuses the login or the
/// schema), the address cannot be bound, or the server fails.
///
/// # Cancel safety
/// Dropping the future stops the server at once, without waiting for requests in flight.
pub async fn serve(config: Config) -> Result<(), BoxError> {
    // Installed before the lock client is built, which describes dlock's metrics to it (their
    // units among them) and registers the series listed before any traffic.
    let metrics = prometheus_exporter()
        .and_then(PrometheusBuilder::install_recorder)
        .map_err(|e| format!("cannot install the metrics recorder: {e}"))?;
    let locks = Client::builder(config.redis_url.as_str())
        .default_ttl(config.lock_ttl)
        .connect()
        .await
        .map_err(|e| format!("Redis (--redis-url / DLOCK_REDIS_URL) does not answer: {e}"))?;
    let store = match (config.store, &config.postgres_url) {
        (StoreKind::Postgres, Some(url)) => Store::postgres(url).await.map_err(|e| {
            format!("PostgreSQL (--postgres-url / POSTGRES_URL) cannot be used: {e}")
        })?,
        _ => Store::new(locks.connection()),
    };
    let listener = TcpListener::bind(&config.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
    let addr = listener.local_addr()?;
    announce(addr);
    let instance = config.name.unwrap_or_else(|| addr.to_string());
    log(format_args!("orders in {}", store.kind()));
    let client = locks.clone();
    let payments = Payments::new(locks, store.clone(), instance, config.provider_latency);
    let state = AppState {
        payments: Arc::new(payments),
        store,
        locks: client.clone(),
        metrics,
    };
    // With the peer's address in each request: the search's rate limit is per client address.
    let app = router(state)?.into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown_signal())
        .await
        .map_err(|e| format!("server failed: {e}"))?;
    // Requests have drained: give back whatever lock is still held or waited for, so that the
    // other replicas do not wait for its lease.
    let report = client.shutdown(Duration::from_secs(5)).await;
    log(format_args!("stopped; locks: {report}"));
    Ok(())
}

/// The Prometheus exporter as the service installs it: histograms in `LATENCY_BUCKETS`, and
/// unit suffixes on, so that names say their unit (`dlock_acquire_duration_seconds`), as
/// Prometheus' conventions ask; counters get no `_total` (dlock-core's CHANGELOG, "Metric names
/// and `_total`").
///
/// `set_enable_unit_suffix` is deprecated since metrics-exporter-prometheus 0.18 in favour of
/// `with_recommended_naming(true)`, which also appends `_total` to every counter: a rename of
/// every counter series (`dlock_lease_lost` → `dlock_lease_lost_total`) that dashboards and alert
/// rules select by name. We keep the documented names, and the version (0.18) whose `# TYPE`
/// lines carry the suffix its samples carry (0.17's did not: the test below). When the exporter
/// removes this setting, the move to recommended naming is a breaking change with a migration.
#[expect(
    deprecated,
    reason = "keeps the documented series names; with_recommended_naming renames every counter"
)]
fn prometheus_exporter() -> Result<PrometheusBuilder, metrics_exporter_prometheus::BuildError> {
    PrometheusBuilder::new()
        .set_enable_unit_suffix(true)
        .set_buckets(LATENCY_BUCKETS)
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
    fn the_store_is_redis_unless_postgres_is_asked_for_with_its_url() {
        let config = parse(&[], &[]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (config.store, config.postgres_url),
            (StoreKind::Redis, None)
        );
        assert_eq!(config.lock_ttl, DEFAULT_LOCK_TTL);
        let config = parse(
            &["--store", "postgres", "--lock-ttl-ms", "1000"],
            &[("POSTGRES_URL", "host=/tmp user=web")],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.store, StoreKind::Postgres);
        assert_eq!(config.postgres_url.as_deref(), Some("host=/tmp user=web"));
        assert_eq!(config.lock_ttl, Duration::from_secs(1));
        for (args, env, needle) in [
            (
                &["--store", "postgres"][..],
                &[][..],
                "needs a connection string: --postgres-url",
            ),
            (
                &["--store", "mysql"][..],
                &[][..],
                "unknown store \"mysql\"",
            ),
            (
                &["--postgres-url", "host=/tmp"][..],
                &[][..],
                "add --store postgres",
            ),
            (
                &[][..],
                &[("STORE", "postgres")][..],
                "--store postgres needs",
            ),
            (&["--lock-ttl-ms", "50"][..], &[][..], "at least 100"),
        ] {
            let err = parse(args, env).err().unwrap_or_default();
            assert!(err.contains(needle), "{args:?} {env:?}: {err}");
        }
    }

    #[test]
    fn debug_hides_the_urls() {
        let config = parse(
            &[
                "--store",
                "postgres",
                "--postgres-url",
                "postgresql://u:s3cret@h/db",
            ],
            &[],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(!format!("{config:?}").contains("s3cret"));
    }

    #[test]
    fn debug_hides_the_redis_url() {
        let config =
            parse(&["--redis-url", "redis://:hunter2@h/"], &[]).unwrap_or_else(|e| panic!("{e}"));
        assert!(!format!("{config:?}").contains("hunter2"));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "a panic is how a test fails")]
mod exporter_tests {
    use super::*;

    /// The samples' names a `# TYPE <name> <type>` line stands for.
    fn carries(sample: &str, name: &str, kind: &str) -> bool {
        let suffixes: &[&str] = match kind {
            "histogram" => &["_bucket", "_sum", "_count"],
            "summary" => &["", "_sum", "_count"],
            _ => &[""],
        };
        suffixes.iter().any(|suffix| {
            sample
                .strip_prefix(name)
                .and_then(|rest| rest.strip_prefix(suffix))
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
    }

    /// Issue 47: metrics-exporter-prometheus 0.17 wrote `# TYPE dlock_acquire_duration
    /// histogram` above samples named `dlock_acquire_duration_seconds_…`, so Prometheus typed
    /// no series. Every `# TYPE` line of the service's exporter, over dlock's metrics (those a
    /// client registers at build, which cover every kind: counter, gauge, histogram), names a
    /// series its samples carry.
    #[tokio::test]
    async fn every_type_line_names_a_series_its_samples_carry() {
        let recorder = prometheus_exporter().unwrap().build_recorder();
        let handle = recorder.handle();
        let client = metrics::with_local_recorder(&recorder, || {
            Client::builder("redis://127.0.0.1:1/").build().unwrap()
        });
        let text = handle.render();
        let types: Vec<(&str, &str)> = text
            .lines()
            .filter_map(|line| line.strip_prefix("# TYPE "))
            .filter_map(|rest| rest.split_once(' '))
            .collect();
        for kind in ["counter", "gauge", "histogram"] {
            assert!(
                types.iter().any(|(_, k)| *k == kind),
                "no {kind} in:\n{text}"
            );
        }
        for (name, kind) in types {
            assert!(
                text.lines()
                    .filter(|line| !line.starts_with('#'))
                    .any(|sample| carries(sample, name, kind)),
                "`# TYPE {name} {kind}` names no series of its samples:\n{text}"
            );
        }
        assert!(
            text.contains("# TYPE dlock_acquire_duration_seconds histogram"),
            "{text}"
        );
        drop(client);
    }
}
