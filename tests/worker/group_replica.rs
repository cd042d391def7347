//! `dlock-test-worker group-replica …`: one scheduler replica with two jobs of one job group,
//! for tests/scheduler/scheduler_group.rs.
//!
//! `group-replica url=… id=… [max=1] [jobs=2] [work_ms=500] [run_ms=120000]` declares the
//! group `maintenance` with `max` and runs `jobs` jobs (`a`, `b`, … at most six), all on the
//! cron `*/1 * * * * *` and all in the group, until SIGTERM (or `run_ms`), then shuts down
//! gracefully and prints `stopped …`. Each run is observed in Redis, by the server's clock, in one script call at
//! its start and one at its end (so that the order and the times are the server's):
//!
//! * start: `INCR group:inside`, then `RPUSH group:events "start <job> <µs> <inside> <id>"`
//!   (`<inside>`: how many runs of the group are inside now, this one included);
//! * end: `DECR group:inside`, then `RPUSH group:events "end <job> <µs> <inside> <id>"`
//!   (`<inside>`: how many are left inside).
//!
//! Between the two the handler works `work_ms`.

use std::collections::HashMap;
use std::time::Duration;

use dlock_core::Client;
use dlock_scheduler::{Job, JobContext, Scheduler};
use redis::aio::MultiplexedConnection;
use tokio::signal::unix::{SignalKind, signal};

use crate::{BoxError, num, opt, report};

/// Counts a run in or out of the group and logs it with the server's time (µs).
const OBSERVE: &str = r"
local inside = redis.call('INCRBY', KEYS[1], tonumber(ARGV[2]))
local t = redis.call('TIME')
local us = string.format('%.0f', tonumber(t[1]) * 1000000 + tonumber(t[2]))
redis.call('RPUSH', KEYS[2], ARGV[1] .. ' ' .. ARGV[3] .. ' ' .. us .. ' ' .. inside .. ' ' .. ARGV[4])
return inside
";

async fn observe(
    con: &mut MultiplexedConnection,
    event: &str,
    delta: i64,
    ctx: &JobContext,
) -> Result<(), redis::RedisError> {
    let _: i64 = redis::Script::new(OBSERVE)
        .key("group:inside")
        .key("group:events")
        .arg(event)
        .arg(delta)
        .arg(ctx.job())
        .arg(ctx.replica().id())
        .invoke_async(con)
        .await?;
    Ok(())
}

async fn handler(
    ctx: JobContext,
    mut con: MultiplexedConnection,
    work: Duration,
) -> Result<(), BoxError> {
    observe(&mut con, "start", 1, &ctx).await?;
    tokio::time::sleep(work).await;
    observe(&mut con, "end", -1, &ctx).await?;
    Ok(())
}

pub(crate) async fn group_replica(opts: &HashMap<String, String>) -> Result<(), BoxError> {
    let url = opt(opts, "url")?;
    let id = opt(opts, "id")?;
    let max = u32::try_from(num(opts, "max", 1)?)?;
    let jobs = usize::try_from(num(opts, "jobs", 2)?)?;
    let work = Duration::from_millis(num(opts, "work_ms", 500)?);
    let run_for = Duration::from_millis(num(opts, "run_ms", 120_000)?);
    let con = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    let mut builder = Scheduler::builder(Client::open(url)?)
        .replica_id(id)
        .group("maintenance", max);
    for name in ["a", "b", "c", "d", "e", "f"].into_iter().take(jobs) {
        let con = con.clone();
        let job = Job::new(name, "*/1 * * * * *", "UTC", move |ctx| {
            handler(ctx, con.clone(), work)
        })?
        .group("maintenance");
        builder = builder.job(job);
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
    let stopped = scheduler.run_until(stop, Duration::from_secs(5)).await;
    report(&format!(
        "stopped drained={} cancelled={}",
        stopped.drained, stopped.cancelled
    ));
    Ok(())
}
