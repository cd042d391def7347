//! The worker process of the multi-process integration tests.
//!
//! Run with: `dlock-test-worker <command> key=value …` (started by the tests, not by hand).
//!
//! Every command but `replica` finds Redis through `url=redis://…` (one server) or
//! `cluster=redis://…,redis://…` (nodes of a Redis Cluster); `url=…` below stands for either.
//!
//! Every command takes `threads=N` (see [`runtime`]): `threads=1` runs it on a current-thread
//! runtime.
//!
//! Commands:
//! * `count url=… name=… tasks=4 limit=2000 wait_ms=30000 pause_us=200` — `tasks` tasks loop:
//!   take a ticket (`INCR <name>:tickets`, stop past `limit`), acquire the lock, check that
//!   nobody else is inside (`INCR <name>:inside` must answer 1), read-pause-write the counter
//!   `<name>:counter` (a non-atomic increment that loses updates without mutual exclusion),
//!   append the fencing token to `<name>:fences`, leave, release. Prints
//!   `acquired=N overlaps=N timeouts=N` on exit.
//! * `hold url=… name=… ttl_ms=… [watchdog=1]` — acquire (waiting), print `acquired <fence>`,
//!   then sleep until killed.
//! * `write url=… name=… ttl_ms=… [period_ms=20]` — acquire with the watchdog, print
//!   `acquired <fence>`, then every `period_ms` check the lease *before* appending its fencing
//!   token to the list
//!   `<name>:writes` (an unfenced store: only the holder's own check keeps it out); on loss
//!   print `lost <reason>` and exit. A holder paused past its lease must notice the loss before
//!   its next write. With `guarded=1` it checks nothing itself: it appends with a guarded
//!   write (`guard.guarded().rpush(…)`) to `{<name>}:writes` instead, and on a refusal prints
//!   `refused <why>` and exits.
//! * `wait url=… name=… ttl_ms=… [hold_ms=0]` — acquire (waiting), then print
//!   `acquired fence=F inspect_fence=G remaining_ms=R held=B` (`G`: the holder's fence as the
//!   server reports it right after), hold `hold_ms`, release and exit.
//! * `shutdown url=… name=… other=…` — hold `name` (watchdog, 30 s lease), queue for `other`
//!   (held by the test), print `ready`; once the key `<name>:go` exists, shut the client down and
//!   print `shutdown released=N dequeued=N unsubscribed=N failures=N`, then stay alive (its
//!   connection open) until killed.
//! * `shared url=… kind=rw|sem name=… take=read|write|<permits> [limit=N] ttl_ms=…
//!   [watchdog=1] [hold_ms=N]` — a hold of a read-write lock (`take=read|write`) or `take`
//!   permits of a semaphore of `limit`, waiting for it; prints `acquired fence=F remaining_ms=R
//!   held=B`, then holds `hold_ms` and releases (printing `released <outcome>`), or without
//!   `hold_ms` holds until killed.
//! * `elect url=… name=… value=… ttl_ms=… [after_lost_ms=1000]` — campaign in the election
//!   `name` with `value` (watchdog lease `ttl_ms`), print `leader <fence>`; once the leadership
//!   is lost print `lost <reason>`, keep it `after_lost_ms` longer (its record refresh still
//!   running), then resign and print `resigned <outcome>`. A leader paused past its lease must
//!   never write the leader record again (checked by the test, on the record).
//! * `rate url=… name=… rate=200 burst=20 start_us=… ms=5000 [tasks=2]` — waits until the
//!   wall clock reaches `start_us` (µs since the epoch, so that the processes start together),
//!   then `tasks` tasks ask the rate limiter `name` (`rate` per second, `burst`) for one cell
//!   at a time, as fast as answers come, for `ms`; prints `admitted <n> limited <n>` and
//!   then `times <µs,µs,…>`: the server time of every admitted cell.
//! * `single-flight url=… key=… callers=N compute_ms=M` — dlock-tower's single-flight from
//!   `callers` tasks at once (see `single_flight.rs`).
//! * `lease-probe …`, `lock-history …`, `guarded-writer …`, `set-adder …` — clients of the
//!   partition tests, run in a namespace of a `dlock_testkit::Network` (see `partition.rs`).
//! * `matrix …` — the client of the partition matrix, dlock's or the plain one (`matrix.rs`,
//!   `plain.rs`).
//! * `replica …`, `retry-replica …`, `schedule-replica …`, `group-replica …`,
//!   `oneoff-replica …` — scheduler replicas (see `replica.rs`, `retry_replica.rs`,
//!   `schedule_replica.rs`, `group_replica.rs`, `oneoff_replica.rs`).

mod group_replica;
mod matrix;
mod oneoff_replica;
mod partition;
mod plain;
mod replica;
mod retry_replica;
mod schedule_replica;
mod single_flight;
#[path = "../support/target.rs"]
mod target;

use std::collections::HashMap;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use dlock_core::{Client, MutexOptions};
use redis::AsyncCommands;

use crate::target::{Plain, Target};

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let command = args.next().unwrap_or_default();
    let opts: HashMap<String, String> = args
        .filter_map(|a| a.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())))
        .collect();
    let runtime = match runtime(&opts) {
        Ok(rt) => rt,
        Err(e) => {
            report(&format!("error runtime: {e}"));
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match command.as_str() {
            "count" => count(&opts).await,
            "hold" => hold(&opts).await,
            "write" => write(&opts).await,
            "wait" => wait(&opts).await,
            "shutdown" => shutdown(&opts).await,
            "elect" => elect(&opts).await,
            "macro-count" => macro_count(&opts).await,
            "shared" => shared(&opts).await,
            "multi" => multi(&opts).await,
            "rate" => rate(&opts).await,
            "lease-probe" => partition::lease_probe(&opts).await,
            "lock-history" => partition::lock_history(&opts).await,
            "guarded-writer" => partition::guarded_writer(&opts).await,
            "set-adder" => partition::set_adder(&opts).await,
            "matrix" => matrix::matrix(&opts).await,
            "replica" => replica::replica(&opts).await,
            "retry-replica" => retry_replica::retry_replica(&opts).await,
            "schedule-replica" => schedule_replica::schedule_replica(&opts).await,
            "group-replica" => group_replica::group_replica(&opts).await,
            "oneoff-replica" => oneoff_replica::oneoff_replica(&opts).await,
            "single-flight" => single_flight::single_flight(&opts).await,
            other => Err(format!("unknown command {other:?}").into()),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            report(&format!("error {e}"));
            ExitCode::FAILURE
        }
    }
}

/// The runtime the command runs in: Tokio's default, or with `threads=1` a current-thread
/// runtime (one thread: a handler that blocks it stalls the whole process), with `threads=N`
/// a multi-thread runtime of N workers.
fn runtime(opts: &HashMap<String, String>) -> Result<tokio::runtime::Runtime, BoxError> {
    Ok(
        match opts
            .get("threads")
            .map(|n| n.parse::<usize>())
            .transpose()?
        {
            None => tokio::runtime::Runtime::new()?,
            Some(1) => tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?,
            Some(n) => tokio::runtime::Builder::new_multi_thread()
                .worker_threads(n)
                .enable_all()
                .build()?,
        },
    )
}

pub(crate) fn report(line: &str) {
    let mut out = std::io::stdout().lock();
    // The parent reads stdout; if it went away there is nobody to tell.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

pub(crate) fn opt<'a>(opts: &'a HashMap<String, String>, key: &str) -> Result<&'a str, BoxError> {
    opts.get(key)
        .map(String::as_str)
        .ok_or_else(|| format!("missing {key}=…").into())
}

pub(crate) fn num(
    opts: &HashMap<String, String>,
    key: &str,
    default: u64,
) -> Result<u64, BoxError> {
    opts.get(key).map_or(Ok(default), |v| Ok(v.parse()?))
}

/// The Redis of this run: `url=…` (one server) or `cluster=…,…` (nodes of a cluster).
fn target(opts: &HashMap<String, String>) -> Result<Target, BoxError> {
    match (opts.get("url"), opts.get("cluster")) {
        (Some(url), None) => Ok(Target::Single(url.clone())),
        (None, Some(nodes)) => Ok(Target::Cluster(
            nodes.split(',').map(str::to_owned).collect(),
        )),
        _ => Err("give one of url=… or cluster=…,…".into()),
    }
}

/// A dlock client of the run's Redis, with dlock's defaults.
fn client(opts: &HashMap<String, String>) -> Result<Client, BoxError> {
    Ok(target(opts)?.builder().build()?)
}

async fn rate(opts: &HashMap<String, String>) -> Result<(), BoxError> {
    let client = client(opts)?;
    let rate = u32::try_from(num(opts, "rate", 200)?)?;
    let burst = u32::try_from(num(opts, "burst", 20)?)?;
    let limiter = client.rate_limiter(
        opt(opts, "name")?,
        dlock_core::Quota::per_second(rate).burst(burst),
    )?;
    let start = std::time::UNIX_EPOCH + Duration::from_micros(num(opts, "start_us", 0)?);
    if let Ok(ahead) = start.duration_since(std::time::SystemTime::now()) {
        tokio::time::sleep(ahead).await;
    }
    let until = tokio::time::Instant::now() + Duration::from_millis(num(opts, "ms", 5_000)?);
    let tasks: Vec<_> = (0..num(opts, "tasks", 2)?)
        .map(|_| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                let (mut admitted, mut limited) = (Vec::new(), 0u64);
                while tokio::time::Instant::now() < until {
                    match limiter.try_acquire(1).await? {
                        dlock_core::Decision::Allowed { decided_at, .. } => {
                            admitted.push(decided_at.duration_since(std::time::UNIX_EPOCH)?);
                        }
                        _ => limited += 1,
                    }
                }
                Ok::<_, BoxError>((admitted, limited))
            })
        })
        .collect();
    let (mut admitted, mut limited) = (Vec::new(), 0);
    for task in tasks {
        let (a, l) = task.await??;
        admitted.extend(a);
        limited += l;
    }
    report(&format!("admitted {} limited {limited}", admitted.len()));
    let times: Vec<String> = admitted.iter().map(|t| t.as_micros().to_string()).collect();
    report(&format!("times {}", times.join(",")));
    Ok(())
}

async fn count(opts: &HashMap<String, String>) -> Result<(), BoxError> {
    let client = client(opts)?;
    let lock = client.mutex_with(
        opt(opts, "name")?,
        MutexOptions::new().ttl(Duration::from_secs(10)),
    )?;
    let wait = Duration::from_millis(num(opts, "wait_ms", 30_000)?);
    drive(opts, 2000, move |mut con, name, pause| {
        let lock = lock.clone();
        async move {
            let guard = match lock.acquire_timeout(wait).await {
                Ok(guard) => guard,
                Err(e) if e.is_busy() => return Ok(Turn::Busy),
                Err(e) => return Err(e.into()),
            };
            let fence = guard.fencing_token().await?.get();
            let overlap = increment(&mut con, &name, pause, fence).await?;
            guard.release().await?;
            Ok(Turn::Done { overlap })
        }
    })
    .await
}

/// What one turn of `count` or `macro-count` saw.
enum Turn {
    /// Held the lock and incremented; `overlap` if another holder was inside at the same time.
    Done { overlap: bool },
    /// The lock could not be had within the wait.
    Busy,
}

/// The loop shared by `count` and `macro-count`: `tasks` tasks take tickets until `limit` and
/// play one `turn` per ticket, then the totals are printed as `acquired=N overlaps=N timeouts=N`.
async fn drive<F, Fut>(
    opts: &HashMap<String, String>,
    default_limit: u64,
    turn: F,
) -> Result<(), BoxError>
where
    F: Fn(Plain, String, Duration) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<Turn, BoxError>> + Send,
{
    let name = opt(opts, "name")?.to_owned();
    let tasks = num(opts, "tasks", 4)?;
    let limit = num(opts, "limit", default_limit)?;
    let pause = Duration::from_micros(num(opts, "pause_us", 200)?);
    let plain = target(opts)?.plain().await?;
    let stats = Arc::new([AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)]);
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let (turn, mut con, stats, name) =
            (turn.clone(), plain.clone(), stats.clone(), name.clone());
        handles.push(tokio::spawn(async move {
            loop {
                let ticket: u64 = con.incr(format!("{name}:tickets"), 1).await?;
                if ticket > limit {
                    return Ok::<(), BoxError>(());
                }
                match turn(con.clone(), name.clone(), pause).await? {
                    Turn::Done { overlap } => {
                        stats[0].fetch_add(1, Ordering::Relaxed);
                        stats[1].fetch_add(u64::from(overlap), Ordering::Relaxed);
                    }
                    Turn::Busy => {
                        stats[2].fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    for handle in handles {
        handle.await??;
    }
    report(&format!(
        "acquired={} overlaps={} timeouts={}",
        stats[0].load(Ordering::Relaxed),
        stats[1].load(Ordering::Relaxed),
        stats[2].load(Ordering::Relaxed)
    ));
    Ok(())
}

/// The critical section of `count` and `macro-count`, to run under the lock `name`: enter
/// (`INCR <name>:inside`), read-pause-write `<name>:counter`, append `fence` to `<name>:fences`,
/// leave. Returns whether another holder was inside at the same time.
async fn increment(
    con: &mut Plain,
    name: &str,
    pause: Duration,
    fence: u64,
) -> Result<bool, BoxError> {
    let inside: u64 = con.incr(format!("{name}:inside"), 1).await?;
    let value: Option<u64> = con.get(format!("{name}:counter")).await?;
    tokio::time::sleep(pause).await;
    let () = con
        .set(format!("{name}:counter"), value.unwrap_or(0) + 1)
        .await?;
    let _: u64 = con.rpush(format!("{name}:fences"), fence).await?;
    let _: i64 = con.decr(format!("{name}:inside"), 1).await?;
    Ok(inside != 1)
}

async fn hold(opts: &HashMap<String, String>) -> Result<(), BoxError> {
    let client = client(opts)?;
    let ttl = Duration::from_millis(num(opts, "ttl_ms", 2_000)?);
    let mut options = MutexOptions::new().ttl(ttl);
    if num(opts, "watchdog", 0)? == 1 {
        options = options.watchdog();
    }
    let lock = client.mutex_with(opt(opts, "name")?, options)?;
    let guard = lock.acquire().await?;
    report(&format!("acquired {}", guard.fencing_token().await?));
    // Hold until killed: the test SIGKILLs or SIGSTOPs this process.
    std::future::pending::<()>().await;
    drop(guard);
    Ok(())
}

async fn write(opts: &HashMap<String, String>) -> Result<(), BoxError> {
    let name = opt(opts, "name")?;
    let client = client(opts)?;
    let ttl = Duration::from_millis(num(opts, "ttl_ms", 500)?);
    let lock = client.mutex_with(name, MutexOptions::new().ttl(ttl).watchdog())?;
    let guard = lock.acquire().await?;
    let lease = guard.lease();
    let fence = guard.fencing_token().await?.get();
    report(&format!("acquired {fence}"));
    let period = Duration::from_millis(num(opts, "period_ms", 20)?);
    let mut con = target(opts)?.plain().await?;
    let guarded = num(opts, "guarded", 0)? == 1;
    loop {
        tokio::time::sleep(period).await;
        if guarded {
            // No check of its own: the guarded write is the check, in Redis.
            let outcome = guard
                .guarded()
                .rpush(format!("{{{name}}}:writes"), fence)
                .exec()
                .await?;
            if let dlock_core::Guarded::Refused(why) = outcome {
                report(&format!("refused {why:?}"));
                return Ok(());
            }
            continue;
        }
        // Check before every write: a pause may have outlived the lease.
        if !lease.is_held() {
            let lost = lease.lost().await;
            report(&format!("lost {:?}", lost.reason()));
            return Ok(());
        }
        let _: u64 = con.rpush(format!("{name}:writes"), fence).await?;
    }
}

async fn wait(opts: &HashMap<String, String>) -> Result<(), BoxError> {
    let name = opt(opts, "name")?;
    let client = client(opts)?;
    let ttl = Duration::from_millis(num(opts, "ttl_ms", 2_000)?);
    let lock = client.mutex_with(name, MutexOptions::new().ttl(ttl))?;
    let guard = lock.acquire().await?;
    let (remaining, held) = (guard.remaining(), guard.lease().is_held());
    let seen = client
        .inspect(name)
        .await?
        .and_then(|info| info.fencing_token)
        .map_or(0, |fence| fence.get());
    report(&format!(
        "acquired fence={} inspect_fence={seen} remaining_ms={} held={held}",
        guard.fencing_token().await?,
        remaining.as_millis()
    ));
    tokio::time::sleep(Duration::from_millis(num(opts, "hold_ms", 0)?)).await;
    guard.release().await?;
    Ok(())
}

async fn shutdown(opts: &HashMap<String, String>) -> Result<(), BoxError> {
    let name = opt(opts, "name")?.to_owned();
    let other = opt(opts, "other")?.to_owned();
    let client = client(opts)?;
    let options = MutexOptions::new().ttl(Duration::from_secs(30)).watchdog();
    let _held = client.mutex_with(&name, options)?.acquire().await?;
    let waiter = client.mutex(&other)?;
    let _waiting = tokio::spawn(async move { waiter.acquire().await });
    report("ready");
    let mut con = client.connection();
    loop {
        let go: bool = con.exists(format!("{name}:go")).await?;
        if go {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let shut = client.shutdown(Duration::from_secs(5)).await;
    report(&format!(
        "shutdown released={} dequeued={} unsubscribed={} failures={}",
        shut.released,
        shut.dequeued,
        shut.unsubscribed,
        shut.failures.len()
    ));
    // Stay connected: what the shutdown removed must not depend on the connection closing.
    std::future::pending::<()>().await;
    Ok(())
}

async fn elect(opts: &HashMap<String, String>) -> Result<(), BoxError> {
    let client = client(opts)?;
    let ttl = Duration::from_millis(num(opts, "ttl_ms", 1_000)?);
    let election = client.election_with(opt(opts, "name")?, MutexOptions::new().ttl(ttl))?;
    let leadership = election.campaign(opt(opts, "value")?).await?;
    report(&format!("leader {}", leadership.fencing_token()));
    let lost = leadership.lost().await;
    report(&format!("lost {:?}", lost.reason()));
    tokio::time::sleep(Duration::from_millis(num(opts, "after_lost_ms", 1_000)?)).await;
    let outcome = leadership.resign().await?;
    report(&format!("resigned {outcome:?}"));
    Ok(())
}

/// `macro-count url=… name=… tasks=4 limit=400 pause_us=200`: the `count` workload, with every
/// turn a call of a `#[distributed_lock]` function (`tests/locks/macro_lock.rs`). Prints
/// `acquired=N overlaps=N timeouts=N` on exit.
async fn macro_count(opts: &HashMap<String, String>) -> Result<(), BoxError> {
    let client = client(opts)?;
    drive(opts, 400, move |mut con, name, pause| {
        let client = client.clone();
        async move {
            match macro_turn(&client, &name, &mut con, pause).await {
                Ok(overlap) => Ok(Turn::Done { overlap }),
                Err(e)
                    if e.downcast_ref::<dlock_core::Error>()
                        .is_some_and(dlock_core::Error::is_busy) =>
                {
                    Ok(Turn::Busy)
                }
                Err(e) => Err(e),
            }
        }
    })
    .await
}

/// One turn of `macro-count`: [`increment`] under the lock `name`, taken by the macro. Returns
/// whether another holder was inside at the same time. `BoxError` is
/// `From<dlock_core::Error>`, so a busy or lost lock comes back as an `Err`.
#[dlock_core::distributed_lock(key = "{name}", client = client, ttl = "10s", wait = "30s", guard = lease)]
async fn macro_turn(
    client: &Client,
    name: &str,
    con: &mut Plain,
    pause: Duration,
) -> Result<bool, BoxError> {
    increment(con, name, pause, lease.fencing_token().await?.get()).await
}

/// The `shared` command: one hold of a read-write lock or a semaphore (`tests/locks/lock_family.rs`).
async fn shared(opts: &HashMap<String, String>) -> Result<(), BoxError> {
    let client = client(opts)?;
    let name = opt(opts, "name")?;
    let mut options = MutexOptions::new().ttl(Duration::from_millis(num(opts, "ttl_ms", 2_000)?));
    if num(opts, "watchdog", 0)? == 1 {
        options = options.watchdog();
    }
    let wait = Duration::from_secs(30);
    let take = opt(opts, "take")?;
    let (fence, lease, release): (_, _, BoxFuture) = match (opt(opts, "kind")?, take) {
        ("rw", "read") => {
            let guard = client
                .rw_lock_with(name, options)?
                .read_timeout(wait)
                .await?;
            let (fence, lease) = (guard.fencing_token(), guard.lease());
            (fence, lease, Box::pin(async move { guard.release().await }))
        }
        ("rw", "write") => {
            let guard = client
                .rw_lock_with(name, options)?
                .write_timeout(wait)
                .await?;
            let (fence, lease) = (guard.fencing_token(), guard.lease());
            (fence, lease, Box::pin(async move { guard.release().await }))
        }
        ("sem", permits) => {
            let limit = u32::try_from(num(opts, "limit", 1)?)?;
            let sem = client.semaphore_with(name, limit, options)?;
            let permit = sem.acquire_timeout(permits.parse()?, wait).await?;
            let (fence, lease) = (permit.fencing_token(), permit.lease());
            (
                fence,
                lease,
                Box::pin(async move { permit.release().await }),
            )
        }
        (kind, take) => return Err(format!("unknown kind={kind} take={take}").into()),
    };
    report(&format!(
        "acquired fence={fence} remaining_ms={} held={}",
        lease.remaining().as_millis(),
        lease.is_held()
    ));
    match opts.get("hold_ms") {
        Some(ms) => {
            tokio::time::sleep(Duration::from_millis(ms.parse()?)).await;
            report(&format!("released {:?}", release.await?));
        }
        None => std::future::pending::<()>().await,
    }
    Ok(())
}

/// A guard's release, whatever the kind.
type BoxFuture = std::pin::Pin<
    Box<dyn std::future::Future<Output = dlock_core::Result<dlock_core::ReleaseOutcome>> + Send>,
>;

/// The `multi` command: a multi-lock taken in rounds by 2 tasks (`tests/locks/multilock.rs`).
async fn multi(opts: &HashMap<String, String>) -> Result<(), BoxError> {
    let client = client(opts)?;
    let names: Vec<String> = opt(opts, "names")?.split(',').map(str::to_owned).collect();
    let mut sorted = names.clone();
    sorted.sort();
    let inside = format!("multi:inside:{}", sorted.join(","));
    let rounds = num(opts, "rounds", 40)?;
    let (done, timeouts, overlaps) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let multi = client.multi_lock(&names)?;
        let mut con = target(opts)?.plain().await?;
        let inside = inside.clone();
        let (done, timeouts, overlaps) = (done.clone(), timeouts.clone(), overlaps.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..rounds {
                let guard = match multi.acquire_timeout(Duration::from_secs(20)).await {
                    Ok(guard) => guard,
                    Err(e) if e.is_busy() => {
                        timeouts.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    Err(e) => return Err::<(), BoxError>(e.into()),
                };
                let n: u64 = con.incr(&inside, 1).await?;
                if n != 1 {
                    overlaps.fetch_add(1, Ordering::Relaxed);
                }
                tokio::task::yield_now().await;
                let _: i64 = con.decr(&inside, 1).await?;
                guard.release().await?;
                done.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    report(&format!(
        "done rounds={} timeouts={} overlaps={}",
        done.load(Ordering::Relaxed),
        timeouts.load(Ordering::Relaxed),
        overlaps.load(Ordering::Relaxed)
    ));
    Ok(())
}
