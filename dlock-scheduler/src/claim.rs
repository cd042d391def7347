//! The Redis side of runs: claiming an occurrence (`claim.lua`), taking a `run_now` request
//! (`take_request.lua`), withdrawing a claim whose reply was lost (`withdraw.lua`).

use std::time::Duration;

use chrono::{DateTime, Utc};
use redis::Value;

use crate::error::Error;
use crate::run::{Attempt, JobEntry};
use crate::runner::Inner;
use crate::scripts;

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
        .arg(run_id)
        .arg(attempt.occurrence.timestamp_millis())
        .arg(&inner.replica.id)
        .arg(&inner.replica.host)
        .arg(inner.replica.pid)
        .arg(&attempt.token)
        .arg(millis(inner.retention))
        .arg(inner.history)
        .arg(attempt.fire_at.timestamp_millis());
    let reply: Vec<Value> =
        scripts::eval(&inner.client, &invocation, "claim an occurrence").await?;
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
    let reply: Vec<Value> =
        scripts::eval(&inner.client, &invocation, "take a run_now request").await?;
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
    let withdrawn: i64 = scripts::eval(&inner.client, &invocation, "withdraw a claim").await?;
    Ok(withdrawn == 1)
}

/// A duration in whole milliseconds, for a script argument.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
