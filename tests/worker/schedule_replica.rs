//! `dlock-test-worker schedule-replica …`: one scheduler replica with no job in code and,
//! optionally, the handler `tick` for run-time schedules (tests/scheduler/scheduler_runtime.rs).
//!
//! `schedule-replica url=… id=… [handler=1] [run_ms=120000]` has a job in code (`yearly`, on
//! the first of January) and registers the handler `tick` when `handler=1` (a replica of an
//! older deploy has none), prints `started`, and runs until
//! SIGTERM (or `run_ms`). Each run of `tick` reads its arguments (`{"mark": "…"}`) and appends
//! `"<job> <occurrence ms> <server ms> <replica id> <mark> <manual 0|1>"` to the list
//! `runtime:fired`, the server time read with `TIME` at the run's start.

use std::collections::HashMap;
use std::time::Duration;

use dlock_core::Client;
use dlock_scheduler::{Job, JobContext, Scheduler};
use redis::AsyncCommands;
use tokio::signal::unix::{SignalKind, signal};

use crate::{BoxError, num, opt, report};

async fn tick(ctx: JobContext) -> Result<(), BoxError> {
    let args: serde_json::Value = ctx.args()?;
    let mark = args["mark"].as_str().ok_or("the arguments carry no mark")?;
    let mut con = ctx.client().connection();
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(&mut con).await?;
    let line = format!(
        "{} {} {} {} {} {}",
        ctx.job(),
        ctx.occurrence().timestamp_millis(),
        secs * 1000 + micros / 1000,
        ctx.replica().id(),
        mark,
        u8::from(ctx.is_manual())
    );
    let _: i64 = con.rpush("runtime:fired", line).await?;
    Ok(())
}

pub(crate) async fn schedule_replica(opts: &HashMap<String, String>) -> Result<(), BoxError> {
    let client = Client::open(opt(opts, "url")?)?;
    // A job in code, as every service has: a replica without the handler still registers.
    let yearly = Job::new("yearly", "0 0 1 1 *", "UTC", |_| async {
        Ok::<(), String>(())
    })?;
    let mut builder = Scheduler::builder(client)
        .replica_id(opt(opts, "id")?)
        .job(yearly);
    if num(opts, "handler", 1)? == 1 {
        builder = builder.handler("tick", tick);
    }
    let scheduler = builder.build()?;
    let mut term = signal(SignalKind::terminate())?;
    let run = Duration::from_millis(num(opts, "run_ms", 120_000)?);
    report("started");
    let report_ = scheduler
        .run_until(
            async {
                tokio::select! {
                    _ = term.recv() => {}
                    () = tokio::time::sleep(run) => {}
                }
            },
            Duration::from_secs(5),
        )
        .await;
    report(&format!("stopped drained={}", report_.drained));
    Ok(())
}
