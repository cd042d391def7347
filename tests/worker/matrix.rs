//! The client of the partition matrix (`tests/partitions/matrix/`): one process runs one of
//! Jepsen's three lock workloads, with dlock or with the plain client (`plain.rs`), against a
//! master found through the network's sentinels.
//!
//! `matrix workload=lock|guarded|set client=dlock|plain sentinels=URL,URL,… name=… process=N
//! ms=20000 ttl_ms=8000 command_timeout_ms=500 durability=none|replicas:N:TIMEOUT_MS
//! hold_min_ms=200 hold_max_ms=4000 period_ms=100 seed=S`. Until `ms` has passed it takes
//! `name` (`try_acquire`, fenced, no watchdog: a hold ends at its `safe_until`), and while it
//! holds it:
//! - `lock`: holds it for a random time from `hold_min_ms` to `hold_max_ms`;
//! - `guarded`: every `period_ms` for such a time, appends its fence to `{name}:writes` with a
//!   guarded write and sets `{name}:fenced` with `Client::fenced_set` (the plain client: a plain
//!   `RPUSH` and `SET` of its acquire's time, its only order);
//! - `set`: reads `{name}:set` (comma-separated; a guarded `GET`, so on the server that takes
//!   the write), waits `period_ms`, writes it back with its next element added (guarded `SET`;
//!   the plain client: a plain `GET` and `SET`);
//!
//! then releases it. Prints every acquire and release as `op …` (the text of
//! `tests/partitions/history.rs`), every write as `write <process> <invoked_us>
//! <completed_us|-> applied|refused|unknown <value>` and every fenced set as `fenced <process>
//! <invoked_us> <completed_us|-> written|stale|unknown <fence>`, then `done ops=N`. Errors are
//! outcomes (`unknown`: no answer, it may have taken effect), each also printed as `error
//! <process> <invoked_us> <text>` (the error's text on one line: the history keeps why); every
//! operation is bounded by the command timeout and the loop by `ms`.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dlock_core::{Client, Durability, Fenced, Guarded, MutexOptions, ReleaseOutcome};

use crate::plain::{self, PlainConn};
use crate::{BoxError, num, opt, report};

/// Pause after a busy or failed attempt, and after a release.
const PAUSE: Duration = Duration::from_millis(20);
/// The sentinels' name for the master (dlock-testkit's `SENTINEL_MASTER_NAME`).
const MASTER_NAME: &str = "dlock";

fn now_us() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros())
}

/// What one run of the loop needs.
struct Run {
    workload: String,
    process: u64,
    name: String,
    ttl: Duration,
    hold: (u64, u64),
    period: Duration,
    seed: u64,
    next_element: u64,
    ops: u64,
}

impl Run {
    fn random_hold(&mut self) -> Duration {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        let (lo, hi) = self.hold;
        Duration::from_millis(lo + self.seed % (hi.saturating_sub(lo) + 1))
    }

    fn op(&mut self, kind: &str, invoked: u128, completed: Option<u128>, outcome: &str) {
        self.ops += 1;
        let completed = completed.map_or("-".to_owned(), |c| c.to_string());
        report(&format!(
            "op {} {kind} {invoked} {completed} {outcome}",
            self.process
        ));
    }

    /// Why the operation sent at `invoked` ended `unknown`.
    fn error(&self, invoked: u128, error: &dyn std::fmt::Display) {
        let text = error.to_string();
        let text: Vec<&str> = text.split_whitespace().collect();
        report(&format!(
            "error {} {invoked} {}",
            self.process,
            text.join(" ")
        ));
    }

    fn event(&self, what: &str, invoked: u128, completed: Option<u128>, result: &str, v: &str) {
        let completed = completed.map_or("-".to_owned(), |c| c.to_string());
        report(&format!(
            "{what} {} {invoked} {completed} {result} {v}",
            self.process
        ));
    }
}

fn durability(text: &str) -> Result<Durability, BoxError> {
    if text == "none" {
        return Ok(Durability::None);
    }
    let mut parts = text.split(':');
    match (parts.next(), parts.next(), parts.next()) {
        (Some("replicas"), Some(n), Some(ms)) => Ok(Durability::Replicas {
            n: n.parse()?,
            timeout: Duration::from_millis(ms.parse()?),
        }),
        _ => Err(format!("durability={text}: none or replicas:N:TIMEOUT_MS").into()),
    }
}

pub(crate) async fn matrix(opts: &HashMap<String, String>) -> Result<(), BoxError> {
    let timeout = Duration::from_millis(num(opts, "command_timeout_ms", 500)?);
    let sentinels: Vec<String> = opt(opts, "sentinels")?
        .split(',')
        .map(str::to_owned)
        .collect();
    let mut run = Run {
        workload: opt(opts, "workload")?.to_owned(),
        process: num(opts, "process", 0)?,
        name: opt(opts, "name")?.to_owned(),
        ttl: Duration::from_millis(num(opts, "ttl_ms", 8_000)?),
        hold: (
            num(opts, "hold_min_ms", 200)?,
            num(opts, "hold_max_ms", 4_000)?,
        ),
        period: Duration::from_millis(num(opts, "period_ms", 100)?),
        seed: num(opts, "seed", 1)? | 1,
        next_element: 0,
        ops: 0,
    };
    let until = Instant::now() + Duration::from_millis(num(opts, "ms", 20_000)?);
    match opt(opts, "client")? {
        "dlock" => {
            let client = Client::sentinel_builder(MASTER_NAME, sentinels)
                .command_timeout(timeout)
                .connect_timeout(timeout)
                .build()?;
            let options = MutexOptions::new()
                .ttl(run.ttl)
                .fenced()
                .durability(durability(opt(opts, "durability")?)?);
            let lock = client.mutex_with(&run.name, options)?;
            while Instant::now() < until {
                dlock_turn(&mut run, &lock, &client, until).await;
            }
        }
        "plain" => {
            let mut conn = PlainConn::new(None, sentinels, MASTER_NAME, timeout);
            while Instant::now() < until {
                plain_turn(&mut run, &mut conn, until).await;
            }
        }
        other => return Err(format!("client={other}: dlock or plain").into()),
    }
    report(&format!("done ops={}", run.ops));
    Ok(())
}

/// An acquire sent at `invoked` that was not granted: answered busy, or left without an answer
/// (an error: it may still have run). Recorded, then a pause before the next attempt.
async fn not_granted(run: &mut Run, invoked: u128, error: Option<&dyn std::fmt::Display>) {
    match error {
        None => run.op("acquire", invoked, Some(now_us()), "busy"),
        Some(error) => {
            run.op("acquire", invoked, None, "unknown");
            run.error(invoked, error);
        }
    }
    tokio::time::sleep(PAUSE).await;
}

/// One attempt with dlock, and the hold's work if it was granted.
async fn dlock_turn(run: &mut Run, lock: &dlock_core::Mutex, client: &Client, until: Instant) {
    let invoked = now_us();
    let guard = match lock.try_acquire().await {
        Ok(Some(guard)) => guard,
        Ok(None) => return not_granted(run, invoked, None).await,
        Err(e) => return not_granted(run, invoked, Some(&e)).await,
    };
    let completed = now_us();
    let left = guard.safe_until().saturating_duration_since(Instant::now());
    let fence = guard.fencing_token().await.map_or(0, |f| f.get());
    let granted = format!("granted:{fence}:{}", completed + left.as_micros());
    run.op("acquire", invoked, Some(completed), &granted);
    let hold_until = (Instant::now() + run.random_hold()).min(until);
    match run.workload.as_str() {
        "guarded" => {
            while Instant::now() < hold_until {
                dlock_guarded_write(run, &guard, client, fence).await;
                tokio::time::sleep(run.period).await;
            }
        }
        "set" => {
            // Read under the hold too (a guarded GET): on the server that takes the write.
            let key = format!("{{{}}}:set", run.name);
            let read = guard.guarded().get(&key).exec().await;
            let value = read.ok().and_then(|r| r.reply::<Option<String>>(0).ok());
            if let Some(value) = value {
                let value = value.unwrap_or_default();
                tokio::time::sleep(run.period).await;
                let element = format!("{}-{}", run.process, run.next_element);
                run.next_element += 1;
                let invoked = now_us();
                let write = guard
                    .guarded()
                    .set(&key, joined(&value, &element))
                    .exec()
                    .await;
                let (completed, result) = guarded_result(run, invoked, write);
                run.event("write", invoked, completed, result, &element);
            }
        }
        _ => tokio::time::sleep_until(hold_until.into()).await,
    }
    let asked = now_us();
    let (completed, outcome) = match guard.release().await {
        Ok(ReleaseOutcome::Released | ReleaseOutcome::Nested) => (Some(now_us()), "released"),
        Ok(_) => (Some(now_us()), "not-held"),
        Err(e) => {
            run.error(asked, &e);
            (None, "unknown")
        }
    };
    run.op("release", asked, completed, outcome);
    tokio::time::sleep(PAUSE).await;
}

async fn dlock_guarded_write(
    run: &Run,
    guard: &dlock_core::MutexGuard,
    client: &Client,
    fence: u64,
) {
    let key = format!("{{{}}}:writes", run.name);
    let invoked = now_us();
    let write = guard.guarded().rpush(&key, fence).exec().await;
    let (completed, result) = guarded_result(run, invoked, write);
    run.event("write", invoked, completed, result, &fence.to_string());
    let Ok(token) = guard.fencing_token().await else {
        return;
    };
    let invoked = now_us();
    let fenced = client
        .fenced_set(&format!("{{{}}}:fenced", run.name), token, fence)
        .await;
    let (completed, result) = match fenced {
        Ok(Fenced::Written) => (Some(now_us()), "written"),
        Ok(_) => (Some(now_us()), "stale"),
        Err(e) => {
            run.error(invoked, &e);
            (None, "unknown")
        }
    };
    run.event("fenced", invoked, completed, result, &fence.to_string());
}

/// A guarded write's answer: applied (every command ran), refused, or no answer.
fn guarded_result(
    run: &Run,
    invoked: u128,
    outcome: Result<Guarded, dlock_core::Error>,
) -> (Option<u128>, &'static str) {
    match outcome {
        Ok(Guarded::Applied(replies)) if replies.iter().all(Result::is_ok) => {
            (Some(now_us()), "applied")
        }
        // A command refused at run time (NOREPLICAS, READONLY): not applied.
        Ok(Guarded::Applied(replies)) => {
            if let Some(Err(e)) = replies.iter().find(|r| r.is_err()) {
                run.error(invoked, e);
            }
            (None, "unknown")
        }
        Ok(_) => (Some(now_us()), "refused"),
        Err(e) => {
            run.error(invoked, &e);
            (None, "unknown")
        }
    }
}

fn joined(current: &str, element: &str) -> String {
    if current.is_empty() {
        element.to_owned()
    } else {
        format!("{current},{element}")
    }
}

/// Reads the set through the plain client's connection (`None`: no answer).
async fn read_set(run: &Run, conn: &mut PlainConn) -> Option<String> {
    let mut get = redis::cmd("GET");
    get.arg(format!("{{{}}}:set", run.name));
    conn.query::<Option<String>>(&get)
        .await
        .ok()
        .map(Option::unwrap_or_default)
}

/// One attempt with the plain client, and the hold's work if it was granted.
async fn plain_turn(run: &mut Run, conn: &mut PlainConn, until: Instant) {
    let key = run.name.clone();
    let invoked = now_us();
    let token = format!("{}-{invoked}-{}", run.process, run.seed);
    match plain::acquire(conn, &key, &token, run.ttl).await {
        Ok(true) => {}
        Ok(false) => return not_granted(run, invoked, None).await,
        Err(e) => return not_granted(run, invoked, Some(&e)).await,
    }
    let completed = now_us();
    // The lease as a careful plain client counts it: from the request, less dlock's drift.
    let drift = run.ttl / 100 + Duration::from_millis(2);
    let safe_until = invoked + (run.ttl - drift).as_micros();
    run.op(
        "acquire",
        invoked,
        Some(completed),
        &format!("granted:0:{safe_until}"),
    );
    let hold_until = (Instant::now() + run.random_hold()).min(until);
    // The plain client's only order: when it asked for the lock.
    let id = invoked.to_string();
    match run.workload.as_str() {
        "guarded" => {
            while Instant::now() < hold_until {
                plain_write(run, conn, "RPUSH", "writes", &id, "write").await;
                plain_write(run, conn, "SET", "fenced", &id, "fenced").await;
                tokio::time::sleep(run.period).await;
            }
        }
        "set" => {
            if let Some(value) = read_set(run, conn).await {
                tokio::time::sleep(run.period).await;
                let element = format!("{}-{}", run.process, run.next_element);
                run.next_element += 1;
                let value = joined(&value, &element);
                let mut set = redis::cmd("SET");
                set.arg(format!("{{{}}}:set", run.name)).arg(value);
                let invoked = now_us();
                let (completed, result) = match conn.query::<()>(&set).await {
                    Ok(()) => (Some(now_us()), "applied"),
                    Err(e) => {
                        run.error(invoked, &e);
                        (None, "unknown")
                    }
                };
                run.event("write", invoked, completed, result, &element);
            }
        }
        _ => tokio::time::sleep_until(hold_until.into()).await,
    }
    let asked = now_us();
    let (completed, outcome) = match plain::release(conn, &key, &token).await {
        Ok(true) => (Some(now_us()), "released"),
        Ok(false) => (Some(now_us()), "not-held"),
        Err(e) => {
            run.error(asked, &e);
            (None, "unknown")
        }
    };
    run.op("release", asked, completed, outcome);
    tokio::time::sleep(PAUSE).await;
}

/// A plain, unchecked write (`RPUSH` or `SET` of `id` to `{name}:<suffix>`), reported as
/// `what` (`write` or `fenced`, as dlock's would be).
async fn plain_write(
    run: &Run,
    conn: &mut PlainConn,
    cmd: &str,
    suffix: &str,
    id: &str,
    what: &str,
) {
    let mut write = redis::cmd(cmd);
    write.arg(format!("{{{}}}:{suffix}", run.name)).arg(id);
    let invoked = now_us();
    let (completed, result) = match conn.query::<redis::Value>(&write).await {
        Ok(_) => (
            Some(now_us()),
            if what == "write" {
                "applied"
            } else {
                "written"
            },
        ),
        Err(e) => {
            run.error(invoked, &e);
            (None, "unknown")
        }
    };
    run.event(what, invoked, completed, result, id);
}
