//! Run with: `make bench` (or `cargo run --release -p dlock-bench -- [--quick]
//! [--only w1,w2,w3,mem,wd,sched] [--json PATH]`).
//!
//! The benchmark of `/work/shared/WORKLOADS.md` (issue #3): dlock through its ordinary public API
//! beside a raw-Redis floor measured in the same run, on a redis-server the benchmark starts
//! itself (dlock-testkit: free loopback port, `--save '' --appendonly no`, nothing else
//! connected). Two more workloads have no floor: 10,000 locks held under the watchdog (issue #4)
//! and three dlock-scheduler replicas on a 1-second cron (issue #6). It prints one markdown
//! report on stdout and writes the figures as JSON.
//!
//! # Layout
//! | module | what |
//! |---|---|
//! | `cli` | arguments, subcommands |
//! | `spec` | the numbers of WORKLOADS.md (full and `--quick`) |
//! | `subject` | raw floor or dlock behind one `pair` call |
//! | `floor` | the raw floor: `SET NX PX` + compare-and-delete `EVALSHA` |
//! | `w1`, `w2`, `w3`, `w3_worker` | the workloads (W3's workers are child processes) |
//! | `handoff_floor` | W3's floor: one-way pub/sub latency between two processes, W3's rhythm |
//! | `memory` | client RSS and Redis memory per held guard and per waiting task |
//! | `wd` | 10,000 locks under the watchdog: round trips and CPU per renewal round (child process) |
//! | `sched`, `sched_replica` | scheduler replicas (child processes): fire delay, exactly once, cost per occurrence |
//! | `sched_stats` | the scheduler workload's statistics (pure, unit-tested) |
//! | `redis_stats` | control connection: `FLUSHALL`, `INFO commandstats`/`memory`, queue lengths |
//! | `window` | a measured window: command, server-CPU and client-CPU deltas |
//! | `affinity` | CPU pinning for W1 1-CPU |
//! | `rt` | error type, runtimes, clocks, CPU time |
//! | `child` | child processes of this binary and their line protocol |
//! | `stats` | percentiles, hand-off gaps, overlaps, fairness (pure, unit-tested) |
//! | `targets` | ratios to the floor and the targets of issues #3, #4 and #6 |
//! | `report`, `report_wd_sched` | markdown and JSON output |

// A benchmark reports on stdout and narrates its progress on stderr.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod affinity;
mod child;
mod cli;
mod control;
mod dlock;
mod floor;
mod handoff_floor;
mod memory;
mod pairs;
mod redis_stats;
mod report;
mod rt;
mod sched;
mod sched_replica;
mod sched_stats;
mod spec;
mod stats;
mod subject;
mod subjects;
mod table;
mod w1;
mod w2;
mod w3;
mod w3_worker;
mod wd;

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use crate::cli::Command;
use crate::control::Control;
use crate::report::{Entry, Meta, Results};
use crate::rt::{BoxError, current_thread_runtime};
use crate::spec::{Counts, Setting};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = cli::parse(&args).and_then(|command| match command {
        Command::Run { counts, only, json } => run(&counts, only, &json),
        Command::W1Pinned { url, counts } => w1::pinned_child(&url, &counts),
        Command::W1One {
            url,
            subject,
            counts,
        } => w1::one_child(subject, &url, &counts),
        Command::W3Worker {
            url,
            process,
            subject,
            counts,
        } => w3_worker::child_main(&url, process, subject, &counts),
        Command::HandoffFloor {
            url,
            process,
            counts,
        } => handoff_floor::child_main(&url, process, &counts),
        Command::Memory { probe, url, counts } => memory::child_main(&probe, &url, &counts),
        Command::Watchdog { url, counts } => wd::child_main(&url, &counts),
        Command::SchedReplica {
            url,
            replica,
            skew_ms,
            job,
        } => sched_replica::child_main(&url, replica, skew_ms, &job),
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

/// A workload of the run: its name for `--only`, its name on stderr, and how it runs.
struct Stage {
    only: &'static str,
    name: &'static str,
    run: fn(&Setting) -> Result<Entry, BoxError>,
}

/// The workloads, in run (and report) order.
const STAGES: [Stage; 7] = [
    Stage {
        only: "w1",
        name: "W1 (unpinned)",
        run: w1::run,
    },
    Stage {
        only: "w1",
        name: "W1 1-CPU",
        run: w1::run_1cpu,
    },
    Stage {
        only: "w2",
        name: "W2",
        run: w2::run,
    },
    Stage {
        only: "w3",
        name: "W3",
        run: w3::run,
    },
    Stage {
        only: "mem",
        name: "memory",
        run: memory::run,
    },
    Stage {
        only: "wd",
        name: "watchdog",
        run: wd::run,
    },
    Stage {
        only: "sched",
        name: "scheduler",
        run: sched::run,
    },
];

/// The benchmark run: every selected workload, then the report.
fn run(counts: &Counts, only: cli::Workloads, json: &Path) -> Result<(), BoxError> {
    let server = dlock_testkit::RedisServer::start()?;
    let url = server.url();
    let server_pid = server
        .pid()
        .ok_or("redis-server is not running right after it started")?;
    let redis_version = current_thread_runtime()?
        .block_on(async { Control::connect(&url).await?.redis_version().await })?;
    let meta = Meta::collect(*counts, redis_version);
    if counts.quick {
        eprintln!("dlock-bench: QUICK smoke run: smaller counts, figures not comparable");
    }
    eprintln!("dlock-bench: redis {} at {url}", meta.redis_version);

    let setting = Setting {
        url,
        server_pid,
        counts: *counts,
    };
    let selected = STAGES.iter().filter(|s| only.includes(s.only));
    let entries = selected
        .map(|s| stage(s.name, || (s.run)(&setting)))
        .collect::<Result<_, _>>()?;
    let results = Results::new(meta, entries);
    println!("{}", results.markdown());
    results.write_json(json)?;
    eprintln!("dlock-bench: results written to {}", json.display());
    Ok(())
}

/// Runs one workload, narrating on stderr.
fn stage<T>(name: &str, f: impl FnOnce() -> Result<T, BoxError>) -> Result<T, BoxError> {
    eprintln!("dlock-bench: running {name} …");
    let start = Instant::now();
    let result = f().map_err(|e| format!("{name}: {e}"))?;
    eprintln!(
        "dlock-bench: {name} done in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    Ok(result)
}
