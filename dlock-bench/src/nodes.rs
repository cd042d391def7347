//! The servers a scale workload (W8, Cluster) runs on: one redis-server, or the masters of a Redis
//! Cluster. Each node is read on its own (a [`Control`] per node: `INFO commandstats`/`cpu`,
//! pub/sub channels, `SCAN`, `used_memory`), because the Cluster rows are about how the load
//! spreads over the masters; the whole deployment's figures are their sums.
//!
//! A child process is given the deployment as one `--url` value: the nodes' URLs joined by
//! commas ([`Nodes::arg`], [`Nodes::parse`]); more than one URL means a cluster.

use std::future::Future;
use std::time::{Duration, Instant};

use dlock_core::Client;
use serde::{Deserialize, Serialize};

use crate::control::{Control, info_field};
use crate::redis_stats::{PerCommand, Snapshot, WindowDelta};
use crate::rt::{BoxError, elapsed_ns};
use crate::stats::float;

/// The key prefix of dlock's fence counters (`<prefix>fence:{<tag>}`, one per cluster slot, no
/// expiry: the only keys a finished workload is meant to leave).
const FENCE_COUNTER_PREFIX: &str = "dlock:fence:{";
/// Keys a `SCAN` call asks for at a time.
const SCAN_COUNT: u64 = 1_000;
/// Leaked keys named in the report (the rest are only counted).
const EXAMPLES: usize = 5;

/// One redis-server, or the masters of a cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Nodes {
    urls: Vec<String>,
}

impl Nodes {
    /// One server at `url`.
    pub(crate) fn single(url: &str) -> Nodes {
        Nodes {
            urls: vec![url.to_owned()],
        }
    }

    /// The masters of a cluster.
    pub(crate) fn cluster(urls: Vec<String>) -> Nodes {
        Nodes { urls }
    }

    /// Whether this is a cluster (more than one node).
    pub(crate) fn is_cluster(&self) -> bool {
        self.urls.len() > 1
    }

    /// The nodes' URLs.
    pub(crate) fn urls(&self) -> &[String] {
        &self.urls
    }

    /// The `--url` value of a child process: the URLs joined by commas.
    pub(crate) fn arg(&self) -> String {
        self.urls.join(",")
    }

    /// The deployment a child was given ([`Nodes::arg`]).
    pub(crate) fn parse(arg: &str) -> Nodes {
        Nodes {
            urls: arg.split(',').map(str::to_owned).collect(),
        }
    }

    /// A dlock client with default options for this deployment (no I/O until first used).
    pub(crate) fn client(&self) -> Result<Client, BoxError> {
        let builder = if self.is_cluster() {
            Client::cluster_builder(self.urls.iter().map(String::as_str))
        } else {
            Client::builder(self.urls.first().map_or("", String::as_str))
        };
        builder
            .build()
            .map_err(|e| format!("cannot build the dlock client: {e}").into())
    }

    /// A control connection to every node, each after a `FLUSHALL`.
    pub(crate) async fn fresh(&self) -> Result<Vec<Control>, BoxError> {
        let mut controls = Vec::with_capacity(self.urls.len());
        for url in &self.urls {
            controls.push(Control::fresh(url).await?);
        }
        Ok(controls)
    }

    /// A control connection to every node.
    pub(crate) async fn connect(&self) -> Result<Vec<Control>, BoxError> {
        let mut controls = Vec::with_capacity(self.urls.len());
        for url in &self.urls {
            controls.push(Control::connect(url).await?);
        }
        Ok(controls)
    }
}

/// The counters of every node at one instant.
pub(crate) async fn snapshots(controls: &mut [Control]) -> Result<Vec<Snapshot>, BoxError> {
    let mut all = Vec::with_capacity(controls.len());
    for control in controls {
        all.push(Snapshot::take(control).await?);
    }
    Ok(all)
}

/// What every node did since `before` (one delta per node, in node order).
pub(crate) async fn deltas(
    before: &[Snapshot],
    controls: &mut [Control],
) -> Result<Vec<WindowDelta>, BoxError> {
    let mut all = Vec::with_capacity(controls.len());
    for (snapshot, control) in before.iter().zip(controls) {
        all.push(snapshot.delta(control).await?);
    }
    Ok(all)
}

/// Runs `work` as a measured window on every node (as [`crate::redis_stats::measure`] on one).
pub(crate) async fn measure_nodes<T>(
    controls: &mut [Control],
    work: impl Future<Output = Result<T, BoxError>>,
) -> Result<(T, u64, Vec<WindowDelta>), BoxError> {
    let before = snapshots(controls).await?;
    let start = Instant::now();
    let out = work.await?;
    let window_ns = elapsed_ns(start);
    Ok((out, window_ns, deltas(&before, controls).await?))
}

/// The whole deployment's window: the nodes' commands, server time and redis-server CPU summed.
/// The client's own figures (CPU, allocations) are those of the first node's window: every
/// node's snapshot reads the same process.
pub(crate) fn sum(deltas: &[WindowDelta]) -> WindowDelta {
    let mut total = deltas.first().cloned().unwrap_or_default();
    for delta in deltas.iter().skip(1) {
        add(&mut total.commands, &delta.commands);
        add(&mut total.usec, &delta.usec);
        total.server_cpu_us += delta.server_cpu_us;
    }
    total
}

fn add(into: &mut PerCommand, from: &PerCommand) {
    for (name, value) in &from.0 {
        *into.0.entry(name.clone()).or_insert(0) += value;
    }
}

/// What one node did in a window: its commands (every call, Lua-internal ones included) and its
/// redis-server CPU, and the share of that CPU it spends when idle (its timers; a cluster node
/// also its cluster bus) over as long a span.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct NodeLoad {
    pub(crate) url: String,
    pub(crate) commands: u64,
    pub(crate) server_cpu_us: u64,
    pub(crate) idle_cpu_us: u64,
}

impl NodeLoad {
    /// The window's redis-server CPU less the idle share: what the workload cost, µs.
    pub(crate) fn busy_cpu_us(&self) -> u64 {
        self.server_cpu_us.saturating_sub(self.idle_cpu_us)
    }
}

/// Every node's load in a window of `window_ns`, in node order; `idle_us_per_s` is each node's
/// idle CPU rate ([`idle_cpu_us_per_s`]).
pub(crate) fn loads(
    nodes: &Nodes,
    deltas: &[WindowDelta],
    idle_us_per_s: &[f64],
    window_ns: u64,
) -> Vec<NodeLoad> {
    nodes
        .urls()
        .iter()
        .zip(deltas)
        .zip(idle_us_per_s)
        .map(|((url, d), &idle)| NodeLoad {
            url: url.clone(),
            commands: d.commands.total(),
            server_cpu_us: d.server_cpu_us,
            idle_cpu_us: idle_share(idle, window_ns),
        })
        .collect()
}

/// `idle_us_per_s` over `window_ns`, µs (rounded; 0 for a negative or NaN rate).
fn idle_share(idle_us_per_s: f64, window_ns: u64) -> u64 {
    let us = idle_us_per_s * float(window_ns) / 1e9;
    // Rounded CPU µs of a window of seconds: far below 2^53, and clamped at 0.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let rounded = us.max(0.0).round() as u64;
    rounded
}

/// Every node's redis-server CPU per second while nothing is sent (its timers, `INFO` itself),
/// measured together over `span`, µs/s.
pub(crate) async fn idle_cpu_us_per_s(
    controls: &mut [Control],
    span: Duration,
) -> Result<Vec<f64>, BoxError> {
    let before = snapshots(controls).await?;
    let start = Instant::now();
    tokio::time::sleep(span).await;
    let window = deltas(&before, controls).await?;
    let seconds = start.elapsed().as_secs_f64();
    Ok(window
        .iter()
        .map(|d| float(d.server_cpu_us) / seconds)
        .collect())
}

/// `max / min − 1` of `values`, in percent: how far apart the busiest and the idlest node are
/// (0 for one node; NaN when one node did nothing).
pub(crate) fn spread_pct(values: impl IntoIterator<Item = u64>) -> f64 {
    let values: Vec<u64> = values.into_iter().collect();
    let (Some(&min), Some(&max)) = (values.iter().min(), values.iter().max()) else {
        return f64::NAN;
    };
    (crate::stats::ratio(max, min) - 1.0) * 100.0
}

/// Pub/sub channels on every node right now: `pubsub_channels` plus the shard channels
/// (`INFO stats`; a cluster's dlock uses `SSUBSCRIBE`), summed.
pub(crate) async fn channels(controls: &mut [Control]) -> Result<u64, BoxError> {
    let mut total = 0;
    for control in controls {
        let text = control.info(&["stats"]).await?;
        // Redis 7.0 and 7.2 name the shard channels `pubsubshard_channels`, later ones
        // `pubsub_shardchannels`.
        for field in [
            "pubsub_channels",
            "pubsubshard_channels",
            "pubsub_shardchannels",
        ] {
            total += info_field(&text, field)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    Ok(total)
}

/// `used_memory` of every node, summed (bytes).
pub(crate) async fn used_memory(controls: &mut [Control]) -> Result<u64, BoxError> {
    let mut total = 0;
    for control in controls {
        total += control.used_memory().await?;
    }
    Ok(total)
}

/// What `SCAN` finds on every node: dlock's fence counters, and every other key (a leak, once a
/// workload has released all its locks).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Census {
    pub(crate) fence_counters: u64,
    pub(crate) others: u64,
    /// The first few other keys.
    pub(crate) examples: Vec<String>,
}

impl Census {
    /// Counts `key`.
    pub(crate) fn add(&mut self, key: &str) {
        if is_fence_counter(key) {
            self.fence_counters += 1;
        } else {
            self.others += 1;
            if self.examples.len() < EXAMPLES {
                self.examples.push(key.to_owned());
            }
        }
    }
}

/// Whether `key` is one of dlock's per-slot fence counters (default prefix).
pub(crate) fn is_fence_counter(key: &str) -> bool {
    key.starts_with(FENCE_COUNTER_PREFIX) && key.ends_with('}')
}

/// Every key of every node, classified (`SCAN`, [`SCAN_COUNT`] at a time).
pub(crate) async fn census(controls: &mut [Control]) -> Result<Census, BoxError> {
    let mut census = Census::default();
    for control in controls {
        let mut cursor = 0u64;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("COUNT")
                .arg(SCAN_COUNT)
                .query_async(control.conn())
                .await?;
            keys.iter().for_each(|key| census.add(key));
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    Ok(census)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_travels_as_one_argument() {
        let cluster = Nodes::cluster(vec!["redis://a:1/".into(), "redis://b:2/".into()]);
        assert!(cluster.is_cluster());
        assert_eq!(Nodes::parse(&cluster.arg()), cluster);
        let single = Nodes::single("redis://a:1/");
        assert!(!single.is_cluster());
        assert_eq!(Nodes::parse(&single.arg()), single);
    }

    #[test]
    fn census_tells_fence_counters_from_leaks() {
        let mut census = Census::default();
        for key in [
            "dlock:fence:{abc}",
            "dlock:fence:{x}",
            "dlock:{w8:1}:queue",
            "dlock:{w8:1}",
        ] {
            census.add(key);
        }
        assert_eq!((census.fence_counters, census.others), (2, 2));
        assert_eq!(census.examples, ["dlock:{w8:1}:queue", "dlock:{w8:1}"]);
        for i in 0..10 {
            census.add(&format!("leak{i}"));
        }
        assert_eq!(census.examples.len(), EXAMPLES);
        assert!(!is_fence_counter("dlock:fence:{x"));
    }

    #[test]
    fn idle_share_scales_with_the_window() {
        assert_eq!(idle_share(2_000.0, 500_000_000), 1_000);
        assert_eq!(idle_share(-1.0, 1_000_000_000), 0);
        assert_eq!(idle_share(f64::NAN, 1_000_000_000), 0);
        let load = NodeLoad {
            url: "a".into(),
            commands: 1,
            server_cpu_us: 900,
            idle_cpu_us: 1_000,
        };
        assert_eq!(load.busy_cpu_us(), 0);
    }

    #[test]
    fn spread_is_max_over_min() {
        assert!((spread_pct([100, 110, 105]) - 10.0).abs() < 1e-9);
        assert!(spread_pct([7]).abs() < 1e-9);
        assert!(spread_pct([0, 5]).is_nan());
        assert!(spread_pct([]).is_nan());
    }

    #[test]
    fn sums_nodes_and_keeps_the_clients_figures_once() {
        let node = |set: u64, cpu: u64| {
            let mut d = WindowDelta {
                server_cpu_us: cpu,
                client_cpu_us: 50,
                ..WindowDelta::default()
            };
            d.commands.0.insert("set".into(), set);
            d
        };
        let total = sum(&[node(3, 10), node(4, 20), node(5, 30)]);
        assert_eq!(total.commands.get("set"), 12);
        assert_eq!(total.server_cpu_us, 60);
        assert_eq!(total.client_cpu_us, 50);
        assert_eq!(sum(&[]).server_cpu_us, 0);
    }
}
