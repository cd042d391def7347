//! A scheduler replica of the scheduler workload (`dlock-bench sched-replica`), issue #6: one
//! `dlock_scheduler::Scheduler` with one job on a 1-second cron (`* * * * * *`, UTC), default
//! options, its clock skewed by `--skew-ms` (`SkewedClock::millis`).
//!
//! The handler is as trivial as a job gets: one `INCR <job>:count:<occurrence ms>` through the
//! scheduler's own client connection. Those counters tell the parent how often each occurrence
//! ran (the pattern of `tests/worker/replica.rs`), and the parent subtracts the `INCR`s from the
//! window's commands.
//!
//! The delivery comparison (issue #30) adds two options. `--delivery MODE`: the job runs with
//! a 1 s lease ([`SCHED_DELIVERY_LEASE`]) and that delivery ([`SchedDelivery`]); without it the
//! job is exactly as above (default lease and delivery). `--faults` (the kill phase): before its
//! `INCR`, the handler announces its run on a Redis list ([`Announcement`], [`started_key`]), and
//! the first attempt of every occurrence on a multiple of 4 s works [`SCHED_LONG_RUN`] first
//! ([`crate::sched_faults::is_long`]):
//! the run the parent kills.
//!
//! Protocol: builds its client and scheduler (connection opened), prints `READY`, starts on
//! `GO`, runs until `STOP` (graceful shutdown, drain up to 5 s), prints `RESULT` with its runs
//! and its CPU time from `GO` to the end of shutdown.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dlock_scheduler::{Job, JobContext, Scheduler, SkewedClock};
use serde::{Deserialize, Serialize};

use crate::child::{STOP, print_result, ready_then_wait_for_go, wait_for_line};
use crate::cli::ChildArgs;
use crate::rt::{BoxError, elapsed_ns, multi_thread_runtime, process_cpu_us, wall_us};
use crate::sched_faults::Announcement;
use crate::spec::{SCHED_CRON, SCHED_DELIVERY_LEASE, SCHED_LONG_RUN, SCHED_TZ, SchedDelivery};
use crate::stats::ns_to_s;

/// How long a stopping replica lets a running job finish.
const DRAIN: Duration = Duration::from_secs(5);

/// The counter key of one occurrence of `job` (Unix ms of its nominal instant).
pub(crate) fn count_key(job: &str, occurrence_ms: i64) -> String {
    format!("{}{occurrence_ms}", count_prefix(job))
}

/// The prefix of every counter key of `job`.
pub(crate) fn count_prefix(job: &str) -> String {
    format!("schedbench:{job}:count:")
}

/// The list on which the kill phase's handlers announce their runs ([`Announcement`]).
pub(crate) fn started_key(job: &str) -> String {
    format!("schedbench:{job}:started")
}

/// The id replica number `replica` records in the ledger.
pub(crate) fn replica_id(replica: u32) -> String {
    format!("r{replica}")
}

/// What one replica reports to the parent.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct ReplicaReport {
    pub(crate) id: String,
    pub(crate) skew_ms: i64,
    /// Runs its handler performed.
    pub(crate) runs: u64,
    /// Runs still going at shutdown that finished (drained) or were cancelled: 0 expected.
    pub(crate) drained: usize,
    pub(crate) cancelled: usize,
    /// Seconds from `GO` to the end of shutdown, and the process's CPU time over them.
    pub(crate) run_s: f64,
    pub(crate) cpu_us: u64,
}

/// Entry point of `dlock-bench sched-replica --url URL --process N --skew-ms MS --job NAME
/// [--delivery MODE] [--faults]`.
pub(crate) fn child_main(args: &ChildArgs) -> Result<(), BoxError> {
    let (url, replica, skew_ms, job) = (
        args.url.as_str(),
        args.process()?,
        args.skew_ms,
        args.job()?,
    );
    let runtime = multi_thread_runtime()?;
    let runs = Arc::new(AtomicU64::new(0));
    let how = How {
        skew_ms,
        delivery: args.delivery,
        faults: args.faults,
    };
    let scheduler = runtime.block_on(set_up(url, replica, job, how, runs.clone()))?;
    ready_then_wait_for_go()?;
    let cpu_before = process_cpu_us()?;
    let start = Instant::now();
    let stopped = runtime.block_on(async {
        let stop = async {
            // A closed stdin stops the replica too: the parent is gone.
            let _ = tokio::task::spawn_blocking(|| wait_for_line(STOP)).await;
        };
        scheduler.run_until(stop, DRAIN).await
    });
    let run_ns = elapsed_ns(start);
    print_result(&ReplicaReport {
        id: replica_id(replica),
        skew_ms,
        runs: runs.load(Ordering::Relaxed),
        drained: stopped.drained,
        cancelled: stopped.cancelled,
        run_s: ns_to_s(run_ns),
        cpu_us: process_cpu_us()?.saturating_sub(cpu_before),
    })
}

/// How a replica runs its job.
#[derive(Clone, Copy, Debug)]
struct How {
    skew_ms: i64,
    /// The delivery comparison's job (1 s lease, this delivery), or the default job.
    delivery: Option<SchedDelivery>,
    /// Announce every run and make some long (the kill phase).
    faults: bool,
}

async fn set_up(
    url: &str,
    replica: u32,
    job: &str,
    how: How,
    runs: Arc<AtomicU64>,
) -> Result<Scheduler, BoxError> {
    let client = crate::dlock::client(url)?;
    client.ping().await?;
    let handler = move |ctx: JobContext| {
        let runs = runs.clone();
        async move {
            let key = count_key(ctx.job(), ctx.occurrence().timestamp_millis());
            let mut con = ctx.client().connection();
            if how.faults {
                let started = announce(&ctx).await?;
                if started.is_long() {
                    tokio::time::sleep(SCHED_LONG_RUN).await;
                }
            }
            redis::cmd("INCR")
                .arg(key)
                .query_async::<u64>(&mut con)
                .await?;
            runs.fetch_add(1, Ordering::Relaxed);
            Ok::<(), BoxError>(())
        }
    };
    let mut job = Job::new(job, SCHED_CRON, SCHED_TZ, handler)?;
    if let Some(delivery) = how.delivery {
        job = job
            .lease(SCHED_DELIVERY_LEASE)
            .delivery(delivery.delivery());
    }
    let scheduler = Scheduler::builder(client)
        .replica_id(replica_id(replica))
        .clock(SkewedClock::millis(how.skew_ms))
        .job(job)
        .build()?;
    Ok(scheduler)
}

/// Pushes the run's [`Announcement`] (its start by the wall clock) for the parent.
async fn announce(ctx: &JobContext) -> Result<Announcement, BoxError> {
    let started = Announcement {
        occurrence_ms: ctx.occurrence().timestamp_millis(),
        attempt: ctx.attempt(),
        replica: ctx.replica().id().to_owned(),
        pid: ctx.replica().pid(),
        at_us: wall_us()?,
    };
    let mut con = ctx.client().connection();
    redis::cmd("RPUSH")
        .arg(started_key(ctx.job()))
        .arg(started.line())
        .query_async::<u64>(&mut con)
        .await?;
    Ok(started)
}
