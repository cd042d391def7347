//! The Redis side of runs: claiming an occurrence (`claim.lua`), taking a `run_now` request
//! (`take_request.lua`), withdrawing a claim whose reply was lost (`withdraw.lua`), and the
//! replica's liveness for the job's turns (`heartbeat.lua`). Every reply carries the server's
//! time, from which the replica corrects its clock ([`crate::clock::ServerClock`]).

use std::sync::atomic::Ordering;
use std::time::Duration;

use chrono::{DateTime, Utc};
use redis::Value;

use crate::error::Error;
use crate::run::{Attempt, JobEntry};
use crate::runner::Inner;
use crate::scripts;
use dlock_core::__private;

/// Whose turn the next occurrence of a job is, as the last claim reply told (stored in
/// [`JobEntry::next_turn`]): a replica whose turn it is not asks only after the turn grace, so
/// that only one replica wakes up at the fire time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Turn {
    Unknown = 0,
    Mine = 1,
    Others = 2,
}

impl Turn {
    /// Takes the job's last answer, leaving "unknown" (it describes one occurrence).
    pub(crate) fn take(entry: &JobEntry) -> Self {
        match entry.next_turn.swap(Self::Unknown as u8, Ordering::Relaxed) {
            1 => Self::Mine,
            2 => Self::Others,
            _ => Self::Unknown,
        }
    }
}

/// What `claim.lua` answered.
pub(crate) enum Claim {
    Won,
    /// Claimed by someone else, or paused.
    Lost,
    /// Too early by the server's clock, or another replica's turn: ask again after this.
    Wait(Duration),
}

/// Runs `claim.lua` for a scheduled occurrence.
pub(crate) async fn claim(attempt: &Attempt, run_id: &str) -> Result<Claim, Error> {
    let inner = &attempt.inner;
    let keys = &attempt.entry.keys;
    let mut invocation = scripts::CLAIM.prepare_invoke();
    invocation
        .key(&keys.claims)
        .key(&keys.runs)
        .key(&keys.ledger)
        .key(&keys.paused)
        .key(&keys.replicas)
        .key(&keys.turn)
        .arg(run_id)
        .arg(attempt.occurrence.timestamp_millis())
        .arg(&inner.replica.id)
        .arg(&inner.replica.host)
        .arg(inner.replica.pid)
        .arg(&attempt.token)
        .arg(millis(inner.retention))
        .arg(inner.history)
        .arg(attempt.fire_at.timestamp_millis())
        .arg(millis(inner.turn_grace))
        .arg(millis(inner.liveness()));
    let sent = inner.clock.local();
    let reply: Vec<Value> =
        __private::invoke(&inner.client, &invocation, "claim an occurrence").await?;
    heard(inner, Some(&attempt.entry), sent, reply.get(2));
    let next = match reply.get(3) {
        Some(Value::BulkString(id)) if id.as_slice() == inner.replica.id.as_bytes() => Turn::Mine,
        Some(Value::BulkString(id)) if !id.is_empty() => Turn::Others,
        _ => Turn::Unknown,
    };
    attempt.entry.next_turn.store(next as u8, Ordering::Relaxed);
    Ok(match reply.as_slice() {
        [Value::Int(1), ..] => Claim::Won,
        [Value::Int(2), Value::Int(wait), ..] => {
            // A little past the instant, so the retry is not early again by rounding.
            let wait = u64::try_from(*wait).unwrap_or(0) + 2;
            Claim::Wait(Duration::from_millis(wait))
        }
        _ => Claim::Lost,
    })
}

/// Takes the oldest `run_now` request of the job and claims it as run `run_id` with `token`:
/// `Some(request time)` when one was taken (this replica must run it), `None` when there is
/// none to take (or the job is paused: the requests wait).
pub(crate) async fn take_request(
    inner: &Inner,
    entry: &JobEntry,
    run_id: &str,
    token: &str,
) -> Result<Option<DateTime<Utc>>, Error> {
    let keys = &entry.keys;
    let mut invocation = scripts::TAKE_REQUEST.prepare_invoke();
    invocation
        .key(&keys.claims)
        .key(&keys.runs)
        .key(&keys.ledger)
        .key(&keys.paused)
        .key(&keys.requests)
        .arg(run_id)
        .arg(&inner.replica.id)
        .arg(&inner.replica.host)
        .arg(inner.replica.pid)
        .arg(token)
        .arg(millis(inner.retention))
        .arg(inner.history);
    let sent = inner.clock.local();
    let reply: Vec<Value> =
        __private::invoke(&inner.client, &invocation, "take a run_now request").await?;
    heard(inner, None, sent, reply.last());
    match reply.as_slice() {
        [Value::Int(1), Value::Int(requested), ..] => {
            chrono::TimeZone::timestamp_millis_opt(&Utc, *requested)
                .single()
                .map(Some)
                .ok_or_else(|| {
                    Error::protocol(format!(
                        "job `{}`: a run_now request holds the time {requested} ms",
                        entry.job.name
                    ))
                })
        }
        _ => Ok(None),
    }
}

/// Withdraws the claim of `run_id` made with `token` if nothing of its run started (a manual
/// run's request is queued again). Returns whether there was one to withdraw.
pub(crate) async fn withdraw(
    inner: &Inner,
    entry: &JobEntry,
    run_id: &str,
    token: &str,
) -> Result<bool, Error> {
    let keys = &entry.keys;
    let mut invocation = scripts::WITHDRAW.prepare_invoke();
    invocation
        .key(&keys.claims)
        .key(&keys.runs)
        .key(&keys.ledger)
        .key(&keys.requests)
        .arg(run_id)
        .arg(token);
    let withdrawn: i64 = __private::invoke(&inner.client, &invocation, "withdraw a claim").await?;
    Ok(withdrawn == 1)
}

/// Tells Redis that this replica is live for the job (`live`), or no longer (`!live`, at
/// shutdown, so that the others do not wait for its turns).
pub(crate) async fn heartbeat(inner: &Inner, entry: &JobEntry, live: bool) -> Result<(), Error> {
    let mut invocation = scripts::HEARTBEAT.prepare_invoke();
    invocation
        .key(&entry.keys.replicas)
        .arg(&inner.replica.id)
        .arg(if live { millis(inner.liveness()) } else { 0 });
    let sent = inner.clock.local();
    let server_ms: i64 = __private::invoke(&inner.client, &invocation, "heartbeat").await?;
    if live {
        heard(inner, Some(entry), sent, Some(&Value::Int(server_ms)));
    }
    Ok(())
}

/// A reply came back: learn the server's time from it and, if the request refreshed this
/// replica's liveness for a job (`live_for`), note when.
fn heard(
    inner: &Inner,
    live_for: Option<&JobEntry>,
    sent: DateTime<Utc>,
    server_ms: Option<&Value>,
) {
    let received = inner.clock.local();
    if let Some(Value::Int(server_ms)) = server_ms {
        inner.clock.sample(sent, received, *server_ms);
    }
    if let Some(entry) = live_for {
        entry
            .beat_ms
            .store(received.timestamp_millis(), Ordering::Relaxed);
    }
}

/// A duration in whole milliseconds, for a script argument.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
