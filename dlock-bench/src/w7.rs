//! W7: deep queue (issue #29). 8 worker processes × 1,250 tasks (`--scale`; 8 × 125 in a full
//! run) wait on one lock, `w7:lock`, each acquiring it once for a 1 ms hold — twice over:
//!
//! 1. **The holder releases.** The parent takes the lock (a dlock `Client`, with a lease as long
//!    as the waiters wait: queueing 10,000 waiters took longer than the usual 10 s lease on the
//!    2-core development machine, see `fill_tenths_s`), the workers (`dlock-bench w7-worker waiters --process P`) start their
//!    tasks, and the parent watches the queue `<prefix>{w7:lock}:queue` fill: `LLEN` every 5 ms,
//!    a `LRANGE` snapshot every 100 ms (each must extend the one before: nobody leaves the queue
//!    while the lock is held). Once it holds every entry: the final snapshot, Redis memory, each
//!    worker's heap, then the release. The queue drains through hand-offs.
//! 2. **The holder dies.** A holder child process (`dlock-bench w7-worker holder`) takes the lock
//!    with a shorter lease (at least 3 s, and 10× the first scenario's fill time plus 2 s, so that
//!    the queue is full before the lease ends), the tasks queue behind it, and the parent
//!    SIGKILLs it. Expiry publishes nothing: every waiter's fallback timer, armed with the PTTL
//!    its queueing attempt saw, fires at the lease's end, and each re-ask runs `acquire.lua`,
//!    whose `LPOS queue entry` scans the queue (O(n)). What that burst costs is measured.
//!
//! Each task has its own lock handle, labelled `w7:<task>` (`MutexOptions::label`): dlock
//! writes the label at the end of the task's queue entry, which is how an entry is mapped to its
//! task (dlock does not expose owner tokens, the other unique part of an entry). Every grant here
//! comes through a script that issues a fence (a hand-off, or `acquire.lua` giving a freed lock
//! to the head of the queue), so the guard knows its fence without a round trip and without
//! `fenced()`: the waiters use dlock's default options, as W3's dlock subject. Each task records
//! `(task, fence, t_acq, t_rel)`.
//!
//! Figures, per scenario: FIFO inversions (grants by fence against the queue snapshot's order);
//! hand-off gaps (`stats::contention`, as W3), beside W3's dlock gap measured right before in the
//! same run (`make bench-scale` does not run W3); first and last grant after the lock became free;
//! re-asks (`EVALSHA` beyond one release per grant) and `LPOS` calls and time (`INFO commandstats`
//! over the drain, and sampled every 100 ms to find the waves of re-asks); the longest `PING` of
//! a probe connection (every 2 ms) during the drain; failed acquires; client heap per waiting task
//! (the counting allocator, in each worker: live bytes when all are queued less before they
//! started); Redis memory per queued entry (`MEMORY USAGE` of the queue, and `used_memory` growth).
//!
//! Each waiter waits up to 30 s plus 10 ms per waiter (130 s for 10,000): the last one waits for
//! the whole queue ahead of it.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use dlock_core::{Client, MutexGuard};
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;

use crate::child::{Child, GO, READY, args, print_result, ready_then_wait_for_go, say};
use crate::cli::ChildArgs;
use crate::control::{Control, patient_connection};
use crate::dlock::{Dlock, client, mutex_options};
use crate::redis_stats::Snapshot;
use crate::report::{Entry, Section, Target};
use crate::rt::{BoxError, live_heap_bytes, monotonic_ns, multi_thread_runtime};
use crate::spec::{ACQUIRE_WAIT, Counts, W3_PAUSE};
use crate::stats::{Contention, LockEvent, contention, count, float, millis, ns_to_s, ratio};
use crate::subject::warm_up;
use crate::subjects::{Kind, Setting};
use crate::table::{int, joined, table};
use crate::w7_stats::{
    Fifo, Grant, GrantTimes, Slice, Stalls, Wave, extends, fifo, grant_times, label, stalls,
    task_of_entry, tenths, waves,
};

/// The one lock every task waits for.
const LOCK: &str = "w7:lock";
/// How often the parent reads the queue's length while it fills.
const POLL: Duration = Duration::from_millis(5);
/// How often it takes a `LRANGE` snapshot meanwhile (each costs the server O(n)).
const SNAPSHOT_EVERY: Duration = Duration::from_millis(100);
/// The queue must be full this long before the holder's lease ends.
const FILL_MARGIN: Duration = Duration::from_millis(500);
/// The dying holder's shortest lease.
const DEATH_LEASE_MIN: Duration = Duration::from_secs(3);
/// The server counters' sampling period (finds the waves of re-asks).
const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// How long before the dead holder's lease ends the drain's window opens.
const WINDOW_LEAD: Duration = Duration::from_millis(50);
/// The latency probe's pause between two `PING`s.
const PING_EVERY: Duration = Duration::from_millis(2);
/// Lines of the parent–worker protocol beyond `READY`/`GO`/`RESULT`: the parent asks every
/// worker to read its heap once the queue is full, the worker answers; the holder is told its
/// lease and says when it holds the lock.
const MEASURE: &str = "MEASURE";
const MEASURED: &str = "MEASURED";
const HOLD: &str = "HOLD ";
const HELD: &str = "HELD";

/// How the lock becomes free once the queue is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Ending {
    /// The holder releases it: a hand-off to the head of the queue.
    Releases,
    /// The holder's process is SIGKILLed: the lease runs out, the waiters' timers fire.
    Dies,
}

/// What one worker process reports.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct WorkerReport {
    grants: Vec<Grant>,
    /// Live heap bytes before the tasks were spawned, and when the parent saw them all queued.
    heap_before: i64,
    heap_queued: i64,
    failed: u64,
    /// The first failure's message (a timeout says `busy`).
    first_failure: Option<String>,
    not_held_at_release: u64,
    /// Grants that came without a fence (fetched then, one round trip each): expected 0.
    fences_fetched: u64,
}

/// The figures of one scenario.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Scenario {
    pub(crate) ending: Ending,
    pub(crate) processes: u32,
    pub(crate) waiters: u64,
    /// The holder's lease.
    pub(crate) holder_lease_ms: u64,
    /// CLOCK_MONOTONIC ns when the lock became free (the release; the dead holder's lease end).
    pub(crate) free_ns: u64,
    /// From `GO` to every entry queued.
    pub(crate) fill_s: f64,
    /// When the queue first held each tenth of the waiters (s after `GO`): the fill slows down
    /// as the queue deepens when queueing costs O(n).
    pub(crate) fill_tenths_s: Vec<f64>,
    /// The fill's server counters: queueing attempts (`EVALSHA`, more than one per waiter when
    /// attempts time out and are retried), their `LPOS` scans and time, redis-server CPU.
    pub(crate) fill_evalsha_calls: u64,
    pub(crate) fill_lpos_calls: u64,
    pub(crate) fill_lpos_usec: u64,
    pub(crate) fill_server_cpu_us: u64,
    /// `LRANGE` snapshots taken while filling (the final one included), and whether each
    /// extended the one before.
    pub(crate) snapshots: u64,
    pub(crate) snapshots_consistent: bool,
    pub(crate) fifo: Fifo,
    pub(crate) contention: Contention,
    pub(crate) grant_times: GrantTimes,
    pub(crate) failed: u64,
    pub(crate) first_failure: Option<String>,
    pub(crate) not_held_at_release: u64,
    pub(crate) fences_fetched: u64,
    /// The drain (the lock freed → every worker done): wall time and server counters.
    pub(crate) drain_s: f64,
    pub(crate) evalsha_calls: u64,
    pub(crate) evalsha_usec: u64,
    /// `EVALSHA` beyond one release per grant (and the parent holder's release): the re-asks of
    /// fallback timers.
    pub(crate) re_asks: u64,
    pub(crate) lpos_calls: u64,
    pub(crate) lpos_usec: u64,
    pub(crate) server_cpu_us: u64,
    pub(crate) waves: Vec<Wave>,
    pub(crate) stalls: Stalls,
    pub(crate) heap_bytes_per_task: f64,
    /// `MEMORY USAGE` of the full queue ÷ entries, and `used_memory` growth ÷ entries.
    pub(crate) redis_queue_bytes_per_entry: f64,
    pub(crate) redis_used_bytes_per_entry: f64,
}

/// W3's dlock subject measured in the same run: the reference of the hand-off gap.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct W3Reference {
    pub(crate) acquisitions: u64,
    pub(crate) cross_gap_p50_us: f64,
    pub(crate) cross_gap_p99_us: f64,
}

/// Both scenarios and the reference.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct W7 {
    pub(crate) w3: W3Reference,
    pub(crate) waiter_wait_ms: u64,
    pub(crate) releases: Scenario,
    pub(crate) dies: Scenario,
}

/// Waiters in all.
fn waiters(counts: &Counts) -> u64 {
    u64::from(counts.w7_processes) * u64::from(counts.w7_tasks)
}

/// How long each waiter waits: [`ACQUIRE_WAIT`] and 10 ms per waiter (the last waits for all).
fn waiter_wait(waiters: u64) -> Duration {
    ACQUIRE_WAIT
        + Duration::from_millis(10).saturating_mul(u32::try_from(waiters).unwrap_or(u32::MAX))
}

/// The dying holder's lease: long enough for the queue to fill again (10× the first fill, plus
/// 2 s: fills of 10,000 waiters varied 5-fold between runs on the shared 2-core machine, and a
/// fill that outlasts the lease fails the run), at least [`DEATH_LEASE_MIN`], in whole seconds.
fn death_lease(fill: Duration) -> Duration {
    let wanted = fill.saturating_mul(10) + Duration::from_secs(2);
    Duration::from_secs(wanted.as_secs() + u64::from(wanted.subsec_nanos() > 0))
        .max(DEATH_LEASE_MIN)
}

/// Runs W3's dlock subject (the reference), then both scenarios.
pub(crate) fn run(s: &Setting) -> Result<Entry, BoxError> {
    let (url, counts) = (s.url.as_str(), &s.counts);
    eprintln!("  W3 (dlock) as the hand-off gap's reference …");
    let w3 = crate::w3::run_one(Kind::Dlock, url, counts)?;
    let w3 = W3Reference {
        acquisitions: w3.contention.acquisitions,
        cross_gap_p50_us: w3.contention.cross_gap_p50_us,
        cross_gap_p99_us: w3.contention.cross_gap_p99_us,
    };
    let n = waiters(counts);
    eprintln!("  {n} waiters, the holder releases …");
    let releases = scenario(url, counts, Ending::Releases, waiter_wait(n))?;
    let lease = death_lease(Duration::from_secs_f64(releases.fill_s));
    eprintln!(
        "  {n} waiters, the holder dies (lease {} ms) …",
        millis(lease)
    );
    let dies = scenario(url, counts, Ending::Dies, lease)?;
    Entry::new(
        "w7",
        W7 {
            w3,
            waiter_wait_ms: millis(waiter_wait(n)),
            releases,
            dies,
        },
    )
}

/// The holder of the lock while the queue fills.
enum Holder {
    /// The parent's own guard.
    Parent(MutexGuard),
    /// A child process holding it.
    Child(Child),
}

/// What the parent saw of the queue while it filled.
struct Filled {
    fill: Duration,
    /// `(s after the start, queue length)` at every poll.
    progress: Vec<(f64, u64)>,
    snapshots: u64,
    consistent: bool,
    entries: Vec<String>,
}

/// One scenario: workers ready, the lock held, the queue filled, the lock freed, the drain.
fn scenario(
    url: &str,
    counts: &Counts,
    ending: Ending,
    lease: Duration,
) -> Result<Scenario, BoxError> {
    let rt = multi_thread_runtime()?;
    // dlock clients are built inside a runtime (the parent's holder, and the one that names keys).
    let _entered = rt.enter();
    rt.block_on(Control::fresh(url))?;
    let mut control = rt.block_on(Control::patient(url))?;
    let n = waiters(counts);
    let prefix = client(url)?.key_prefix().to_owned();
    let lock_key = format!("{prefix}{{{LOCK}}}");
    let queue = format!("{lock_key}:queue");
    let mut workers = (0..counts.w7_processes)
        .map(|p| {
            let p = p.to_string();
            Child::spawn(&args(
                "w7-worker",
                url,
                counts,
                &["waiters", "--process", &p],
            ))
        })
        .collect::<Result<Vec<_>, _>>()?;
    for worker in &mut workers {
        worker.wait_for(READY)?;
    }
    let (holder, held_at) = take_lock(&rt, url, counts, ending, lease)?;
    let used_before = rt.block_on(control.used_memory())?;
    let fill_before = rt.block_on(Snapshot::take(&mut control))?;
    for worker in &mut workers {
        worker.send(GO)?;
    }
    let deadline = held_at + lease.saturating_sub(FILL_MARGIN);
    let filled = rt
        .block_on(fill(&mut control, &queue, n, deadline))
        .map_err(|e| format!("while the queue filled: {e}"))?;
    let fill_delta = rt.block_on(fill_before.delta(&mut control))?;
    eprintln!(
        "    queued in {:.2} s ({} queueing attempts)",
        filled.fill.as_secs_f64(),
        fill_delta.commands.get("evalsha")
    );
    let queue_bytes: u64 = rt.block_on(
        redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(&queue)
            .arg("SAMPLES")
            .arg(0)
            .query_async(control.conn()),
    )?;
    let used_full = rt.block_on(control.used_memory())?;
    for worker in &mut workers {
        worker.send(MEASURE)?;
    }
    for worker in &mut workers {
        worker.wait_for(MEASURED)?;
    }

    let stop = Arc::new(AtomicBool::new(false));
    let sampler = rt.spawn(sample(url.to_owned(), stop.clone()));
    let probe = rt.spawn(ping_probe(url.to_owned(), stop.clone()));
    let freed = free_lock(&rt, &mut control, holder, &lock_key)
        .map_err(|e| format!("freeing the lock: {e}"))?;
    let free_ns = freed.free_ns;
    let reports = workers
        .into_iter()
        .map(Child::result::<WorkerReport>)
        .collect::<Result<Vec<_>, _>>()?;
    let drain_ns = monotonic_ns()?.saturating_sub(freed.window_ns);
    stop.store(true, Ordering::Relaxed);
    let mut slices = rt
        .block_on(sampler)?
        .map_err(|e| format!("the sampler: {e}"))?;
    let mut pings = rt.block_on(probe)?.map_err(|e| format!("the probe: {e}"))?;
    let delta = rt.block_on(freed.before.delta(&mut control))?;
    // Only the drain's: the dying holder's lease ran on for seconds before it.
    slices.retain(|s| s.end_ns > freed.window_ns);
    pings.retain(|&(sent, _)| sent >= freed.window_ns);

    let queue_tasks: Vec<u32> = filled
        .entries
        .iter()
        .filter_map(|e| task_of_entry(e))
        .collect();
    let heap: i64 = reports.iter().map(|r| r.heap_queued - r.heap_before).sum();
    let sum = |f: fn(&WorkerReport) -> u64| reports.iter().map(f).sum::<u64>();
    let (failed, not_held_at_release, fences_fetched) = (
        sum(|r| r.failed),
        sum(|r| r.not_held_at_release),
        sum(|r| r.fences_fetched),
    );
    let first_failure = reports.iter().find_map(|r| r.first_failure.clone());
    let grants: Vec<Grant> = reports.into_iter().flat_map(|r| r.grants).collect();
    let mut events: Vec<LockEvent> = grants
        .iter()
        .map(|g| LockEvent {
            worker: g.task,
            t_acq: g.t_acq,
            t_rel: g.t_rel,
        })
        .collect();
    let evalsha_calls = delta.commands.get("evalsha");
    Ok(Scenario {
        ending,
        processes: counts.w7_processes,
        waiters: n,
        holder_lease_ms: millis(lease),
        free_ns,
        fill_s: filled.fill.as_secs_f64(),
        fill_tenths_s: tenths(&filled.progress, n),
        fill_evalsha_calls: fill_delta.commands.get("evalsha"),
        fill_lpos_calls: fill_delta.commands.get("lpos"),
        fill_lpos_usec: fill_delta.usec.get("lpos"),
        fill_server_cpu_us: fill_delta.server_cpu_us,
        snapshots: filled.snapshots,
        snapshots_consistent: filled.consistent && count(queue_tasks.len()) == n,
        fifo: fifo(&queue_tasks, &grants),
        contention: contention(&mut events, u32::try_from(n)?),
        grant_times: grant_times(&grants, free_ns),
        failed,
        first_failure,
        not_held_at_release,
        fences_fetched,
        drain_s: ns_to_s(drain_ns),
        evalsha_calls,
        evalsha_usec: delta.usec.get("evalsha"),
        re_asks: evalsha_calls.saturating_sub(count(grants.len()) + freed.holder_releases),
        lpos_calls: delta.commands.get("lpos"),
        lpos_usec: delta.usec.get("lpos"),
        server_cpu_us: delta.server_cpu_us,
        waves: waves(&slices),
        stalls: stalls(&pings, free_ns),
        heap_bytes_per_task: ratio(u64::try_from(heap).unwrap_or(0), n),
        redis_queue_bytes_per_entry: ratio(queue_bytes, n),
        redis_used_bytes_per_entry: ratio(used_full.saturating_sub(used_before), n),
    })
}

/// Takes the lock for the scenario, with lease `lease`: the parent itself or a holder child. Returns the holder and when it held the lock.
fn take_lock(
    rt: &tokio::runtime::Runtime,
    url: &str,
    counts: &Counts,
    ending: Ending,
    lease: Duration,
) -> Result<(Holder, Instant), BoxError> {
    match ending {
        Ending::Releases => {
            let options = mutex_options(false)?.ttl(lease).label("w7:holder");
            let lock = client(url)?.mutex_with(LOCK, options)?;
            let guard = rt.block_on(lock.acquire_timeout(ACQUIRE_WAIT))?;
            Ok((Holder::Parent(guard), Instant::now()))
        }
        Ending::Dies => {
            let mut child = Child::spawn(&args("w7-worker", url, counts, &["holder"]))?;
            child.wait_for(READY)?;
            child.send(&format!("{HOLD}{}", millis(lease)))?;
            child.wait_for(HELD)?;
            // The child took it a little earlier: the deadline errs on the early side.
            Ok((Holder::Child(child), Instant::now()))
        }
    }
}

/// The lock freed, and the drain's window opened.
struct Freed {
    /// CLOCK_MONOTONIC ns when the lock became free (the release; the dead holder's lease end).
    free_ns: u64,
    /// When the window's counters were read (`before`).
    window_ns: u64,
    before: Snapshot,
    /// Releases the parent itself sent in the window (counted out of the re-asks).
    holder_releases: u64,
}

/// Frees the lock, opening the drain's window first: the parent releases its guard, or the
/// holder child is SIGKILLed, and the lock is free when its lease ends (the window opens
/// [`WINDOW_LEAD`] before that, so that it holds the burst of re-asks and not the seconds of
/// the lease that were left).
fn free_lock(
    rt: &tokio::runtime::Runtime,
    control: &mut Control,
    holder: Holder,
    lock_key: &str,
) -> Result<Freed, BoxError> {
    match holder {
        Holder::Parent(guard) => {
            let before = rt.block_on(Snapshot::take(control))?;
            let window_ns = monotonic_ns()?;
            let free_ns = monotonic_ns()?;
            if !rt.block_on(guard.release())?.was_held() {
                return Err("the holder's lease ran out before the queue was released".into());
            }
            Ok(Freed {
                free_ns,
                window_ns,
                before,
                holder_releases: 1,
            })
        }
        Holder::Child(child) => {
            let pttl: i64 =
                rt.block_on(redis::cmd("PTTL").arg(lock_key).query_async(control.conn()))?;
            let now = monotonic_ns()?;
            let pttl = u64::try_from(pttl)
                .map_err(|_| format!("the dying holder's lock is gone already (PTTL {pttl})"))?;
            child.kill();
            let free_ns = now + pttl * 1_000_000;
            let lead = u64::try_from(WINDOW_LEAD.as_nanos())?;
            let open_at = free_ns.saturating_sub(lead);
            std::thread::sleep(Duration::from_nanos(
                open_at.saturating_sub(monotonic_ns()?),
            ));
            let before = rt.block_on(Snapshot::take(control))?;
            Ok(Freed {
                free_ns,
                window_ns: monotonic_ns()?,
                before,
                holder_releases: 0,
            })
        }
    }
}

/// Polls the queue until it holds `n` entries, with a `LRANGE` snapshot every
/// [`SNAPSHOT_EVERY`]; fails after `deadline` (the holder's lease would run out).
async fn fill(
    control: &mut Control,
    queue: &str,
    n: u64,
    deadline: Instant,
) -> Result<Filled, BoxError> {
    let start = Instant::now();
    let mut last_snapshot = start;
    let mut prev: Vec<String> = Vec::new();
    let (mut snapshots, mut consistent) = (0, true);
    let mut progress = Vec::new();
    loop {
        let len: u64 = redis::cmd("LLEN")
            .arg(queue)
            .query_async(control.conn())
            .await?;
        progress.push((start.elapsed().as_secs_f64(), len));
        if len >= n {
            let fill = start.elapsed();
            let entries = lrange(control, queue).await?;
            return Ok(Filled {
                fill,
                progress,
                snapshots: snapshots + 1,
                consistent: consistent && extends(&prev, &entries),
                entries,
            });
        }
        if Instant::now() > deadline {
            return Err(format!(
                "only {len} of {n} waiters queued before the holder's lease came within {} ms \
                 of its end",
                millis(FILL_MARGIN)
            )
            .into());
        }
        if last_snapshot.elapsed() >= SNAPSHOT_EVERY {
            let next = lrange(control, queue).await?;
            consistent &= extends(&prev, &next);
            prev = next;
            snapshots += 1;
            last_snapshot = Instant::now();
        }
        tokio::time::sleep(POLL).await;
    }
}

async fn lrange(control: &mut Control, queue: &str) -> Result<Vec<String>, BoxError> {
    Ok(redis::cmd("LRANGE")
        .arg(queue)
        .arg(0)
        .arg(-1)
        .query_async(control.conn())
        .await?)
}

/// Reads the server's counters every [`SAMPLE_EVERY`] until `stop`; returns the slices.
async fn sample(url: String, stop: Arc<AtomicBool>) -> Result<Vec<Slice>, BoxError> {
    let mut control = Control::patient(&url).await?;
    let mut ticks = tokio::time::interval(SAMPLE_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut slices = Vec::new();
    let mut prev = (monotonic_ns()?, Snapshot::take(&mut control).await?);
    while !stop.load(Ordering::Relaxed) {
        ticks.tick().await;
        let next = (monotonic_ns()?, Snapshot::take(&mut control).await?);
        let delta = prev.1.until(&next.1);
        slices.push(Slice {
            start_ns: prev.0,
            end_ns: next.0,
            evalsha_calls: delta.commands.get("evalsha"),
            evalsha_usec: delta.usec.get("evalsha"),
            lpos_calls: delta.commands.get("lpos"),
            lpos_usec: delta.usec.get("lpos"),
            server_cpu_us: delta.server_cpu_us,
        });
        prev = next;
    }
    Ok(slices)
}

/// Sends `PING` on its own connection every [`PING_EVERY`] until `stop`; returns `(sent ns,
/// latency ns)` of each.
async fn ping_probe(url: String, stop: Arc<AtomicBool>) -> Result<Vec<(u64, u64)>, BoxError> {
    let mut conn = patient_connection(&url).await?;
    let mut pings = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let sent = monotonic_ns()?;
        redis::cmd("PING").query_async::<()>(&mut conn).await?;
        pings.push((sent, monotonic_ns()?.saturating_sub(sent)));
        tokio::time::sleep(PING_EVERY).await;
    }
    Ok(pings)
}

/// Entry point of `dlock-bench w7-worker waiters|holder --url URL [--process P]`.
pub(crate) fn child_main(args: &ChildArgs) -> Result<(), BoxError> {
    let runtime = multi_thread_runtime()?;
    match args.probe()? {
        "waiters" => {
            let (url, process) = (args.url.as_str(), args.process()?);
            let client = runtime.block_on(set_up(url, process))?;
            ready_then_wait_for_go()?;
            let report = runtime.block_on(run_waiters(client, process, &args.counts))?;
            print_result(&report)
        }
        "holder" => runtime.block_on(hold(&args.url)),
        other => Err(format!("unknown w7-worker role `{other}`; use waiters or holder").into()),
    }
}

/// A worker's client, its connection and scripts warmed up on its own keys.
async fn set_up(url: &str, process: u32) -> Result<Client, BoxError> {
    let client = client(url)?;
    warm_up(
        &Dlock::from(client.clone()),
        &format!("w7:warm:{process}:"),
        0..10,
    )
    .await?;
    Ok(client)
}

/// The worker's tasks: all spawned at once; the heap is read before and once the parent says
/// every entry is queued.
async fn run_waiters(
    client: Client,
    process: u32,
    counts: &Counts,
) -> Result<WorkerReport, BoxError> {
    let wait = waiter_wait(waiters(counts));
    let tasks = counts.w7_tasks;
    let mut handles: Vec<JoinHandle<Result<Held, String>>> =
        Vec::with_capacity(usize::try_from(tasks)?);
    let heap_before = live_heap_bytes();
    for task in 0..tasks {
        let id = process * tasks + task;
        handles.push(tokio::spawn(wait_task(client.clone(), id, wait)));
    }
    tokio::task::spawn_blocking(|| crate::child::wait_for_line(MEASURE)).await??;
    let heap_queued = live_heap_bytes();
    say(MEASURED)?;
    let mut report = WorkerReport {
        heap_before,
        heap_queued,
        grants: Vec::with_capacity(handles.len()),
        ..WorkerReport::default()
    };
    for handle in handles {
        match handle.await? {
            Ok(held) => {
                report.grants.push(held.grant);
                report.fences_fetched += u64::from(held.fence_fetched);
                report.not_held_at_release += u64::from(held.lost_at_release);
            }
            Err(e) => {
                report.failed += 1;
                report.first_failure.get_or_insert(e);
            }
        }
    }
    Ok(report)
}

/// A task's acquisition, and what it noticed on the way.
struct Held {
    grant: Grant,
    /// The grant came without a fence: it was fetched (one round trip).
    fence_fetched: bool,
    /// The release found the lease gone.
    lost_at_release: bool,
}

/// One waiting task: its own handle on the lock (labelled with its number), one acquire, a
/// 1 ms hold as W3's (`spawn_blocking` sleep), the release. A failure is reported as its
/// message.
async fn wait_task(client: Client, task: u32, wait: Duration) -> Result<Held, String> {
    let failed = |what: &str, e: &dyn std::fmt::Display| format!("task {task}: {what}: {e}");
    let options = mutex_options(false)
        .map_err(|e| failed("options", &e))?
        .label(label(task));
    let lock = client
        .mutex_with(LOCK, options)
        .map_err(|e| failed("mutex", &e))?;
    let guard = lock
        .acquire_timeout(wait)
        .await
        .map_err(|e| failed("acquire", &e))?;
    let t_acq = monotonic_ns().map_err(|e| failed("clock", &e))?;
    let (fence, fence_fetched) = match guard.issued_fencing_token() {
        Some(fence) => (fence, false),
        None => {
            let fence = guard.fencing_token().await;
            (fence.map_err(|e| failed("fence", &e))?, true)
        }
    };
    tokio::task::spawn_blocking(|| std::thread::sleep(W3_PAUSE))
        .await
        .map_err(|e| failed("pause", &e))?;
    let t_rel = monotonic_ns().map_err(|e| failed("clock", &e))?;
    let released = guard.release().await.map_err(|e| failed("release", &e))?;
    Ok(Held {
        grant: Grant {
            task,
            fence: fence.get(),
            t_acq,
            t_rel,
        },
        fence_fetched,
        lost_at_release: !released.was_held(),
    })
}

/// The dying holder: takes the lock with the lease the parent sends (`HOLD <ms>`), says `HELD`,
/// and waits to be killed (or for its stdin to close, when the parent gave up).
async fn hold(url: &str) -> Result<(), BoxError> {
    let client = client(url)?;
    warm_up(&Dlock::from(client.clone()), "w7:warm:holder:", 0..10).await?;
    say(READY)?;
    let line = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    })
    .await??;
    let ms: u64 = line
        .trim_end()
        .strip_prefix(HOLD)
        .and_then(|ms| ms.parse().ok())
        .ok_or_else(|| format!("the holder expected `{HOLD}<ms>`, got {line:?}"))?;
    let options = mutex_options(false)?
        .ttl(Duration::from_millis(ms))
        .label("w7:holder");
    let guard = client
        .mutex_with(LOCK, options)?
        .acquire_timeout(ACQUIRE_WAIT)
        .await?;
    say(HELD)?;
    // Blocks until the parent kills this process; the guard is never released.
    let _ = tokio::task::spawn_blocking(|| crate::child::wait_for_line("never sent")).await?;
    std::mem::forget(guard);
    Ok(())
}

/// Issue #29: the hand-off gap with 10,000 waiters within this factor of W3's (8 waiters).
const GAP_TO_W3: f64 = 1.2;

impl Scenario {
    fn title(&self) -> String {
        match self.ending {
            Ending::Releases => "holder releases".to_owned(),
            Ending::Dies => "holder SIGKILLed".to_owned(),
        }
    }

    /// `ns` (CLOCK_MONOTONIC) as ms after the lock became free.
    fn after_free_ms(&self, ns: u64) -> f64 {
        (float(ns) - float(self.free_ns)) / 1e6
    }

    fn wave_summary(&self) -> String {
        let Some(first) = self.waves.first() else {
            return "none".to_owned();
        };
        format!(
            "{}; the first in the slices from {:.0} to {:.0} ms after the lock was free: {} \
             EVALSHA ({:.0} ms in scripts), {} LPOS ({:.0} ms, {:.1} µs each), redis-server CPU \
             {:.0} ms ({:.0} % of a core)",
            self.waves.len(),
            self.after_free_ms(first.start_ns),
            self.after_free_ms(first.end_ns),
            int(float(first.evalsha_calls)),
            float(first.evalsha_usec) / 1e3,
            int(float(first.lpos_calls)),
            float(first.lpos_usec) / 1e3,
            first.us_per_lpos(),
            float(first.server_cpu_us) / 1e3,
            first.cpu_pct()
        )
    }

    /// The report's rows, one per figure.
    fn cells(&self, w3: &W3Reference) -> Vec<String> {
        let c = &self.contention;
        let g = &self.grant_times;
        let s = &self.stalls;
        vec![
            format!(
                "{} × {} = {}",
                self.processes,
                int(ratio(self.waiters, u64::from(self.processes))),
                int(float(self.waiters))
            ),
            format!("{} ms", int(float(self.holder_lease_ms))),
            format!(
                "{:.2} s ({} snapshots; {})",
                self.fill_s,
                self.snapshots,
                if self.snapshots_consistent {
                    "each extends the last"
                } else {
                    "NOT consistent"
                }
            ),
            joined(&self.fill_tenths_s, " · ", |s| format!("{s:.2}")),
            format!(
                "{} EVALSHA; {} LPOS, {:.0} ms ({:.1} µs each); redis-server CPU {:.0} ms",
                int(float(self.fill_evalsha_calls)),
                int(float(self.fill_lpos_calls)),
                float(self.fill_lpos_usec) / 1e3,
                ratio(self.fill_lpos_usec, self.fill_lpos_calls),
                float(self.fill_server_cpu_us) / 1e3
            ),
            format!(
                "{} ({} grants matched, {} not in the queue; fence vs t_acq order swaps {})",
                self.fifo.inversions,
                self.fifo.matched,
                self.fifo.unmatched,
                self.fifo.fence_vs_time_swaps
            ),
            format!(
                "{:.0} / {:.0} ({:.2}× / {:.2}× W3's)",
                c.cross_gap_p50_us,
                c.cross_gap_p99_us,
                c.cross_gap_p50_us / w3.cross_gap_p50_us,
                c.cross_gap_p99_us / w3.cross_gap_p99_us
            ),
            format!(
                "{:.1} ms / {:.2} s ({}/s)",
                g.first_ms,
                g.last_ms / 1e3,
                int(g.per_s)
            ),
            format!(
                "{} / {} / {}",
                self.failed, self.not_held_at_release, self.fences_fetched
            ),
            format!(
                "{} ({:.2} per waiter)",
                int(float(self.re_asks)),
                ratio(self.re_asks, self.waiters)
            ),
            format!(
                "{} calls, {:.0} ms ({:.1} µs each)",
                int(float(self.lpos_calls)),
                float(self.lpos_usec) / 1e3,
                ratio(self.lpos_usec, self.lpos_calls)
            ),
            self.wave_summary(),
            format!(
                "{:.2} s; {:.0} ms ({:.0} µs per grant); scripts {:.0} ms",
                self.drain_s,
                float(self.server_cpu_us) / 1e3,
                ratio(self.server_cpu_us, c.acquisitions),
                float(self.evalsha_usec) / 1e3
            ),
            format!(
                "{:.1} ms at {:.0} ms after free (p50 {:.2} ms, p99 {:.2} ms; {} PINGs)",
                s.max_us / 1e3,
                s.max_at_ms,
                s.p50_us / 1e3,
                s.p99_us / 1e3,
                int(float(s.pings))
            ),
            format!("{:.0} B", self.heap_bytes_per_task),
            format!(
                "{:.0} B / {:.0} B",
                self.redis_queue_bytes_per_entry, self.redis_used_bytes_per_entry
            ),
        ]
    }
}

/// The figure of each row of the W7 table.
const ROWS: [&str; 16] = [
    "waiters (processes × tasks)",
    "holder's lease",
    "queue filled in (LRANGE snapshots while filling)",
    "s until the queue held each tenth of the waiters",
    "the fill's queueing attempts and their LPOS scans",
    "FIFO inversions (grants by fence vs the queue)",
    "hand-off gap p50 / p99 µs (ratio to W3's)",
    "lock free → first grant / last grant (grants/s)",
    "acquires failed / lease gone at release / fences fetched",
    "re-asks (EVALSHA beyond one release per grant)",
    "LPOS in the drain (server time)",
    "re-ask waves that scan (100 ms slices with LPOS calls)",
    "drain: wall time; redis-server CPU; in scripts",
    "longest PING of the probe (every 2 ms)",
    "client heap per waiting task",
    "Redis per queued entry: MEMORY USAGE / used_memory",
];

impl W7 {
    fn gap_targets(&self) -> Vec<Target> {
        let (c, w3) = (&self.releases.contention, &self.w3);
        [
            ("p50", c.cross_gap_p50_us, w3.cross_gap_p50_us),
            ("p99", c.cross_gap_p99_us, w3.cross_gap_p99_us),
        ]
        .into_iter()
        .map(|(at, gap, w3)| {
            let r = gap / w3;
            Target::new(
                format!("W7 hand-off gap {at} ÷ W3's {at} (holder releases)"),
                "≤ 1.2×",
                format!("{r:.2}× ({gap:.0} / {w3:.0} µs)"),
                r <= GAP_TO_W3,
            )
        })
        .collect()
    }
}

impl Section for W7 {
    fn details(&self, out: &mut String) {
        let (r, d) = (&self.releases, &self.dies);
        let _ = writeln!(
            out,
            "### W7: deep queue ({} waiters on one lock)\n",
            int(float(r.waiters))
        );
        let _ = writeln!(
            out,
            "Each task acquires `{LOCK}` once (wait up to {} s), holds it 1 ms and releases it. \
             Queue entries are mapped to tasks by their lock label. W3's dlock subject, run \
             right before: {} acquisitions, cross-worker gap p50 {:.0} µs, p99 {:.0} µs. \
             The drain runs from the lock's freeing (release, or the dead holder's lease end) \
             to the last worker's end.\n",
            self.waiter_wait_ms / 1_000,
            self.w3.acquisitions,
            self.w3.cross_gap_p50_us,
            self.w3.cross_gap_p99_us
        );
        let header = ["", &r.title(), &d.title()];
        let (rc, dc) = (r.cells(&self.w3), d.cells(&self.w3));
        let rows = ROWS
            .iter()
            .zip(rc.into_iter().zip(dc))
            .map(|(name, (a, b))| vec![(*name).to_owned(), a, b]);
        table(out, "lrr", &header, rows);
        for s in [r, d] {
            if let Some(why) = &s.first_failure {
                let _ = writeln!(out, "{}: first failure: {why}  ", s.title());
            }
        }
        out.push('\n');
    }

    fn targets(&self) -> Vec<Target> {
        let mut targets: Vec<Target> = [&self.releases, &self.dies]
            .into_iter()
            .flat_map(|s| {
                let inv = s.fifo.inversions;
                let ok = inv == 0 && s.fifo.unmatched == 0 && s.snapshots_consistent;
                [
                    Target::new(
                        format!("W7 FIFO inversions ({})", s.title()),
                        "0",
                        format!("{inv} (unmatched {})", s.fifo.unmatched),
                        ok,
                    ),
                    Target::new(
                        format!("W7 acquires failed ({})", s.title()),
                        "0",
                        s.failed.to_string(),
                        s.failed == 0 && s.fifo.matched == s.waiters,
                    ),
                ]
            })
            .collect();
        targets.extend(self.gap_targets());
        targets
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiters_wait_for_the_whole_queue() {
        assert_eq!(waiter_wait(0), ACQUIRE_WAIT);
        assert_eq!(waiter_wait(10_000), Duration::from_secs(130));
        assert_eq!(waiters(&Counts::SCALE), 10_000);
        assert_eq!(waiters(&Counts::FULL), 1_000);
    }

    #[test]
    fn the_dying_holder_outlasts_the_fill() {
        assert_eq!(death_lease(Duration::from_millis(100)), DEATH_LEASE_MIN);
        assert_eq!(
            death_lease(Duration::from_millis(150)),
            Duration::from_secs(4)
        );
        assert_eq!(death_lease(Duration::from_secs(2)), Duration::from_secs(22));
        assert_eq!(death_lease(Duration::ZERO), DEATH_LEASE_MIN);
    }
}
