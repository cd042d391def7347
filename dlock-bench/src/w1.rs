//! W1: uncontended latency. One task, one connection, sequential: warm-up 1,000 pairs on
//! `w1:0..999`, then 20,000 measured pairs on `w1:1000..20999`.
//!
//! Runtime: a current-thread Tokio runtime for both subjects (one task; the connection's driver
//! task runs on the same thread). Each subject gets a fresh runtime and connection after a
//! `FLUSHALL`.
//!
//! W1 1-CPU runs the same in a child process (`dlock-bench w1-pinned`) that pins itself to one CPU
//! before it starts any thread, while the parent pins every thread of redis-server to the same CPU.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::affinity::{PinnedProcess, pin_current_thread};
use crate::child::{Child, print_result};
use crate::redis_stats::{CommandStats, CommandUsec, Control};
use crate::rt::{BoxError, current_thread_runtime, elapsed_ns};
use crate::spec::{Counts, PINNED_CPU};
use crate::stats::{ns_to_us, p50_p99_us, per_second, ratio};
use crate::subject::{Kind, Subject};
use crate::window::{Snapshot, WindowDelta};

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
    /// Builds the result from per-pair latencies (ns), the window and its command delta.
    pub(crate) fn new(
        subject: Kind,
        latencies: &mut [u64],
        window_ns: u64,
        window: WindowDelta,
        own_plain: &[&str],
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

/// One pair workload measured for both subjects.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Subjects {
    pub(crate) floor: PairResult,
    pub(crate) dlock: PairResult,
}

/// Runs W1 for both subjects in this process (unpinned).
pub(crate) fn run_unpinned(url: &str, counts: &Counts) -> Result<Subjects, BoxError> {
    Ok(Subjects {
        floor: run_one(Kind::Floor, url, counts)?,
        dlock: run_one(Kind::Dlock, url, counts)?,
    })
}

/// Runs W1 1-CPU: pins redis-server (`server_pid`) to the pinned CPU, runs both subjects in a
/// child process pinned to it from its start, then unpins the server.
pub(crate) fn run_pinned(
    url: &str,
    server_pid: u32,
    counts: &Counts,
) -> Result<Subjects, BoxError> {
    let pinned = PinnedProcess::pin(server_pid, PINNED_CPU)?;
    eprintln!(
        "  redis-server: {} threads pinned to CPU {PINNED_CPU}",
        pinned.threads()
    );
    let mut args = vec!["w1-pinned".to_owned(), "--url".to_owned(), url.to_owned()];
    if counts.quick {
        args.push("--quick".to_owned());
    }
    let result = Child::spawn(&args)?.result();
    drop(pinned);
    result
}

/// The `w1-pinned` child: pins itself before anything else, then runs W1 for both subjects.
pub(crate) fn pinned_child(url: &str, counts: &Counts) -> Result<(), BoxError> {
    pin_current_thread(PINNED_CPU)?;
    let pair = run_unpinned(url, counts)?;
    print_result(&pair)
}

/// The `w1-one` subcommand: W1 for one subject, unpinned, for profiling.
pub(crate) fn one_child(kind: Kind, url: &str, counts: &Counts) -> Result<(), BoxError> {
    print_result(&run_one(kind, url, counts)?)
}

/// W1 for one subject, on a fresh current-thread runtime.
fn run_one(kind: Kind, url: &str, counts: &Counts) -> Result<PairResult, BoxError> {
    current_thread_runtime()?.block_on(measure(kind, url, counts))
}

async fn measure(kind: Kind, url: &str, counts: &Counts) -> Result<PairResult, BoxError> {
    let mut control = Control::connect(url).await?;
    control.flushall().await?;
    let subject = Subject::connect(kind, url).await?;
    for i in 0..counts.w1_warmup {
        subject.pair(&format!("w1:{i}")).await?;
    }
    let names: Vec<String> = (counts.w1_warmup..counts.w1_warmup + counts.w1_pairs)
        .map(|i| format!("w1:{i}"))
        .collect();
    let mut latencies = Vec::with_capacity(names.len());

    let before = Snapshot::take(&mut control).await?;
    let start = Instant::now();
    for name in &names {
        let t = Instant::now();
        subject.pair(name).await?;
        latencies.push(elapsed_ns(t));
    }
    let window = elapsed_ns(start);
    let delta = before.delta(&mut control).await?;
    Ok(PairResult::new(
        kind,
        &mut latencies,
        window,
        delta,
        subject.own_plain(),
    ))
}
