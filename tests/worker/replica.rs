//! `dlock-test-worker replica …`: one scheduler replica for the multi-process scheduler tests.
//!
//! `replica url=… job=… cron=… [id=…] [skew_ms=±N] [run_ms=N] [work_ms=N] [lease_ms=N]
//! [drain_ms=N] [overlap=allow] [poll_ms=N] [heartbeat_ms=N] [hold=<lock>] [block_ms=N]
//! [loop_fault=panic|block] [fault_after_ms=N] [fault_ms=N]` runs a `Scheduler` with one job for
//! `run_ms` (or until SIGTERM), then shuts down gracefully — which shuts its client down too —
//! and prints `stopped drained=N cancelled=N released=N failures=N` (the last two from the
//! client's shutdown). Without `lease_ms` the job has the default run lease; `poll_ms` is the
//! fallback `run_now` poll (default 200 ms), `heartbeat_ms` the replica's heartbeat (default
//! the scheduler's); with `hold`, another task of the process holds the
//! lock `<lock>` on the scheduler's client (20 s lease, watchdog) until the process ends, as
//! other work of a service would. The job's handler records each run it performs:
//! `INCR <job>:count:<occurrence ms>` (exactly-once is checked on these counters) and
//! `RPUSH <job>:runs "<occurrence ms> <replica id> <fence>"`, prints `ran <occurrence ms>`,
//! then works for `work_ms` (honouring the lease: a lost lease cancels it).
//!
//! Faults, for `tests/scheduler/scheduler_stall.rs`: with `block_ms`, the first run this replica performs
//! prints `blocking <occurrence ms>` and then blocks its thread for `block_ms`
//! (`std::thread::sleep`; with the worker's `threads=1`, that stalls the whole scheduler). With
//! `loop_fault`, once `fault_after_ms` (default 0) have passed, the job loop's task (through
//! `dlock_scheduler::__private::on_loop_poll`) prints `loop fault <kind>` and panics, or waits
//! for `fault_ms` (default 10 min; in `block_in_place`, so needs a multi-thread runtime) and
//! then prints `loop fault over` — while the rest of the scheduler (its heartbeat) goes on.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use dlock_core::{Client, MutexOptions};
use dlock_scheduler::{Job, JobContext, Overlap, Scheduler, SkewedClock};
use redis::AsyncCommands;
use tokio::signal::unix::{SignalKind, signal};

use crate::{BoxError, num, opt, report};

pub(crate) async fn replica(opts: &HashMap<String, String>) -> Result<(), BoxError> {
    let url = opt(opts, "url")?;
    let job = opt(opts, "job")?.to_owned();
    let cron = opt(opts, "cron")?.replace('_', " ");
    let skew: i64 = opts.get("skew_ms").map_or(Ok(0), |v| v.parse())?;
    let run_for = Duration::from_millis(num(opts, "run_ms", 10_000)?);
    let work = Duration::from_millis(num(opts, "work_ms", 50)?);
    let drain = Duration::from_millis(num(opts, "drain_ms", 5_000)?);
    let poll = Duration::from_millis(num(opts, "poll_ms", 200)?);
    let client = Client::open(url)?;
    let con = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    let name = job.clone();
    let block = opts
        .get("block_ms")
        .map(|ms| ms.parse().map(Duration::from_millis))
        .transpose()?;
    let blocked = Arc::new(AtomicBool::new(false));
    let handler = move |ctx: JobContext| {
        let (mut con, job) = (con.clone(), name.clone());
        let blocked = blocked.clone();
        async move {
            let occurrence = ctx.occurrence().timestamp_millis();
            let _: u64 = con.incr(format!("{job}:count:{occurrence}"), 1).await?;
            let line = format!(
                "{occurrence} {} {}",
                ctx.replica().id(),
                ctx.fencing_token()
            );
            let _: u64 = con.rpush(format!("{job}:runs"), line).await?;
            report(&format!("ran {occurrence}"));
            if let Some(block) = block
                && !blocked.swap(true, Ordering::Relaxed)
            {
                report(&format!("blocking {occurrence}"));
                std::thread::sleep(block);
            }
            tokio::time::sleep(work).await;
            Ok::<(), redis::RedisError>(())
        }
    };
    let mut job = Job::new(&job, &cron, "UTC", handler)?;
    if let Some(lease) = opts.get("lease_ms") {
        job = job.lease(Duration::from_millis(lease.parse()?));
    }
    if opts.get("overlap").is_some_and(|o| o == "allow") {
        job = job.overlap(Overlap::Allow);
    }
    if let Some(name) = opts.get("hold") {
        hold(&client, name).await?;
    }
    let mut builder = Scheduler::builder(client)
        .clock(SkewedClock::millis(skew))
        .request_poll(poll)
        .job(job);
    if let Some(id) = opts.get("id") {
        builder = builder.replica_id(id);
    }
    if let Some(every) = opts.get("heartbeat_ms") {
        builder = builder.heartbeat(Duration::from_millis(every.parse()?));
    }
    if let Some(kind) = opts.get("loop_fault") {
        builder = loop_fault(builder, kind, opts)?;
    }
    let scheduler = builder.build()?;
    let mut terminate = signal(SignalKind::terminate())?;
    report("started");
    let stop = async move {
        tokio::select! {
            () = tokio::time::sleep(run_for) => {}
            _ = terminate.recv() => {}
        }
    };
    let stopped = scheduler.run_until(stop, drain).await;
    let (released, failures) = stopped
        .client
        .as_ref()
        .map_or((0, 0), |c| (c.released, c.failures.len()));
    report(&format!(
        "stopped drained={} cancelled={} released={released} failures={failures}",
        stopped.drained, stopped.cancelled
    ));
    Ok(())
}

/// Takes the lock `name` on `client` and has a task of its own hold it until the process ends.
async fn hold(client: &Client, name: &str) -> Result<(), BoxError> {
    let options = MutexOptions::new().ttl(Duration::from_secs(20)).watchdog();
    let guard = client.mutex_with(name, options)?.acquire().await?;
    tokio::spawn(async move {
        let _guard = guard;
        std::future::pending::<()>().await;
    });
    Ok(())
}

/// Makes the job loop's task panic (`kind` = `panic`) or block its thread (`block`, for
/// `fault_ms`) once `fault_after_ms` have passed: see the module docs.
#[allow(clippy::panic)] // The fault under test: a panic in the job loop's task.
fn loop_fault(
    builder: dlock_scheduler::SchedulerBuilder,
    kind: &str,
    opts: &HashMap<String, String>,
) -> Result<dlock_scheduler::SchedulerBuilder, BoxError> {
    let panics = match kind {
        "panic" => true,
        "block" => false,
        other => return Err(format!("unknown loop_fault={other}").into()),
    };
    let after = Duration::from_millis(num(opts, "fault_after_ms", 0)?);
    let hold = Duration::from_millis(num(opts, "fault_ms", 600_000)?);
    let start = Instant::now();
    let struck = AtomicBool::new(false);
    let hook = move |_job: &str| {
        if start.elapsed() < after || struck.swap(true, Ordering::Relaxed) {
            return;
        }
        if panics {
            report("loop fault panic");
            // Unwinds like `panic!` without the panic hook: the expected fault prints no
            // backtrace into the test's output, where CI's excerpt would lose the real failure.
            std::panic::resume_unwind(Box::new(
                "dlock-test-worker: the job loop panics (loop_fault=panic)",
            ));
        }
        report("loop fault block");
        // The loop's task waits while the runtime goes on: `block_in_place` hands this
        // worker's queued tasks to another thread. (A plain `thread::sleep` here also stalls
        // whatever task Tokio queued on this worker to run next, which cannot be stolen — at
        // times the heartbeat's connection — making the whole replica stall, the other case.)
        tokio::task::block_in_place(|| std::thread::sleep(hold));
        report("loop fault over");
    };
    Ok(dlock_scheduler::__private::on_loop_poll(builder, hook))
}
