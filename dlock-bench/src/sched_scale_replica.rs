//! A replica of the scheduler scale stages (`dlock-bench sched-scale-replica`), issue #31: one
//! `dlock_scheduler::Scheduler` with no job in code and one handler registered by name
//! ([`SCHED_SCALE_HANDLER`]), default options, replica id `r<process>`. In `sched-scale` the
//! parent's admin client adds the run-time schedules that name the handler (`scale:<i>`,
//! 1-second cron); in `sched-oneoff` it enqueues one-off jobs of the handler (`run_at`, the
//! argument is the job's index), which run as the hidden job `once:<handler>`
//! ([`ONE_OFF_JOB`]). This replica follows and claims both as every replica does.
//!
//! The handler sends nothing to Redis, so the window's Redis figures are the scheduler's alone:
//! its first act is to read the wall clock, and it keeps `(schedule i, occurrence s, start −
//! occurrence µs)` in memory ([`ScaleRun`]). The wall clock is CLOCK_REALTIME, the clock the
//! benchmark's redis-server reads for `TIME` on this machine, so the delay is the handler's
//! start by the Redis server's clock − the nominal instant, at µs resolution (the ledger's
//! `start_delay()` is the claim's time, ms resolution, before the lock and the ledger's
//! "running" record). The parent merges the three replicas' runs: who ran each occurrence, how
//! often. A one-off run is kept as its index, due time, and the handler's start and end by the
//! wall clock ([`OneOffRun`]).
//!
//! Protocol: builds its client and scheduler (connection opened), prints `READY`, starts on
//! `GO`, runs until `STOP` (graceful shutdown, drain up to 5 s), prints `RESULT` with its runs
//! and its CPU time from `GO` to the end of shutdown.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use dlock_scheduler::{JobContext, Scheduler};
use serde::{Deserialize, Serialize};

use crate::child::{STOP, print_result, ready_then_wait_for_go, wait_for_line};
use crate::cli::ChildArgs;
use crate::rt::{BoxError, elapsed_ns, multi_thread_runtime, process_cpu_us, wall_us};
use crate::sched_replica::replica_id;
use crate::spec::SCHED_SCALE_HANDLER;
use crate::stats::ns_to_s;

/// How long a stopping replica lets a running job finish.
const DRAIN: Duration = Duration::from_secs(5);

/// The prefix of every run-time schedule of the stage: `scale:<i>`, i = 0 … N − 1.
pub(crate) const SCHEDULE_PREFIX: &str = "scale:";

/// The hidden job whose runs are the handler's one-off jobs (`once:<handler>`).
pub(crate) const ONE_OFF_JOB: &str = "once:scale_tick";

/// The name of schedule `i`.
pub(crate) fn schedule_name(i: u64) -> String {
    format!("{SCHEDULE_PREFIX}{i}")
}

/// One run of the handler: schedule index, nominal occurrence (Unix s), and the handler's start
/// − the occurrence (µs, wall clock; negative = started early).
pub(crate) type ScaleRun = (u32, i64, i64);

/// One run of a one-off job: its index (the job's argument), its due time (Unix ms, the
/// context's occurrence), and the handler's start and end by the wall clock (Unix µs).
pub(crate) type OneOffRun = (u32, i64, u64, u64);

/// What one replica reports to the parent.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct ScaleReplicaReport {
    pub(crate) id: String,
    /// Every scheduled run of its handler (manual runs: none are requested).
    pub(crate) runs: Vec<ScaleRun>,
    /// Every run of a one-off job of the handler.
    pub(crate) one_offs: Vec<OneOffRun>,
    /// Runs of a schedule whose name is not `scale:<i>`, manual runs, and one-off runs whose
    /// argument is not an index (0 expected).
    pub(crate) foreign: u64,
    /// Seconds from `GO` to the end of shutdown, and the process's CPU time over them.
    pub(crate) run_s: f64,
    pub(crate) cpu_us: u64,
}

/// Entry point of `dlock-bench sched-scale-replica --url URL --process N`.
pub(crate) fn child_main(args: &ChildArgs) -> Result<(), BoxError> {
    let (url, replica) = (args.url.as_str(), args.process()?);
    let runtime = multi_thread_runtime()?;
    let runs: Arc<Mutex<Recorded>> = Arc::default();
    let scheduler = runtime.block_on(set_up(url, replica, runs.clone()))?;
    ready_then_wait_for_go()?;
    let cpu_before = process_cpu_us()?;
    let start = Instant::now();
    runtime.block_on(async {
        let stop = async {
            // A closed stdin stops the replica too: the parent is gone.
            let _ = tokio::task::spawn_blocking(|| wait_for_line(STOP)).await;
        };
        scheduler.run_until(stop, DRAIN).await
    });
    let run_ns = elapsed_ns(start);
    let cpu_us = process_cpu_us()?.saturating_sub(cpu_before);
    let recorded = std::mem::take(&mut *runs.lock().unwrap_or_else(PoisonError::into_inner));
    print_result(&ScaleReplicaReport {
        id: replica_id(replica),
        runs: recorded.runs,
        one_offs: recorded.one_offs,
        foreign: recorded.foreign,
        run_s: ns_to_s(run_ns),
        cpu_us,
    })
}

/// The handler's record.
#[derive(Debug, Default)]
struct Recorded {
    runs: Vec<ScaleRun>,
    one_offs: Vec<OneOffRun>,
    foreign: u64,
}

async fn set_up(
    url: &str,
    replica: u32,
    runs: Arc<Mutex<Recorded>>,
) -> Result<Scheduler, BoxError> {
    let client = crate::dlock::client(url)?;
    client.ping().await?;
    let handler = move |ctx: JobContext| {
        // First: the start, before anything else the handler does.
        let at_us = wall_us();
        let runs = runs.clone();
        async move {
            let at_us = at_us?;
            if ctx.job() == ONE_OFF_JOB {
                let index = ctx.args::<u32>().ok();
                let due_ms = ctx.occurrence().timestamp_millis();
                let end_us = wall_us()?;
                let mut recorded = runs.lock().unwrap_or_else(PoisonError::into_inner);
                match index {
                    Some(i) => recorded.one_offs.push((i, due_ms, at_us, end_us)),
                    None => recorded.foreign += 1,
                }
                return Ok::<(), BoxError>(());
            }
            let delay_us = i64::try_from(at_us)? - ctx.occurrence().timestamp_micros();
            let index = ctx
                .job()
                .strip_prefix(SCHEDULE_PREFIX)
                .and_then(|i| i.parse::<u32>().ok());
            let mut recorded = runs.lock().unwrap_or_else(PoisonError::into_inner);
            match index {
                Some(i) if !ctx.is_manual() => {
                    let occurrence_s = ctx.occurrence().timestamp();
                    recorded.runs.push((i, occurrence_s, delay_us));
                }
                _ => recorded.foreign += 1,
            }
            Ok::<(), BoxError>(())
        }
    };
    let scheduler = Scheduler::builder(client)
        .replica_id(replica_id(replica))
        .handler(SCHED_SCALE_HANDLER, handler)
        .build()?;
    Ok(scheduler)
}
