//! The clients of the partition tests (`tests/partitions/`), each run inside a client
//! namespace of a `dlock_testkit::Network`: `lease-probe`, `lock-history`, `guarded-writer`
//! and `set-adder` (each function says what it does and prints).
//!
//! `lease-probe url=…|sentinels=URL,… name=… ttl_ms=1500 command_timeout_ms=500
//! connect_timeout_ms=500 [retry_ms=30000]` (a fixed server, or the master the sentinels name
//! `dlock`) acquires `name` with the watchdog and prints `acquired fence=F at_us=T`;
//! when the lease is reported lost it prints `lost reason=R at_us=T safe_until_us=S` (`S`: the
//! end of the lease as the guard knew it last), drops the guard and tries to take the lock
//! again, one `try_acquire` after another, until it has it or `retry_ms` passed:
//! `reacquired fence=F at_us=T attempts=N` or `gave-up attempts=N`. Times are the wall clock
//! in µs since the epoch, read in this process at the moment it learnt the outcome, so the test
//! compares them with its own record of when it cut and healed the network (one machine, one
//! clock) without counting the pipe's delay.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dlock_core::{Client, MutexOptions};

use crate::{BoxError, num, opt, report};

/// Pause between two attempts to take the lock again: short against the command timeout, so
/// the recovery is measured within a few ms.
const RETRY_PAUSE: Duration = Duration::from_millis(10);

fn now_us() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros())
}

pub(crate) async fn lease_probe(opts: &HashMap<String, String>) -> Result<(), BoxError> {
    let name = opt(opts, "name")?;
    let command_timeout = Duration::from_millis(num(opts, "command_timeout_ms", 500)?);
    let connect_timeout = Duration::from_millis(num(opts, "connect_timeout_ms", 500)?);
    let client = match opts.get("sentinels") {
        Some(urls) => Client::sentinel_builder("dlock", urls.split(',').map(str::to_owned))
            .command_timeout(command_timeout)
            .connect_timeout(connect_timeout)
            .build()?,
        None => Client::builder(opt(opts, "url")?)
            .command_timeout(command_timeout)
            .connect_timeout(connect_timeout)
            .build()?,
    };
    let ttl = Duration::from_millis(num(opts, "ttl_ms", 1_500)?);
    let lock = client.mutex_with(name, MutexOptions::new().ttl(ttl).watchdog())?;
    let guard = lock.acquire().await?;
    let fence = guard.fencing_token().await?.get();
    report(&format!("acquired fence={fence} at_us={}", now_us()));
    let lost = guard.lost().await;
    // How long ago the lease's last known end was: the lease's end on the wall clock.
    let past_end = std::time::Instant::now().saturating_duration_since(guard.safe_until());
    let at = now_us();
    report(&format!(
        "lost reason={:?} at_us={at} safe_until_us={}",
        lost.reason(),
        at.saturating_sub(past_end.as_micros())
    ));
    drop(guard);
    let deadline =
        tokio::time::Instant::now() + Duration::from_millis(num(opts, "retry_ms", 30_000)?);
    let mut attempts = 0u64;
    while tokio::time::Instant::now() < deadline {
        attempts += 1;
        // Errors (timeouts, refused connections) are what the partition causes: try again.
        if let Ok(Some(again)) = lock.try_acquire().await {
            let at = now_us();
            let fence = again.fencing_token().await?.get();
            report(&format!(
                "reacquired fence={fence} at_us={at} attempts={attempts}"
            ));
            again.release().await?;
            return Ok(());
        }
        tokio::time::sleep(RETRY_PAUSE).await;
    }
    report(&format!("gave-up attempts={attempts}"));
    Ok(())
}

/// `lock-history url=… name=… process=N ms=6000 ttl_ms=1000 command_timeout_ms=300
/// hold_ms=20`: for `ms`, takes `name` with `try_acquire` (fenced, no watchdog: the lease ends
/// at its `safe_until`), holds it `hold_ms`, releases it, pauses 10 ms, and again. Prints every
/// operation as a line `op <process> acquire|release <invoked_us> <completed_us|-> <outcome>`
/// (the text of `tests/partitions/history.rs`), then `done ops=N`. Errors are outcomes
/// (`unknown`): the partition tests cut this process off on purpose.
pub(crate) async fn lock_history(opts: &HashMap<String, String>) -> Result<(), BoxError> {
    let process = num(opts, "process", 0)?;
    let client = Client::builder(opt(opts, "url")?)
        .command_timeout(Duration::from_millis(num(opts, "command_timeout_ms", 300)?))
        .connect_timeout(Duration::from_millis(num(opts, "command_timeout_ms", 300)?))
        .build()?;
    let ttl = Duration::from_millis(num(opts, "ttl_ms", 1_000)?);
    let lock = client.mutex_with(opt(opts, "name")?, MutexOptions::new().ttl(ttl).fenced())?;
    let hold = Duration::from_millis(num(opts, "hold_ms", 20)?);
    let until = tokio::time::Instant::now() + Duration::from_millis(num(opts, "ms", 6_000)?);
    let mut ops = 0u64;
    while tokio::time::Instant::now() < until {
        let invoked = now_us();
        let outcome = match lock.try_acquire().await {
            Ok(Some(guard)) => {
                let completed = now_us();
                let left = guard
                    .safe_until()
                    .saturating_duration_since(std::time::Instant::now());
                let safe_until = completed + left.as_micros();
                let fence = guard.fencing_token().await.map_or(0, |f| f.get());
                report(&format!(
                    "op {process} acquire {invoked} {completed} granted:{fence}:{safe_until}"
                ));
                tokio::time::sleep(hold).await;
                let asked = now_us();
                let released = guard.release().await;
                let (completed, outcome) = match released {
                    Ok(dlock_core::ReleaseOutcome::Released) => (now_us().to_string(), "released"),
                    Ok(_) => (now_us().to_string(), "not-held"),
                    Err(_) => ("-".to_owned(), "unknown"),
                };
                ops += 2;
                report(&format!(
                    "op {process} release {asked} {completed} {outcome}"
                ));
                tokio::time::sleep(RETRY_PAUSE).await;
                continue;
            }
            Ok(None) => format!("{} busy", now_us()),
            Err(_) => "- unknown".to_owned(),
        };
        ops += 1;
        report(&format!("op {process} acquire {invoked} {outcome}"));
        tokio::time::sleep(RETRY_PAUSE).await;
    }
    report(&format!("done ops={ops}"));
    Ok(())
}

/// `guarded-writer url=… name=… ttl_ms=1500 command_timeout_ms=500 period_ms=50 ms=6000
/// [unguarded=1]`:
/// acquires `name` (waiting, with the watchdog), prints `acquired fence=F`, then every
/// `period_ms` until `ms` appends its fence to `{name}:writes` with a guarded write, whatever
/// it knows of its lease (a client that queued writes during a cut). Prints `applied`,
/// `refused` or `unknown` for each, then `done applied=A refused=R unknown=U`. With
/// `unguarded=1` it appends with a plain `RPUSH` on a connection of its own instead (the
/// control: what the guarded write prevents).
pub(crate) async fn guarded_writer(opts: &HashMap<String, String>) -> Result<(), BoxError> {
    let name = opt(opts, "name")?;
    let timeout = Duration::from_millis(num(opts, "command_timeout_ms", 500)?);
    let client = Client::builder(opt(opts, "url")?)
        .command_timeout(timeout)
        .connect_timeout(timeout)
        .build()?;
    let ttl = Duration::from_millis(num(opts, "ttl_ms", 1_500)?);
    let lock = client.mutex_with(name, MutexOptions::new().ttl(ttl).watchdog())?;
    let guard = lock.acquire().await?;
    let fence = guard.fencing_token().await?.get();
    report(&format!("acquired fence={fence}"));
    let period = Duration::from_millis(num(opts, "period_ms", 50)?);
    let until = tokio::time::Instant::now() + Duration::from_millis(num(opts, "ms", 6_000)?);
    let (mut applied, mut refused, mut unknown) = (0u64, 0u64, 0u64);
    let key = format!("{{{name}}}:writes");
    let mut plain = if num(opts, "unguarded", 0)? == 1 {
        let client = redis::Client::open(opt(opts, "url")?)?;
        Some(client.get_multiplexed_async_connection().await?)
    } else {
        None
    };
    while tokio::time::Instant::now() < until {
        let outcome = match &mut plain {
            Some(con) => {
                let mut push = redis::cmd("RPUSH");
                push.arg(&key).arg(fence);
                match tokio::time::timeout(timeout, push.exec_async(con)).await {
                    Ok(Ok(())) => Ok(dlock_core::Guarded::Applied(Vec::new())),
                    _ => Err(()),
                }
            }
            None => guard
                .guarded()
                .rpush(&key, fence)
                .exec()
                .await
                .map_err(|_| ()),
        };
        let word = match outcome {
            Ok(dlock_core::Guarded::Applied(_)) => {
                applied += 1;
                "applied"
            }
            // Refused, or a variant added later: not applied.
            Ok(_) => {
                refused += 1;
                "refused"
            }
            Err(_) => {
                unknown += 1;
                "unknown"
            }
        };
        report(word);
        tokio::time::sleep(period).await;
    }
    report(&format!(
        "done applied={applied} refused={refused} unknown={unknown}"
    ));
    Ok(())
}

/// `set-adder url=… name=… process=N ttl_ms=1500 command_timeout_ms=500 ms=6000 limit=150
/// think_ms=50`: Jepsen's set under a lock. Until `ms` or `limit` elements, takes `name`
/// (`try_acquire`, watchdog), reads the set
/// `{name}:set` (a comma-separated string), adds its next element `<process>-<n>` and writes
/// the whole value back with a guarded `SET` after `think_ms` (printing `holding` first, so a
/// test can cut it off between its read and its write) — a read-modify-write that only mutual
/// exclusion keeps from losing elements — then releases. Prints `added <element>` for each write that
/// was applied, then `done added=A unknown=U`.
pub(crate) async fn set_adder(opts: &HashMap<String, String>) -> Result<(), BoxError> {
    let (name, process) = (opt(opts, "name")?, num(opts, "process", 0)?);
    let timeout = Duration::from_millis(num(opts, "command_timeout_ms", 500)?);
    let url = opt(opts, "url")?;
    let client = Client::builder(url)
        .command_timeout(timeout)
        .connect_timeout(timeout)
        .build()?;
    let mut plain = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    let ttl = Duration::from_millis(num(opts, "ttl_ms", 1_500)?);
    let lock = client.mutex_with(name, MutexOptions::new().ttl(ttl).watchdog())?;
    let key = format!("{{{name}}}:set");
    let until = tokio::time::Instant::now() + Duration::from_millis(num(opts, "ms", 6_000)?);
    let (mut next, mut added, mut unknown) = (0u64, 0u64, 0u64);
    let (limit, think) = (
        num(opts, "limit", 150)?,
        Duration::from_millis(num(opts, "think_ms", 50)?),
    );
    while tokio::time::Instant::now() < until && next < limit {
        let Ok(Some(guard)) = lock.try_acquire().await else {
            tokio::time::sleep(RETRY_PAUSE).await;
            continue;
        };
        let mut get = redis::cmd("GET");
        get.arg(&key);
        let read = get.query_async::<Option<String>>(&mut plain);
        let current = match tokio::time::timeout(timeout, read).await {
            Ok(Ok(value)) => value.unwrap_or_default(),
            _ => {
                unknown += 1;
                continue;
            }
        };
        let element = format!("{process}-{next}");
        next += 1;
        report("holding");
        tokio::time::sleep(think).await;
        let value = if current.is_empty() {
            element.clone()
        } else {
            format!("{current},{element}")
        };
        let write = guard
            .guarded()
            .set(&key, value)
            .exec()
            .await
            .map_err(|_| ());
        match write {
            Ok(dlock_core::Guarded::Applied(_)) => {
                added += 1;
                report(&format!("added {element}"));
            }
            Ok(_) => {}
            Err(_) => unknown += 1,
        }
        // A release that fails leaves the lease to expire.
        let _ = guard.release().await;
        tokio::time::sleep(RETRY_PAUSE).await;
    }
    report(&format!("done added={added} unknown={unknown}"));
    Ok(())
}
