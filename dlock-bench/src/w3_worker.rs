//! The W3 worker process (`dlock-bench w3-worker --subject NAME`): 4 tasks sharing one client of
//! the subject (for dlock, one `Client`) and one plain connection for the workload's own commands, each task looping exactly as WORKLOADS.md says:
//!
//! 1. `INCR w3:tickets` outside the lock; stop when the result is past the limit (2,000).
//! 2. Blocking acquire of `w3:lock`, waiting up to 30 s (a timeout is counted; the ticket is lost).
//! 3. `t_acq` = CLOCK_MONOTONIC ns right after acquire returns.
//! 4. `GET w3:counter` (nil = 0); pause 1 ms (`spawn_blocking(|| sleep(1 ms))`); `SET w3:counter
//!    value+1`.
//! 5. `t_rel` = CLOCK_MONOTONIC ns just before release; release; record `(worker, t_acq, t_rel)`.
//!
//! Runtime: multi-thread, 2 worker threads. The worker warms up (connections, scripts) on its own
//! keys, prints `READY`, and starts when the parent sends `GO`, so both processes start together.

use std::sync::Arc;

use redis::aio::MultiplexedConnection;
use serde::{Deserialize, Serialize};

use crate::child::{print_result, ready_then_wait_for_go};
use crate::cli::ChildArgs;
use crate::control::raw_connection;
use crate::rt::{BoxError, monotonic_ns, multi_thread_runtime};
use crate::spec::{Counts, W3_PAUSE};
use crate::stats::LockEvent;
use crate::subject::{Subject, warm_up};
use crate::subjects::with_subject;

/// The contended lock.
pub(crate) const LOCK: &str = "w3:lock";
/// Ticket counter (outside the lock).
pub(crate) const TICKETS: &str = "w3:tickets";
/// The read-pause-write counter protected by the lock.
pub(crate) const COUNTER: &str = "w3:counter";
/// Warm-up pairs per task, on its own keys.
const WARMUP_PAIRS: u64 = 10;

/// What one worker process reports to the parent.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct WorkerReport {
    pub(crate) process: u32,
    /// CLOCK_MONOTONIC ns when the process started its loops (after `GO`), and when all its
    /// tasks were done.
    pub(crate) start_ns: u64,
    pub(crate) end_ns: u64,
    pub(crate) events: Vec<LockEvent>,
    /// Acquires that gave up after 30 s.
    pub(crate) timeouts: u64,
    /// Releases that found the lease gone (`Expired`/`TakenOver`).
    pub(crate) not_held_at_release: u64,
    /// The workload's own commands, subtracted from the command counts.
    pub(crate) incr: u64,
    pub(crate) get: u64,
    pub(crate) set: u64,
}

struct Worker<S> {
    subject: S,
    conn: MultiplexedConnection,
}

/// Entry point of `dlock-bench w3-worker --url URL --process P --subject NAME`.
pub(crate) fn child_main(args: &ChildArgs) -> Result<(), BoxError> {
    let (url, process, counts) = (args.url.as_str(), args.process()?, &args.counts);
    with_subject!(args.subject()?, S => worker_main::<S>(url, process, counts))
}

fn worker_main<S: Subject>(url: &str, process: u32, counts: &Counts) -> Result<(), BoxError> {
    let runtime = multi_thread_runtime()?;
    let worker = Arc::new(runtime.block_on(set_up::<S>(url, process, counts))?);
    ready_then_wait_for_go()?;
    let report = runtime.block_on(run(worker, process, counts))?;
    print_result(&report)
}

async fn set_up<S: Subject>(
    url: &str,
    process: u32,
    counts: &Counts,
) -> Result<Worker<S>, BoxError> {
    let subject = S::connect(url).await?;
    for task in 0..counts.w3_tasks {
        warm_up(
            &subject,
            &format!("w3:warm:{process}:{task}:"),
            0..WARMUP_PAIRS,
        )
        .await?;
    }
    let mut conn = raw_connection(url).await?;
    redis::cmd("PING").query_async::<()>(&mut conn).await?;
    Ok(Worker { subject, conn })
}

async fn run<S: Subject>(
    worker: Arc<Worker<S>>,
    process: u32,
    counts: &Counts,
) -> Result<WorkerReport, BoxError> {
    let start_ns = monotonic_ns()?;
    let mut handles = Vec::new();
    for task in 0..counts.w3_tasks {
        let id = process * counts.w3_tasks + task;
        handles.push(tokio::spawn(run_task(
            worker.clone(),
            id,
            counts.w3_acquisitions,
        )));
    }
    let mut report = WorkerReport {
        process,
        start_ns,
        ..WorkerReport::default()
    };
    for handle in handles {
        let task = handle.await??;
        report.events.extend(task.events);
        report.timeouts += task.timeouts;
        report.not_held_at_release += task.not_held_at_release;
        report.incr += task.incr;
        report.get += task.get;
        report.set += task.set;
    }
    report.end_ns = monotonic_ns()?;
    Ok(report)
}

/// One worker task's loop (steps 1–5).
async fn run_task<S: Subject>(
    worker: Arc<Worker<S>>,
    id: u32,
    limit: u64,
) -> Result<WorkerReport, BoxError> {
    let lock = worker.subject.lock(LOCK)?;
    let mut conn = worker.conn.clone();
    let mut tally = WorkerReport::default();
    loop {
        let ticket: u64 = redis::cmd("INCR")
            .arg(TICKETS)
            .query_async(&mut conn)
            .await?;
        tally.incr += 1;
        if ticket > limit {
            return Ok(tally);
        }
        let guard = match S::acquire(&lock).await {
            Ok(Some(guard)) => guard,
            Ok(None) => {
                tally.timeouts += 1;
                continue;
            }
            Err(e) => return Err(format!("worker {id}: acquire failed: {e}").into()),
        };
        let t_acq = monotonic_ns()?;
        let value: Option<u64> = redis::cmd("GET")
            .arg(COUNTER)
            .query_async(&mut conn)
            .await?;
        tally.get += 1;
        tokio::task::spawn_blocking(|| std::thread::sleep(W3_PAUSE)).await?;
        redis::cmd("SET")
            .arg(COUNTER)
            .arg(value.unwrap_or(0) + 1)
            .query_async::<()>(&mut conn)
            .await?;
        tally.set += 1;
        let t_rel = monotonic_ns()?;
        if !S::release(guard).await? {
            tally.not_held_at_release += 1;
        }
        tally.events.push(LockEvent {
            worker: id,
            t_acq,
            t_rel,
        });
    }
}
