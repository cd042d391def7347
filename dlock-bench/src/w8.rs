//! W8: many contended locks (issue #29). 10,000 distinct names (100,000 with `--scale`), two
//! tasks contending on each, spread over 4 worker processes (`dlock-bench w8-worker`), each with
//! two dlock `Client`s (multi-thread runtime, 2 worker threads).
//!
//! * **Names.** Name `i` is `w8:<i>`; dlock itself wraps it in a hash tag (`dlock:{w8:<i>}`: a
//!   lock name may not hold braces), so on a cluster the names spread over every slot.
//! * **Two tasks per name, on two clients:** the tasks of name `i` run in process `i mod P`
//!   ([`process_of`]), one on each of its two clients, so every hand-off goes from one client
//!   to the other through Redis's pub/sub (a client's wake channel), and every process holds
//!   `2 × names / P` tasks. (A first version put the two tasks in two processes; once a worker
//!   had to bound its tasks in flight, see below, the processes drifted apart and only 8 % of
//!   the acquisitions found the name held.)
//! * **Each task** makes [`W8_ROUNDS`] (2) acquisitions: blocking acquire (30 s) → hold 1 ms →
//!   release. With two tasks of two rounds, a name is taken 4 times and changes hands up to 3
//!   times. The hold is a `tokio::time::sleep` (W3 blocks a thread for its pause instead: with
//!   thousands of holders at once, a blocking pause would measure Tokio's blocking pool, not
//!   the lock).
//! * **Start.** Every worker builds its locks and warms up (two local tasks contending on
//!   `w8:warm:<process>`: scripts loaded, the wake-channel path taken) and prints `READY`; the
//!   parent then sends `GO <instant>` (CLOCK_MONOTONIC, 200 ms ahead, comparable across the
//!   processes of this machine), and every task of every worker starts at that instant (with
//!   1 ms holds, a start on `GO` itself let one process finish a name before the other had
//!   spawned its task: 39 % of acquisitions waited in a first run instead of ~75 %). Each
//!   worker runs at most [`TASKS_IN_FLIGHT`] tasks at once, the others waiting their turn in
//!   name order, so the two tasks of a name start together: one of each pair waits, and every
//!   waiting client subscribes to its wake channel of that name.
//! * **End.** Each worker prints `DONE` once its tasks are over and waits for `STOP` before it
//!   reports, so the parent looks at the server while every client is still connected.
//!
//! The parent measures the window from `GO` until the last `DONE` and the channels have drained,
//! on every node ([`crate::nodes`]): commands per acquisition (`SUBSCRIBE`/`UNSUBSCRIBE`, and
//! `SSUBSCRIBE`/`SUNSUBSCRIBE` on a cluster), redis-server CPU, and the pub/sub channels on the
//! server (`pubsub_channels` + `pubsub_shardchannels`, sampled every 20 ms, the maximum kept)
//! against the design bound: a client subscribes to a lock's wake channel only while it has a
//! waiter on that lock, so at most (clients contending per lock = 2) × (locks) channels. Then,
//! with the clients still connected: the channels left (0 wanted), every key (`SCAN`: only the
//! per-slot fence counters may remain), and the `used_memory` delta from before `GO`.
//!
//! From the merged events ([`handoffs`]): an acquisition *waited* when its task asked for the
//! lock before the previous holder of the name released it; its hand-off gap is the time from
//! that release to its acquire returning.

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dlock_core::{Client, Mutex};
use serde::{Deserialize, Serialize};

use crate::child::{Child, GO, READY, STOP, args, print_result, wait_for_line};
use crate::cli::ChildArgs;
use crate::dlock::{Dlock, mutex_options};
use crate::nodes::{
    Census, NodeLoad, Nodes, census, channels, deltas, idle_cpu_us_per_s, loads, snapshots, sum,
    used_memory,
};
use crate::redis_stats::{PerCommand, PerOp};
use crate::report::{Check, Entry, Section, Target, checked};
use crate::rt::{
    BoxError, current_thread_runtime, elapsed_ns, monotonic_ns, multi_thread_runtime,
    process_cpu_us,
};
use crate::spec::{Counts, W3_PAUSE, W8_ROUNDS};
use crate::stats::{count, float, ns_to_s, p50_p99, per_second, percent, ratio};
use crate::subject::Subject;
use crate::subjects::Setting;
use crate::table::int;

/// The line a worker prints when its tasks are over.
const DONE: &str = "DONE";
/// How often the parent samples the server's pub/sub channels during the window.
const SAMPLE_EVERY: Duration = Duration::from_millis(20);
/// How long the parent waits, after the last `DONE`, for the channels to drain (the last
/// waiter's unsubscribe runs in the background).
const DRAIN_LIMIT: Duration = Duration::from_secs(2);
/// Tasks a worker runs at once (the others wait their turn, in name order). All 200,000 tasks
/// of the scale run started at once offered ~11 s of Redis work in one burst on this 2-core
/// machine: two thirds of the requests outlived the 2 s command timeout (issue #29's first
/// scale run). A service bounds its concurrent requests; 2,500 per process keep Redis busy
/// with requests that wait ~0.1 s at most.
const TASKS_IN_FLIGHT: usize = 2_500;

/// How far after the parent sends `GO <instant>` every worker's tasks start, together.
const START_DELAY: Duration = Duration::from_millis(200);
/// How long each node's idle CPU is measured before the workers start.
pub(crate) const IDLE_SPAN: Duration = Duration::from_secs(1);
/// Warm-up acquisitions of each of the two warm-up tasks of a worker.
const WARMUP_ROUNDS: u32 = 3;
/// Contending tasks per name.
const TASKS_PER_NAME: u64 = 2;

/// The lock name of name number `i`.
fn name(i: u64) -> String {
    format!("w8:{i}")
}

/// The process of the two tasks of name `i`, out of `processes` (at least 1): `i mod P`.
pub(crate) fn process_of(i: u64, processes: u32) -> u32 {
    let p = u64::from(processes.max(1));
    // Below `processes`: the cast cannot truncate.
    #[allow(clippy::cast_possible_truncation)]
    let process = (i % p) as u32;
    process
}

/// One acquisition: `(name, side, t_call, t_acq, t_rel)`: name number, which of its two tasks
/// (0, 1), and CLOCK_MONOTONIC ns right before acquire was called, right after it returned, and
/// right before release. A tuple, so that 100,000 of them make a compact JSON line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct W8Event(
    pub(crate) u32,
    pub(crate) u8,
    pub(crate) u64,
    pub(crate) u64,
    pub(crate) u64,
);

/// What the merged events say.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Handoffs {
    pub(crate) acquisitions: u64,
    /// Acquisitions whose task asked while another task held the name: they waited.
    pub(crate) waited: u64,
    /// Acquisitions that returned before the previous holder released: mutual exclusion broken.
    pub(crate) overlaps: u64,
    /// Release of the previous holder → acquire returning, over the acquisitions that waited, µs.
    pub(crate) gap_p50_us: f64,
    pub(crate) gap_p99_us: f64,
    pub(crate) gap_max_us: f64,
}

/// Sorts `events` by name and acquire time and computes the hand-off figures.
pub(crate) fn handoffs(events: &mut [W8Event]) -> Handoffs {
    events.sort_unstable_by_key(|e| (e.0, e.3, e.4, e.1));
    let mut gaps = Vec::new();
    let mut overlaps = 0;
    for pair in events.windows(2) {
        let [prev, next] = pair else { continue };
        if prev.0 != next.0 {
            continue;
        }
        if next.3 < prev.4 {
            overlaps += 1;
        }
        if next.2 < prev.4 {
            gaps.push(next.3.saturating_sub(prev.4));
        }
    }
    let gap_max_us = gaps.iter().max().map_or(f64::NAN, |&g| float(g) / 1e3);
    let (gap_p50_us, gap_p99_us) = p50_p99(&mut gaps, |ns| float(ns) / 1e3);
    Handoffs {
        acquisitions: count(events.len()),
        waited: count(gaps.len()),
        overlaps,
        gap_p50_us,
        gap_p99_us,
        gap_max_us,
    }
}

/// What one worker process reports.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct WorkerReport {
    /// CLOCK_MONOTONIC ns when its tasks started (after `GO`) and when the last one ended.
    start_ns: u64,
    end_ns: u64,
    events: Vec<W8Event>,
    /// Acquires that gave up after 30 s.
    timeouts: u64,
    /// Releases that found the lease gone.
    not_held_at_release: u64,
    /// Acquires and releases that failed (a request past the client's command timeout …), and the first
    /// error's text: counted, not fatal, so that the run shows what is left after them.
    errors: u64,
    first_error: Option<String>,
    /// CPU time of the process (every thread) from `GO` to `DONE`, µs.
    cpu_us: u64,
}

/// The W8 figures on one deployment.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct W8Result {
    pub(crate) cluster: bool,
    pub(crate) nodes: usize,
    pub(crate) names: u64,
    pub(crate) processes: u32,
    pub(crate) expected: u64,
    pub(crate) timeouts: u64,
    pub(crate) not_held_at_release: u64,
    /// Acquires and releases that failed with an error, and the first one's text.
    pub(crate) errors: u64,
    pub(crate) first_error: Option<String>,
    pub(crate) window_s: f64,
    pub(crate) acquisitions_per_s: f64,
    pub(crate) handoffs: Handoffs,
    /// Per acquisition: commands, round trips, server time and CPU (every node summed); the
    /// workers' CPU per acquisition beside it.
    pub(crate) per_acq: PerOp,
    pub(crate) client_cpu_us_per_acq: f64,
    /// `SUBSCRIBE` + `SSUBSCRIBE`, and `UNSUBSCRIBE` + `SUNSUBSCRIBE`, calls in the window.
    pub(crate) subscribes: u64,
    pub(crate) unsubscribes: u64,
    /// Server time in the (un)subscribe commands, µs (`usec` of `INFO commandstats`).
    pub(crate) pubsub_usec: u64,
    /// `PUBLISH` + `SPUBLISH` calls (inside the scripts): grants a release or an attempt handed
    /// to a queued waiter.
    pub(crate) grants_published: u64,
    /// Most pub/sub channels seen on the server (every node) in the window, in how many samples.
    pub(crate) channels_max: u64,
    pub(crate) channel_samples: u64,
    /// The design bound: clients contending per lock × locks.
    pub(crate) channels_bound: u64,
    /// Channels left once the workers were done (still connected), and how long the parent
    /// waited for them to drain (ms).
    pub(crate) channels_left: u64,
    pub(crate) drain_ms: u64,
    /// Fence counters before `GO` (the warm-ups'), and every key after.
    pub(crate) fence_counters_before: u64,
    pub(crate) keys_after: Census,
    /// `used_memory` (every node) before `GO` and after the run, clients still connected.
    pub(crate) memory_before: u64,
    pub(crate) memory_after: u64,
    pub(crate) loads: Vec<NodeLoad>,
    pub(crate) commands: PerCommand,
    /// Server time per command in the window (µs, every node).
    pub(crate) usec: PerCommand,
}

impl W8Result {
    /// The acquisitions that happened.
    pub(crate) fn acquisitions(&self) -> u64 {
        self.handoffs.acquisitions
    }

    /// `used_memory` after − before, bytes.
    pub(crate) fn memory_delta(&self) -> i64 {
        i64::try_from(self.memory_after).unwrap_or(i64::MAX)
            - i64::try_from(self.memory_before).unwrap_or(i64::MAX)
    }

    /// `used_memory` delta per fence counter the window made, bytes.
    pub(crate) fn memory_per_new_counter(&self) -> f64 {
        // Bytes, far below 2^53.
        #[allow(clippy::cast_precision_loss)]
        let delta = self.memory_delta() as f64;
        delta / float(self.new_fence_counters())
    }

    /// Fence counters the window made.
    pub(crate) fn new_fence_counters(&self) -> u64 {
        self.keys_after
            .fence_counters
            .saturating_sub(self.fence_counters_before)
    }
}

/// The W8 stage: W8 on the run's own server.
pub(crate) fn run(s: &Setting) -> Result<Entry, BoxError> {
    Entry::new("w8", run_on(&Nodes::single(&s.url), &s.counts)?)
}

/// W8 on `nodes`.
pub(crate) fn run_on(nodes: &Nodes, counts: &Counts) -> Result<W8Result, BoxError> {
    if counts.w8_processes < 2 {
        return Err("W8 needs at least 2 worker processes".into());
    }
    let runtime = current_thread_runtime()?;
    let mut controls = runtime.block_on(nodes.fresh())?;
    let idle = runtime.block_on(idle_cpu_us_per_s(&mut controls, IDLE_SPAN))?;
    let url = nodes.arg();
    let mut workers = (0..counts.w8_processes)
        .map(|p| {
            Child::spawn(&args(
                "w8-worker",
                &url,
                counts,
                &["--process", &p.to_string()],
            ))
        })
        .collect::<Result<Vec<_>, _>>()?;
    for worker in &mut workers {
        worker.wait_for(READY)?;
    }
    let fence_counters_before = runtime.block_on(census(&mut controls))?.fence_counters;
    let memory_before = runtime.block_on(used_memory(&mut controls))?;
    let before = runtime.block_on(snapshots(&mut controls))?;
    let window_start = Instant::now();
    let sampler = Sampler::start(nodes.clone());
    let go = format!("{GO} {}", monotonic_ns()? + millis_ns(START_DELAY));
    for worker in &mut workers {
        worker.send(&go)?;
    }
    for worker in &mut workers {
        worker.wait_for(DONE)?;
    }
    let (channels_max, channel_samples) = sampler.finish()?;
    let (channels_left, drain_ms) = runtime.block_on(drain(&mut controls))?;
    let window = runtime.block_on(deltas(&before, &mut controls))?;
    let window_ns = elapsed_ns(window_start);
    let keys_after = runtime.block_on(census(&mut controls))?;
    let memory_after = runtime.block_on(used_memory(&mut controls))?;
    for worker in &mut workers {
        worker.send(STOP)?;
    }
    let reports = workers
        .into_iter()
        .map(Child::result::<WorkerReport>)
        .collect::<Result<Vec<_>, _>>()?;

    let total = sum(&window);
    let calls = |names: [&str; 2]| names.iter().map(|n| total.commands.get(n)).sum::<u64>();
    let start = reports.iter().map(|r| r.start_ns).min().unwrap_or(0);
    let end = reports.iter().map(|r| r.end_ns).max().unwrap_or(0);
    let worker_sum = |f: fn(&WorkerReport) -> u64| reports.iter().map(f).sum::<u64>();
    let (timeouts, not_held_at_release) = (
        worker_sum(|r| r.timeouts),
        worker_sum(|r| r.not_held_at_release),
    );
    let cpu_us = worker_sum(|r| r.cpu_us);
    let errors = worker_sum(|r| r.errors);
    let first_error = reports.iter().find_map(|r| r.first_error.clone());
    let mut events: Vec<W8Event> = reports.into_iter().flat_map(|r| r.events).collect();
    let handoffs = handoffs(&mut events);
    let acquisitions = handoffs.acquisitions;
    let own_plain = <Dlock as Subject>::OWN_PLAIN.contended();
    Ok(W8Result {
        cluster: nodes.is_cluster(),
        nodes: nodes.urls().len(),
        names: counts.w8_names,
        processes: counts.w8_processes,
        expected: counts.w8_names * TASKS_PER_NAME * u64::from(W8_ROUNDS),
        timeouts,
        not_held_at_release,
        errors,
        first_error,
        window_s: ns_to_s(end.saturating_sub(start)),
        acquisitions_per_s: per_second(acquisitions, end.saturating_sub(start)),
        handoffs,
        per_acq: PerOp::of(&total, acquisitions, own_plain).server_side(),
        client_cpu_us_per_acq: ratio(cpu_us, acquisitions),
        subscribes: calls(["subscribe", "ssubscribe"]),
        pubsub_usec: ["subscribe", "ssubscribe", "unsubscribe", "sunsubscribe"]
            .iter()
            .map(|n| total.usec.get(n))
            .sum(),
        unsubscribes: calls(["unsubscribe", "sunsubscribe"]),
        grants_published: calls(["publish", "spublish"]),
        channels_max,
        channel_samples,
        channels_bound: counts.w8_names * TASKS_PER_NAME,
        channels_left,
        drain_ms,
        fence_counters_before,
        keys_after,
        memory_before,
        memory_after,
        loads: loads(nodes, &window, &idle, window_ns),
        commands: total.commands,
        usec: total.usec,
    })
}

/// Waits (up to [`DRAIN_LIMIT`]) until no pub/sub channel is left; returns those left and the
/// time waited (ms).
async fn drain(controls: &mut [crate::control::Control]) -> Result<(u64, u64), BoxError> {
    let start = Instant::now();
    loop {
        let left = channels(controls).await?;
        if left == 0 || start.elapsed() >= DRAIN_LIMIT {
            return Ok((left, crate::stats::millis(start.elapsed())));
        }
        tokio::time::sleep(SAMPLE_EVERY).await;
    }
}

/// A thread sampling the server's pub/sub channels until told to stop; stops on drop too.
struct Sampler {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<(u64, u64), BoxError>>>,
}

impl Sampler {
    fn start(nodes: Nodes) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || -> Result<(u64, u64), BoxError> {
            current_thread_runtime()?.block_on(async {
                let mut controls = nodes.connect().await?;
                let (mut max, mut samples) = (0, 0);
                while !stopped.load(Ordering::Relaxed) {
                    // A sample whose `INFO` times out (the server is swamped by the start
                    // burst) is skipped, not fatal.
                    if let Ok(n) = channels(&mut controls).await {
                        max = max.max(n);
                        samples += 1;
                    }
                    tokio::time::sleep(SAMPLE_EVERY).await;
                }
                Ok((max, samples))
            })
        });
        Sampler {
            stop,
            thread: Some(thread),
        }
    }

    /// The most channels seen, and in how many samples.
    fn finish(mut self) -> Result<(u64, u64), BoxError> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err("the channel sampler panicked".into()),
            None => Err("the channel sampler was already finished".into()),
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Entry point of a worker process, `dlock-bench w8-worker --url URL[,URL…] --process P`.
pub(crate) fn child_main(args: &ChildArgs) -> Result<(), BoxError> {
    let nodes = Nodes::parse(&args.url);
    let (process, counts) = (args.process()?, &args.counts);
    let runtime = multi_thread_runtime()?;
    let locks = runtime.block_on(async {
        let clients = [nodes.client()?, nodes.client()?];
        set_up(&clients, process, counts).await
    })?;
    say(READY)?;
    let start_ns = wait_for_start()?;
    let cpu_before = process_cpu_us()?;
    let mut report = runtime.block_on(run_worker(locks, start_ns))?;
    report.cpu_us = process_cpu_us()?.saturating_sub(cpu_before);
    say(DONE)?;
    wait_for_line(STOP)?;
    print_result(&report)
}

/// Blocks until the parent sends `GO <instant>`; returns the instant (CLOCK_MONOTONIC ns).
fn wait_for_start() -> Result<u64, BoxError> {
    let mut line = String::new();
    loop {
        line.clear();
        if std::io::stdin().read_line(&mut line)? == 0 {
            return Err(format!("the parent closed stdin before sending {GO}").into());
        }
        if let Some(instant) = line.trim_end().strip_prefix(GO) {
            return Ok(instant.trim().parse()?);
        }
    }
}

/// `d` in nanoseconds, saturating.
fn millis_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Writes one line for the parent, at once.
fn say(line: &str) -> Result<(), BoxError> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")?;
    Ok(out.flush()?)
}

/// A task's lock: its handle, name number and side.
type TaskLock = (Mutex, u32, u8);

/// Warms the clients up and builds the handle of every task of this process: the two tasks of
/// a name next to each other, side 0 on the first client and side 1 on the second.
async fn set_up(
    clients: &[Client; 2],
    process: u32,
    counts: &Counts,
) -> Result<Vec<TaskLock>, BoxError> {
    let options = mutex_options(false)?;
    let warm = format!("w8:warm:{process}");
    let a = clients[0].mutex_with(&warm, options.clone())?;
    let b = clients[1].mutex_with(&warm, options.clone())?;
    let warmers = [
        tokio::spawn(run_task((a, 0, 0), WARMUP_ROUNDS)),
        tokio::spawn(run_task((b, 0, 1), WARMUP_ROUNDS)),
    ];
    for warmer in warmers {
        warmer.await??;
    }
    let mut locks = Vec::new();
    for i in 0..counts.w8_names {
        if process_of(i, counts.w8_processes) == process {
            for (side, client) in (0u8..).zip(clients) {
                let lock = client.mutex_with(&name(i), options.clone())?;
                locks.push((lock, u32::try_from(i)?, side));
            }
        }
    }
    Ok(locks)
}

/// Runs every task of this process, all starting at `start_ns` (CLOCK_MONOTONIC), the instant
/// every worker starts at: both tasks of a name then ask for it at once, whichever process
/// spawned its tasks first.
async fn run_worker(locks: Vec<TaskLock>, start_ns: u64) -> Result<WorkerReport, BoxError> {
    let wait = Duration::from_nanos(start_ns.saturating_sub(monotonic_ns()?));
    let start = tokio::time::Instant::now() + wait;
    // Tasks in flight, in name order (tokio's semaphore is fair, and `locks` is in name order):
    // every worker works through the names at about the same pace, so both tasks of a name
    // still ask for it at about the same time.
    let in_flight = Arc::new(tokio::sync::Semaphore::new(TASKS_IN_FLIGHT));
    let handles: Vec<_> = locks
        .into_iter()
        .map(|lock| {
            let in_flight = in_flight.clone();
            tokio::spawn(async move {
                tokio::time::sleep_until(start).await;
                let _permit = in_flight.acquire_owned().await?;
                run_task(lock, W8_ROUNDS).await
            })
        })
        .collect();
    let mut report = WorkerReport {
        start_ns,
        ..WorkerReport::default()
    };
    for handle in handles {
        let task = handle.await??;
        report.events.extend(task.events);
        report.timeouts += task.timeouts;
        report.not_held_at_release += task.not_held_at_release;
        report.errors += task.errors;
        if report.first_error.is_none() {
            report.first_error = task.first_error;
        }
    }
    report.end_ns = monotonic_ns()?;
    Ok(report)
}

/// One task: `rounds` times acquire (30 s), hold 1 ms, release.
async fn run_task((lock, name, side): TaskLock, rounds: u32) -> Result<WorkerReport, BoxError> {
    let mut tally = WorkerReport::default();
    for _ in 0..rounds {
        let t_call = monotonic_ns()?;
        let guard = match <Dlock as Subject>::acquire(&lock).await {
            Ok(Some(guard)) => guard,
            Ok(None) => {
                tally.timeouts += 1;
                continue;
            }
            Err(e) => {
                tally.errors += 1;
                tally.first_error.get_or_insert_with(|| e.to_string());
                continue;
            }
        };
        let t_acq = monotonic_ns()?;
        tokio::time::sleep(W3_PAUSE).await;
        let t_rel = monotonic_ns()?;
        match <Dlock as Subject>::release(guard).await {
            Ok(true) => {}
            Ok(false) => tally.not_held_at_release += 1,
            Err(e) => {
                tally.errors += 1;
                tally.first_error.get_or_insert_with(|| e.to_string());
            }
        }
        tally.events.push(W8Event(name, side, t_call, t_acq, t_rel));
    }
    Ok(tally)
}

/// Issue #29's W8 targets.
const CHECKS: [Check<W8Result>; 5] = [
    ("W8 acquisitions (no timeouts, no errors)", "all", |w| {
        let (got, expected) = (w.acquisitions(), w.expected);
        let failed = w.timeouts + w.errors;
        (
            format!("{got} of {expected}"),
            got == expected && failed == 0,
        )
    }),
    ("W8 overlaps", "0", |w| {
        let overlaps = w.handoffs.overlaps;
        (overlaps.to_string(), overlaps == 0)
    }),
    (
        "W8 pub/sub channels, most seen",
        "≤ 2 × names (design bound)",
        |w| {
            let (max, bound) = (w.channels_max, w.channels_bound);
            (format!("{max} (bound {bound})"), max <= bound)
        },
    ),
    ("W8 pub/sub channels left after the run", "0", |w| {
        (w.channels_left.to_string(), w.channels_left == 0)
    }),
    ("W8 keys left other than fence counters", "0", |w| {
        let others = w.keys_after.others;
        (others.to_string(), others == 0)
    }),
];

impl W8Result {
    /// Where it ran, for headings.
    pub(crate) fn deployment(&self) -> String {
        if self.cluster {
            format!("cluster of {} masters", self.nodes)
        } else {
            "single server".to_owned()
        }
    }
}

impl Section for W8Result {
    fn details(&self, out: &mut String) {
        let h = &self.handoffs;
        let acq = self.acquisitions();
        let per = |n: u64| ratio(n, acq);
        let _ = writeln!(
            out,
            "### W8: {} contended locks, {} ({})\n",
            int(float(self.names)),
            self.processes,
            self.deployment()
        );
        let _ = writeln!(
            out,
            "{} names × 2 tasks (on the 2 clients of one of {} processes) × {W8_ROUNDS} \
             acquisitions (hold 1 ms). \
             {acq} acquisitions of {} in {:.2} s: **{} acquisitions/s**; timeouts {}; errors \
             {}{}; releases that found the lease gone {}; overlaps {}.  \nWaited (asked while the other task \
             held the name): {} ({:.1} %); hand-off gap (release → the waiter's acquire returns) \
             p50 {:.0} µs, **p99 {:.0} µs**, max {:.0} µs.\n",
            int(float(self.names)),
            self.processes,
            self.expected,
            self.window_s,
            int(self.acquisitions_per_s),
            self.timeouts,
            self.errors,
            self.first_error
                .as_ref()
                .map_or_else(String::new, |e| format!(" (first: `{e}`)")),
            self.not_held_at_release,
            h.overlaps,
            h.waited,
            percent(h.waited, acq),
            h.gap_p50_us,
            h.gap_p99_us,
            h.gap_max_us,
        );
        let p = &self.per_acq;
        let _ = writeln!(
            out,
            "Per acquisition: {:.2} commands, {:.2} round trips, redis-server CPU {:.1} µs, \
             workers' CPU {:.1} µs; (S)SUBSCRIBE {:.3}, (S)UNSUBSCRIBE {:.3} (per waiting \
             acquisition: {:.3} and {:.3}), {:.1} % of the server time in commands ({:.2} µs \
             per acquisition); grants published to a queued waiter: {} ({:.1} % of \
             the waits: the others found the lock free by the time their queued attempt ran).  \nPub/sub channels on the server: at most {} in {} \
             samples (every 20 ms) against the design bound of {} (2 contending clients × {} \
             locks): {:.2} of the bound, {:.2} per name; {} left {} ms after the last worker was \
             done.  \nAfterwards (`SCAN`, every node): {} fence counters ({} before `GO`, {} \
             made by the window), {} other keys{}; `used_memory` {:+} bytes ({:.0} bytes per \
             new fence counter).  \nCommands in the window: {}\n",
            p.commands,
            p.round_trips,
            p.server_cpu_us,
            self.client_cpu_us_per_acq,
            per(self.subscribes),
            per(self.unsubscribes),
            ratio(self.subscribes, h.waited),
            ratio(self.unsubscribes, h.waited),
            percent(self.pubsub_usec, self.usec.client_usec(&["exists"])),
            ratio(self.pubsub_usec, acq),
            self.grants_published,
            percent(self.grants_published, h.waited),
            self.channels_max,
            self.channel_samples,
            self.channels_bound,
            self.names,
            ratio(self.channels_max, self.channels_bound),
            ratio(self.channels_max, self.names),
            self.channels_left,
            self.drain_ms,
            self.keys_after.fence_counters,
            self.fence_counters_before,
            self.new_fence_counters(),
            self.keys_after.others,
            if self.keys_after.examples.is_empty() {
                String::new()
            } else {
                format!(" (e.g. {})", self.keys_after.examples.join(", "))
            },
            self.memory_delta(),
            self.memory_per_new_counter(),
            self.commands.summary(),
        );
    }

    fn targets(&self) -> Vec<Target> {
        checked(self, &CHECKS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_names_are_spread_evenly_over_the_processes() {
        for processes in [1, 2, 3, 4] {
            let mut names = vec![0u64; processes as usize];
            for i in 0..1_000 {
                let p = process_of(i, processes);
                assert!(p < processes);
                names[p as usize] += 1;
            }
            let (min, max) = (names.iter().min().unwrap(), names.iter().max().unwrap());
            assert!(max - min <= 1, "{names:?}");
        }
        assert_eq!(process_of(5, 4), 1);
        assert_eq!(process_of(7, 4), 3);
    }

    #[test]
    fn handoffs_count_waits_gaps_and_overlaps() {
        let mut events = vec![
            // Name 1: side 0 holds 0–1000; side 1 asked at 10, gets it at 1_300 (waited, gap
            // 300); side 0 asks again at 1_100, gets it at 2_500 after side 1's release at
            // 2_300 (waited, gap 200); side 1 asks at 3_000, after side 0's release at 2_900
            // (no wait).
            W8Event(1, 1, 10, 1_300, 2_300),
            W8Event(1, 0, 0, 5, 1_000),
            W8Event(1, 0, 1_100, 2_500, 2_900),
            W8Event(1, 1, 3_000, 3_010, 4_000),
            // Name 2: side 1's acquire returns before side 0 released: an overlap (gap 0).
            W8Event(2, 0, 0, 5, 1_000),
            W8Event(2, 1, 1, 900, 2_000),
        ];
        let h = handoffs(&mut events);
        assert_eq!(h.acquisitions, 6);
        assert_eq!(h.waited, 3);
        assert_eq!(h.overlaps, 1);
        // Gaps sorted: 0, 200, 300 ns.
        assert!((h.gap_p50_us - 0.2).abs() < 1e-9);
        assert!((h.gap_p99_us - 0.3).abs() < 1e-9);
        assert!((h.gap_max_us - 0.3).abs() < 1e-9);
        // Events of another name never count as a hand-off.
        let mut lone = vec![W8Event(1, 0, 0, 5, 1_000), W8Event(2, 1, 1, 10, 20)];
        let h = handoffs(&mut lone);
        assert_eq!((h.waited, h.overlaps), (0, 0));
        assert!(h.gap_p99_us.is_nan());
    }

    #[test]
    fn an_event_is_a_compact_json_array() {
        let json = serde_json::to_string(&W8Event(3, 1, 10, 20, 30)).unwrap();
        assert_eq!(json, "[3,1,10,20,30]");
    }
}
