//! What the pair workloads (W1, W1 1-CPU, W2) share: the figures of one measured window for one
//! subject ([`PairResult`]), and the timed loop of sequential pairs.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::redis_stats::{CommandStats, CommandUsec};
use crate::rt::{BoxError, elapsed_ns};
use crate::stats::{ns_to_us, p50_p99_us, per_second, ratio};
use crate::subject::Subject;
use crate::subjects::Kind;
use crate::window::WindowDelta;

/// The measured window of a pair workload (W1, W2) for one subject.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct PairResult {
    pub(crate) subject: Kind,
    pub(crate) pairs: u64,
    pub(crate) elapsed_s: f64,
    pub(crate) pairs_per_s: f64,
    /// Latency of one pair (acquire + release), nearest rank.
    pub(crate) p50_us: f64,
    pub(crate) p99_us: f64,
    /// Every command Redis ran per pair, Lua-internal calls included.
    pub(crate) commands_per_pair: f64,
    /// Requests the client sent per pair (EVALSHA/EVAL and plain commands).
    pub(crate) round_trips_per_pair: f64,
    /// Server time per pair in the commands, µs: the scripts (inner commands included) and plain
    /// commands the client sent (`usec` of `INFO commandstats`).
    pub(crate) server_us_per_pair: f64,
    /// CPU time per pair of the whole redis-server process (`INFO cpu`: commands, parsing,
    /// networking), µs.
    pub(crate) server_cpu_us_per_pair: f64,
    /// CPU time per pair of the benchmark process (`getrusage`, every thread), µs.
    pub(crate) client_cpu_us_per_pair: f64,
    /// `INFO commandstats` delta of the window.
    pub(crate) commands: CommandStats,
    /// Server time per command in the window (µs; a script's includes its inner commands').
    pub(crate) usec: CommandUsec,
}

impl PairResult {
    /// Builds the result of `subject` from per-pair latencies (ns), the window's length and its
    /// counters; `own_plain` is the subject's [`Subject::OWN_PLAIN`].
    pub(crate) fn new(
        subject: Kind,
        own_plain: &[&str],
        latencies: &mut [u64],
        window_ns: u64,
        window: WindowDelta,
    ) -> PairResult {
        let own_plain_per_pair = u64::try_from(own_plain.len()).unwrap_or(0);
        let pairs = u64::try_from(latencies.len()).unwrap_or(u64::MAX);
        let (p50_us, p99_us) = p50_p99_us(latencies);
        let per_pair = |n: u64| ratio(n, pairs);
        PairResult {
            subject,
            pairs,
            elapsed_s: ns_to_us(window_ns) / 1e6,
            pairs_per_s: per_second(pairs, window_ns),
            p50_us,
            p99_us,
            commands_per_pair: per_pair(window.commands.total()),
            round_trips_per_pair: per_pair(window.commands.round_trips(own_plain_per_pair * pairs)),
            server_us_per_pair: per_pair(window.usec.client_usec(own_plain)),
            server_cpu_us_per_pair: per_pair(window.server_cpu_us),
            client_cpu_us_per_pair: per_pair(window.client_cpu_us),
            commands: window.commands,
            usec: window.usec,
        }
    }
}

/// The timed loop of the pair workloads: one pair per name (formatted before the window opens),
/// one after the other. Returns each pair's latency (ns) in `latencies`, which the caller
/// allocates beforehand so that no allocation of the benchmark's own falls inside the window.
pub(crate) async fn timed_pairs<S: Subject>(
    subject: &S,
    names: &[String],
    mut latencies: Vec<u64>,
) -> Result<Vec<u64>, BoxError> {
    for name in names {
        let t = Instant::now();
        subject.pair(name).await?;
        latencies.push(elapsed_ns(t));
    }
    Ok(latencies)
}

/// The names `{prefix}{i}` for `i` in `range`, and room for as many latencies: what
/// [`timed_pairs`] needs, made before the window opens.
pub(crate) fn names(prefix: &str, range: std::ops::Range<u64>) -> (Vec<String>, Vec<u64>) {
    let names: Vec<String> = range.map(|i| format!("{prefix}{i}")).collect();
    let latencies = Vec::with_capacity(names.len());
    (names, latencies)
}

/// The result of `kind` among `results`.
pub(crate) fn of(results: &[PairResult], kind: Kind) -> Option<&PairResult> {
    results.iter().find(|r| r.subject == kind)
}
