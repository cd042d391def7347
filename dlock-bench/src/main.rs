//! Run with: `make bench` (or `cargo run --release -p dlock-bench -- [--quick]
//! [--only w1,w2,w3,w4,w5,mem,w6,w7,w8,cluster,sched,sched-scale,sched-oneoff,guarded,rate] [--subjects LIST] [--json PATH]`).
//!
//! The benchmark of `/work/shared/WORKLOADS.md` (issues #3, #13): dlock through its ordinary
//! public API beside rslock (the best Rust peer, pinned) and two raw-Redis floors (the `redis`
//! crate's default connection settings, and dlock's `TCP_NODELAY` ones) measured in the same run,
//! on a redis-server the benchmark starts itself (dlock-testkit: free loopback port, `--save ''
//! --appendonly no`, nothing else connected). Two more workloads have no floor: W6, many locks held under the watchdog (issues #4, #29)
//! and three dlock-scheduler replicas on a 1-second cron (issue #6), also with N run-time
//! schedules and a burst of one-off jobs (issue #31). It prints one markdown
//! report on stdout and writes the figures as JSON.
//!
//! # Layout
//! Every import points down this table (a module uses only modules listed below it).
//!
//! | module | what |
//! |---|---|
//! | `main` | the stages of a run and the child processes, each one line of a table |
//! | `cluster` | the Cluster rows: W2 and W8 on 3 masters beside the single server; per-master load, projection |
//! | `w8` | W8: many contended locks (2 tasks per name in 2 of 4 worker processes): hand-off gaps, subscriptions, channels, what is left |
//! | `w7`, `w7_stats` | W7 deep queue: 10,000 waiters on one lock (worker processes, a dying holder): FIFO, gaps, re-ask waves, memory |
//! | `w6`, `w6_stats` | W6: N locks held under the watchdog (child process per N and lease): CPU, round trips, memory, margins, shutdown; its figures (pure) |
//! | `w1`, `w2` | W1 (and W1 1-CPU, a pinned child process), W2 and W2-fence, for every subject; W1 1-CPU and W2 on both runtimes |
//! | `w3`, `handoff_floor` | W3 (2 worker processes per waiting subject) and its floor, the raw pub/sub hop |
//! | `w4`, `w5` | W4 (read-write lock beside the mutex) and W5 (semaphore): dlock only (issue #14) |
//! | `nodes` | the servers of a scale workload: one, or a cluster's masters; each node's counters, channels, keys, memory |
//! | `family`, `family_stats` | what W4 and W5 share: worker processes, the observer of who is inside; their figures (pure) |
//! | `memory` | client RSS and Redis memory per held guard and per waiting task (child processes) |
//! | `rate` | W9, the rate limiter beside a fixed-window `INCR` + `EXPIRE` floor (issue #34): decisions/s with 1 and 64 connections; round trips, commands, server and client CPU per decision |
//! | `guarded` | guarded writes and `fenced_set` beside a plain `SET` (issue #32): one write at a time; round trips, commands, server time, Redis and client CPU per write |
//! | `sched_oneoff`, `sched_oneoff_stats` | the scheduler's one-off jobs (issue #31): 10,000 due at the same instant across the scale stage's 3 replicas; time until the last ran, exactly once, share, Redis and client CPU per one-off, the script profile; its figures (pure) |
//! | `sched_scale`, `sched_scale_replica`, `sched_scale_stats` | the scheduler at scale (issue #31): N run-time schedules on a 1-second cron across 3 replica processes; fire delay, exactly once, Redis and client CPU per occurrence, the script profile; its figures (pure) |
//! | `sched_delivery` | the scheduler's delivery modes (issue #30): without faults, then replicas killed mid-run; its report |
//! | `sched_kills` | the kill phase: kill the replica running a long run, start it again, read the ledger |
//! | `sched`, `sched_replica`, `sched_stats` | scheduler replicas (child processes): fire delay, exactly once, cost per occurrence |
//! | `sched_faults` | what became of each killed run, from the ledger and the runs' announcements (pure) |
//! | `pairs` | what the pair workloads share: per-subject result, timed loop, their report section |
//! | `cli` | arguments, subcommands |
//! | `report` | the generic report: [`report::Section`], main table, ratios to the floor, commands, targets, JSON |
//! | `subjects` | the subjects a run can measure ([`subjects::Kind`]), what each is compared with, and `with_subject!` |
//! | `floor`, `rslock`, `dlock` | the subjects: raw `SET NX PX` + compare-and-delete (two connection settings), rslock, and dlock's public API (its variants) |
//! | `subject` | the [`subject::Subject`] trait: acquire, read the fence, release, pair |
//! | `redis_stats` | the sampler: `INFO commandstats`/`cpu` and `getrusage` deltas over a window, cost per operation |
//! | `control` | connections like dlock's, and the control connection (`FLUSHALL`, `INFO`, counters) |
//! | `child` | child processes of this binary and their line protocol |
//! | `table` | markdown tables and number formats |
//! | `stats` | percentiles, rates, hand-off gaps, overlaps, fairness (pure, unit-tested) |
//! | `affinity` | CPU pinning for W1 1-CPU |
//! | `rt` | error type, runtimes, clocks, CPU time, the counting global allocator |
//! | `spec` | the numbers of WORKLOADS.md (full and `--quick`) |

//!
//! # Extending
//! * **A subject** (a peer library, a floor with other connection settings): a file implementing
//!   [`subject::Subject`], and its line in `Kind`, `Kind::ALL` and `with_subject!`
//!   ([`subjects`]), and in `Kind::DEFAULT` if it runs without `--subjects`. W1, W1 1-CPU and
//!   W2 (the last two on both runtimes) run it, W3 too if it waits, W2-fence if it fences; the
//!   report gives it a row in every table and, per figure, a ratio to each subject
//!   `Kind::compared_with` names.
//! * **A workload**: a file with a stage function (`fn(&Setting) -> Result<Entry, _>`) whose
//!   result implements [`report::Section`], and its line in `STAGES` (and `CHILDREN` if it runs
//!   child processes). A pair workload reuses [`pairs`]: its timed loop, `PairResult` and a
//!   `Shape` const.
//! * **A figure of every window** (as allocations are): a counter read in
//!   `redis_stats::Snapshot::take` and a field of `WindowDelta` and `PerOp`; the command table
//!   shows it per pair and per acquisition.

// A benchmark reports on stdout and narrates its progress on stderr.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod affinity;
mod child;
mod cli;
mod cluster;
mod control;
mod dlock;
mod family;
mod family_stats;
mod floor;
mod guarded;
mod handoff_floor;
mod memory;
mod nodes;
mod pairs;
mod rate;
mod redis_stats;
mod report;
mod rslock;
mod rt;
mod sched;
mod sched_delivery;
mod sched_faults;
mod sched_kills;
mod sched_oneoff;
mod sched_oneoff_stats;
mod sched_replica;
mod sched_scale;
mod sched_scale_replica;
mod sched_scale_stats;
mod sched_stats;
mod spec;
mod stats;
mod subject;
mod subjects;
mod table;
mod w1;
mod w2;
mod w3;
mod w4;
mod w5;
mod w6;
mod w6_stats;
mod w7;
mod w7_stats;
mod w8;
mod web;

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use crate::cli::{ChildArgs, Command};
use crate::control::Control;
use crate::report::{Entry, Meta, Results};
use crate::rt::{BoxError, current_thread_runtime};
use crate::spec::Counts;
use crate::subject::Subject as _;
use crate::subjects::Setting;
use crate::subjects::{Kind, with_subject};

/// A stage of the run: its `--only` name, its name on stderr, and what it runs.
type Stage = (
    &'static str,
    &'static str,
    fn(&Setting) -> Result<Entry, BoxError>,
);

/// The stages, in run (and report) order.
const STAGES: [Stage; 22] = [
    ("w1", "W1 (unpinned)", w1::run),
    ("w1", "W1 1-CPU", w1::run_1cpu),
    ("w1", "W1 1-CPU multi-thread", w1::run_1cpu_multi_thread),
    ("w2", "W2 (multi-thread)", w2::run),
    ("w2", "W2 current-thread", w2::run_current_thread),
    ("w2", "W2-fence", w2::run_fenced),
    ("w2", "W2-fence, warm counters", w2::run_fenced_warm),
    ("w3", "W3", w3::run),
    ("w4", "W4", w4::run),
    ("w5", "W5", w5::run),
    ("mem", "memory", memory::run),
    ("w6", "W6 many held locks", w6::run),
    ("w7", "W7 deep queue", w7::run),
    ("w8", "W8 many contended locks", w8::run),
    ("cluster", "Cluster", cluster::run),
    ("sched", "scheduler", sched::run),
    ("sched", "scheduler delivery modes", sched_delivery::run),
    ("sched-scale", "scheduler at scale", sched_scale::run),
    ("sched-oneoff", "scheduler one-off burst", sched_oneoff::run),
    ("guarded", "guarded writes", guarded::run),
    ("rate", "W9 rate limiter", rate::run),
    ("web", "W10/W11 web layers", web::run),
];

/// A subcommand: its name, and the `main` of the child process.
type Child = (&'static str, fn(&ChildArgs) -> Result<(), BoxError>);

/// The subcommands this binary runs as a child process of itself (and `w1-one`, for profiling).
const CHILDREN: [Child; 13] = [
    ("w1-pinned", w1::pinned_child),
    ("w1-one", w1::one_child),
    ("w3-worker", w3::child_main),
    ("w4-worker", w4::child_main),
    ("w5-worker", w5::child_main),
    ("handoff-floor", handoff_floor::child_main),
    ("mem", memory::child_main),
    ("w6", w6::child_main),
    ("sched-replica", sched_replica::child_main),
    ("sched-scale-replica", sched_scale_replica::child_main),
    ("w7-worker", w7::child_main),
    ("w8-worker", w8::child_main),
    ("rate-worker", rate::worker_main),
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result =
        cli::parse(&args, &CHILDREN.map(|(name, _)| name)).and_then(|command| match command {
            Command::Run {
                counts,
                only,
                subjects,
                json,
            } => run(&counts, &only, subjects, &json),
            Command::Child(args) => match CHILDREN.iter().find(|(name, _)| *name == args.name) {
                Some((_, child_main)) => child_main(&args),
                None => Err(format!("unknown subcommand `{}`", args.name).into()),
            },
            Command::Help => {
                println!("{}", cli::USAGE);
                Ok(())
            }
        });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dlock-bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The benchmark run: every selected stage, then the report.
fn run(counts: &Counts, only: &[String], subjects: Vec<Kind>, json: &Path) -> Result<(), BoxError> {
    let server = dlock_testkit::RedisServer::start()?;
    let url = server.url();
    let server_pid = server
        .pid()
        .ok_or("redis-server is not running right after it started")?;
    let runtime = current_thread_runtime()?;
    let (redis_version, server_name) =
        runtime.block_on(async { Control::connect(&url).await?.server_version().await })?;
    // Every subject connects once before any stage runs: a subject that cannot run here (a dlock
    // variant whose option dlock-core lacks) stops the run at once, not after minutes.
    for kind in &subjects {
        with_subject!(*kind, S => runtime.block_on(S::connect(&url)).map(drop))
            .map_err(|e| format!("subject `{}`: {e}", kind.name()))?;
    }
    drop(runtime);
    let meta = Meta::collect(*counts, (redis_version, server_name), &subjects);
    if counts.quick {
        eprintln!("dlock-bench: QUICK smoke run: smaller counts, figures not comparable");
    }
    eprintln!("dlock-bench: {} at {url}", meta.server);

    let setting = Setting {
        url,
        server_pid,
        counts: *counts,
        subjects,
    };
    let selected = STAGES
        .iter()
        .filter(|(name, ..)| only.iter().any(|o| o == name));
    let entries = selected
        .map(|(_, stage, run)| narrated(stage, || run(&setting)))
        .collect::<Result<_, _>>()?;
    let results = Results::new(meta, entries);
    println!("{}", results.markdown());
    results.write_json(json)?;
    eprintln!("dlock-bench: results written to {}", json.display());
    if !counts.quick {
        // The benchmark never writes into the docs: a run worth keeping is recorded by hand.
        eprintln!(
            "dlock-bench: to record this run, save the report (stdout) as \
             docs/benchmarks/YYYY-MM-DD-run-<letter>.md and paste its summary into \
             BENCHMARKS.md (its \"Reproduce\" section says how)"
        );
    }
    Ok(())
}

/// Runs one stage, narrating on stderr.
fn narrated<T>(name: &str, f: impl FnOnce() -> Result<T, BoxError>) -> Result<T, BoxError> {
    eprintln!("dlock-bench: running {name} …");
    let start = Instant::now();
    let result = f().map_err(|e| format!("{name}: {e}"))?;
    let seconds = start.elapsed().as_secs_f64();
    eprintln!("dlock-bench: {name} done in {seconds:.1} s");
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stage_has_an_only_name() {
        for (only, ..) in STAGES {
            assert!(cli::WORKLOADS.contains(&only), "{only}");
        }
        for name in cli::WORKLOADS {
            assert!(STAGES.iter().any(|(only, ..)| *only == name), "{name}");
        }
    }
}
