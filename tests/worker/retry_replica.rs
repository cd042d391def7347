//! `dlock-test-worker retry-replica …`: one scheduler replica with an at-least-once job and an
//! at-most-once job, for the delivery test (tests/scheduler/scheduler_retry.rs).
//!
//! `retry-replica url=… id=… [attempts=3] [backoff_ms=200] [lease_ms=1000]
//! [victim_work_ms=4000] [run_ms=120000]` runs two jobs on the cron `* * * * * *`, both with
//! overlapping runs allowed and the given run lease (the scheduler's defaults otherwise: its
//! fallback poll is 5 s, so a retry found sooner was found by the protocol, not by polling),
//! until SIGTERM (or `run_ms`), then shuts
//! down gracefully and prints `stopped …`. Occurrence `k` (its second) decides what a handler
//! does:
//!
//! * **`alo`** (at least once, `attempts` in all, `backoff_ms` before the second): every
//!   attempt appends `"<occ> <attempt> <fence> <id>"` to `alo:attempts`, watches its lease in
//!   a task of its own (`"<occ> <attempt> <ms> <reason>"` to `alo:lost` when it is lost for
//!   another reason than its release; `<ms>` by the system clock) and writes
//!   `"<attempt> <id> start"` to a store that checks fences (`alo:store:<occ>`, a hash; the
//!   script keeps the largest fence and refuses a smaller one, logging accepted writes to
//!   `alo:accepted` and refused ones to `alo:refused`). Then: when `k % 3 == 0` and this is the
//!   first attempt, it prints `victim <occ>` and works `victim_work_ms` (the test kills or
//!   stops the process meanwhile); when `k % 3 == 1` and this is the first attempt, it fails;
//!   otherwise it works 50 ms. It ends by writing `"<attempt> <id> done"` to the store and
//!   `INCR alo:done:<occ>`.
//! * **`amo`** (at most once): `INCR amo:count:<occ>`, fails when `k % 3 == 1`, works
//!   `victim_work_ms` when `k % 3 == 0` (so it dies with a victim it shares a process with).

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dlock_core::{Client, LostReason};
use dlock_scheduler::{Delivery, Job, JobContext, Overlap, Scheduler};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use tokio::signal::unix::{SignalKind, signal};

use crate::{BoxError, num, opt, report};

/// A store that checks fences: keeps the write with the largest fence seen for the key.
const FENCED_WRITE: &str = r"
local seen = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
local fence = tonumber(ARGV[1])
if fence < seen then
  redis.call('RPUSH', KEYS[2], KEYS[1] .. ' ' .. ARGV[1] .. ' ' .. ARGV[2])
  return 0
end
redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'value', ARGV[2])
redis.call('RPUSH', KEYS[3], KEYS[1] .. ' ' .. ARGV[1] .. ' ' .. ARGV[2])
return 1
";

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

async fn store(
    con: &mut MultiplexedConnection,
    occurrence: i64,
    fence: u64,
    value: &str,
) -> Result<(), redis::RedisError> {
    let _: i64 = redis::Script::new(FENCED_WRITE)
        .key(format!("alo:store:{occurrence}"))
        .key("alo:refused")
        .key("alo:accepted")
        .arg(fence)
        .arg(value)
        .invoke_async(con)
        .await?;
    Ok(())
}

async fn at_least_once(
    ctx: JobContext,
    mut con: MultiplexedConnection,
    victim_work: Duration,
) -> Result<(), BoxError> {
    let occurrence = ctx.occurrence().timestamp_millis();
    let k = occurrence.div_euclid(1000);
    let (attempt, fence, id) = (ctx.attempt(), ctx.fencing_token().get(), ctx.replica().id());
    let _: u64 = con
        .rpush(
            "alo:attempts",
            format!("{occurrence} {attempt} {fence} {id}"),
        )
        .await?;
    let watcher = ctx.clone();
    let mut lost_con = con.clone();
    tokio::spawn(async move {
        let lost = watcher.lost().await;
        if lost.reason() != LostReason::Released {
            let line = format!("{occurrence} {attempt} {} {:?}", now_ms(), lost.reason());
            let _: Result<u64, _> = lost_con.rpush("alo:lost", line).await;
        }
    });
    store(
        &mut con,
        occurrence,
        fence,
        &format!("{attempt} {id} start"),
    )
    .await?;
    if attempt == 1 && k % 3 == 0 {
        report(&format!("victim {occurrence}"));
        tokio::time::sleep(victim_work).await;
    } else if attempt == 1 && k % 3 == 1 {
        return Err("the first attempt fails".into());
    } else {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    store(&mut con, occurrence, fence, &format!("{attempt} {id} done")).await?;
    let _: u64 = con.incr(format!("alo:done:{occurrence}"), 1).await?;
    Ok(())
}

async fn at_most_once(
    ctx: JobContext,
    mut con: MultiplexedConnection,
    victim_work: Duration,
) -> Result<(), BoxError> {
    let occurrence = ctx.occurrence().timestamp_millis();
    let k = occurrence.div_euclid(1000);
    let _: u64 = con.incr(format!("amo:count:{occurrence}"), 1).await?;
    match k % 3 {
        0 => tokio::time::sleep(victim_work).await,
        1 => return Err("this run fails".into()),
        _ => {}
    }
    Ok(())
}

pub(crate) async fn retry_replica(opts: &HashMap<String, String>) -> Result<(), BoxError> {
    let url = opt(opts, "url")?;
    let id = opt(opts, "id")?;
    let attempts = u32::try_from(num(opts, "attempts", 3)?)?;
    let backoff = Duration::from_millis(num(opts, "backoff_ms", 200)?);
    let lease = Duration::from_millis(num(opts, "lease_ms", 1000)?);
    let victim_work = Duration::from_millis(num(opts, "victim_work_ms", 4000)?);
    let run_for = Duration::from_millis(num(opts, "run_ms", 120_000)?);
    let con = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    let alo_con = con.clone();
    let alo = Job::new("alo", "* * * * * *", "UTC", move |ctx| {
        at_least_once(ctx, alo_con.clone(), victim_work)
    })?
    .delivery(Delivery::at_least_once(attempts, backoff))
    .overlap(Overlap::Allow)
    .lease(lease);
    let amo = Job::new("amo", "* * * * * *", "UTC", move |ctx| {
        at_most_once(ctx, con.clone(), victim_work)
    })?
    .overlap(Overlap::Allow)
    .lease(lease);
    let scheduler = Scheduler::builder(Client::open(url)?)
        .replica_id(id)
        .job(alo)
        .job(amo)
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
