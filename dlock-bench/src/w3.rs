//! W3: contended mutex, the parent side. For every subject that waits for a held lock, starts 2
//! worker processes (`dlock-bench w3-worker`, 4 tasks each, see [`crate::w3_worker`]) on one key
//! `w3:lock`, opens the measured window when both are warmed up, merges their events
//! (CLOCK_MONOTONIC ns, comparable across processes) and computes the figures of WORKLOADS.md.
//! Then W3's floor: the raw pub/sub hop between two processes ([`crate::handoff_floor`]).

use serde::{Deserialize, Serialize};

use crate::child::{GO, Group, args};
use crate::handoff_floor::{self, HandoffFloor};
use crate::redis_stats::{CommandStats, Control};
use crate::rt::{BoxError, current_thread_runtime};
use crate::spec::Counts;
use crate::stats::{Contention, contention, ns_to_us, per_second, ratio};
use crate::subjects::Kind;
use crate::w3_worker::{COUNTER, WorkerReport};
use crate::window::{Snapshot, WindowDelta};

/// W3 for every waiting subject, and its floor.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct W3 {
    pub(crate) runs: Vec<W3Result>,
    pub(crate) handoff_floor: HandoffFloor,
}

/// The W3 figures of one subject.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct W3Result {
    pub(crate) subject: Kind,
    pub(crate) processes: u32,
    pub(crate) workers: u32,
    /// Tickets handed out (2,000): each should become one acquisition.
    pub(crate) tickets: u64,
    pub(crate) window_s: f64,
    pub(crate) acquisitions_per_s: f64,
    /// `tickets − final counter`: must be 0.
    pub(crate) lost_updates: i64,
    pub(crate) final_counter: u64,
    pub(crate) timeouts: u64,
    pub(crate) not_held_at_release: u64,
    pub(crate) contention: Contention,
    /// Client requests for the lock per acquisition (EVALSHA, SUBSCRIBE …).
    pub(crate) round_trips_per_acq: f64,
    /// Redis commands per acquisition, Lua-internal calls included.
    pub(crate) commands_per_acq: f64,
    /// Server time per acquisition in the lock's scripts and commands, µs.
    pub(crate) server_us_per_acq: f64,
    /// CPU time of the whole redis-server process per acquisition (the workload's own
    /// commands included), µs.
    pub(crate) server_cpu_us_per_acq: f64,
    /// `INFO commandstats` delta of the window, less the workload's own INCR/GET/SET.
    pub(crate) commands: CommandStats,
}

/// Runs W3 for every subject that waits, then the hand-off floor.
pub(crate) fn run(url: &str, counts: &Counts) -> Result<W3, BoxError> {
    let runs = Kind::ALL
        .into_iter()
        .filter(|kind| kind.waits())
        .map(|kind| run_one(kind, url, counts))
        .collect::<Result<_, _>>()?;
    eprintln!("  hand-off floor (raw pub/sub between two processes) …");
    let handoff_floor = handoff_floor::run(url, counts)?;
    Ok(W3 {
        runs,
        handoff_floor,
    })
}

/// W3 for one subject.
fn run_one(kind: Kind, url: &str, counts: &Counts) -> Result<W3Result, BoxError> {
    let runtime = current_thread_runtime()?;
    let mut control = runtime.block_on(Control::connect(url))?;
    runtime.block_on(control.flushall())?;
    let mut workers = Group::ready((0..counts.w3_processes).map(|process| {
        let process = process.to_string();
        let extra = ["--process", &process, "--subject", kind.name()];
        args("w3-worker", url, counts.quick, &extra)
    }))?;
    let before = runtime.block_on(Snapshot::take(&mut control))?;
    workers.send(GO)?;
    let reports = workers.results::<WorkerReport>()?;
    let delta = runtime.block_on(before.delta(&mut control))?;
    let counter = runtime.block_on(control.get_u64(COUNTER))?;
    Ok(summarize(kind, reports, delta, counter, counts))
}

/// Merges the workers' reports into the W3 figures.
fn summarize(
    subject: Kind,
    reports: Vec<WorkerReport>,
    window: WindowDelta,
    counter: u64,
    counts: &Counts,
) -> W3Result {
    let start = reports.iter().map(|r| r.start_ns).min().unwrap_or(0);
    let end = reports.iter().map(|r| r.end_ns).max().unwrap_or(0);
    let sum = |f: fn(&WorkerReport) -> u64| reports.iter().map(f).sum::<u64>();
    let WindowDelta {
        mut commands,
        usec,
        server_cpu_us,
        ..
    } = window;
    commands.subtract("incr", sum(|r| r.incr));
    commands.subtract("get", sum(|r| r.get));
    commands.subtract("set", sum(|r| r.set));
    let (timeouts, not_held_at_release) = (sum(|r| r.timeouts), sum(|r| r.not_held_at_release));

    let mut events: Vec<_> = reports.into_iter().flat_map(|r| r.events).collect();
    let contention = contention(&mut events, counts.w3_workers());
    let acquisitions = contention.acquisitions;
    let window = end.saturating_sub(start);
    W3Result {
        subject,
        processes: counts.w3_processes,
        workers: counts.w3_workers(),
        tickets: counts.w3_acquisitions,
        window_s: ns_to_us(window) / 1e6,
        acquisitions_per_s: per_second(acquisitions, window),
        lost_updates: i64::try_from(counts.w3_acquisitions).unwrap_or(i64::MAX)
            - i64::try_from(counter).unwrap_or(i64::MAX),
        final_counter: counter,
        timeouts,
        not_held_at_release,
        contention,
        round_trips_per_acq: ratio(commands.round_trips(0), acquisitions),
        commands_per_acq: ratio(commands.total(), acquisitions),
        server_us_per_acq: ratio(usec.client_usec(&[]), acquisitions),
        server_cpu_us_per_acq: ratio(server_cpu_us, acquisitions),
        commands,
    }
}
