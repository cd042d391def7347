//! `dlock-test-worker oneoff-replica …`: one scheduler replica that runs one-off jobs, for
//! tests/scheduler/scheduler_oneoff.rs.
//!
//! `oneoff-replica url=… id=… [concurrency=64] [history=5000] [work_ms=0] [run_ms=120000]`
//! registers the handler `count` (at most once, the scheduler's defaults otherwise) and runs
//! until SIGTERM (or `run_ms`), then shuts down gracefully and prints `stopped …`. Each run of
//! `count` with the arguments `n` (a number) does `HINCRBY oneoff:count <n> 1` and
//! `HINCRBY oneoff:by <replica id> 1`, then works `work_ms`.

use std::collections::HashMap;
use std::time::Duration;

use dlock_core::Client;
use dlock_scheduler::Scheduler;
use redis::AsyncCommands;
use tokio::signal::unix::{SignalKind, signal};

use crate::{BoxError, num, opt, report};

pub(crate) async fn oneoff_replica(opts: &HashMap<String, String>) -> Result<(), BoxError> {
    let url = opt(opts, "url")?;
    let id = opt(opts, "id")?.to_owned();
    let concurrency = usize::try_from(num(opts, "concurrency", 64)?)?;
    let history = usize::try_from(num(opts, "history", 5000)?)?;
    let work = Duration::from_millis(num(opts, "work_ms", 0)?);
    let run_for = Duration::from_millis(num(opts, "run_ms", 120_000)?);
    let con = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    let scheduler = Scheduler::builder(Client::open(url)?)
        .replica_id(id.clone())
        .history(history)
        .one_off_concurrency(concurrency)
        .handler("count", move |ctx| {
            let (mut con, id) = (con.clone(), id.clone());
            async move {
                let n: u64 = ctx.args()?;
                let _: i64 = con.hincr("oneoff:count", n, 1).await?;
                let _: i64 = con.hincr("oneoff:by", &id, 1).await?;
                tokio::time::sleep(work).await;
                Ok::<(), BoxError>(())
            }
        })
        .build()?;
    let mut terminate = signal(SignalKind::terminate())?;
    report("started");
    let stop = async move {
        tokio::select! {
            () = tokio::time::sleep(run_for) => {}
            _ = terminate.recv() => {}
        }
    };
    let stopped = scheduler.run_until(stop, Duration::from_millis(500)).await;
    report(&format!(
        "stopped drained={} cancelled={}",
        stopped.drained, stopped.cancelled
    ));
    Ok(())
}
