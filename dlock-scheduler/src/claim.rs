//! Claims, the Redis side of runs: claiming an occurrence (`claim.lua`), taking a `run_now`
//! request and claiming its run (`take_request.lua`), withdrawing a claim whose reply was lost
//! (`withdraw.lua`). Every reply carries the server's time, from which the replica corrects its
//! clock ([`crate::clock::ServerClock`]).

use std::time::Duration;

use chrono::{DateTime, Utc};
use dlock_core::__private;
use redis::Value;

use crate::error::Error;
use crate::scripts::{self, millis};
use crate::shared::{JobEntry, Shared, Turn};

/// What `claim.lua` answered.
pub(crate) enum Claim {
    Won,
    /// Claimed by someone else, or paused.
    Lost,
    /// Too early by the server's clock, or another replica's turn: ask again after this.
    Wait(Duration),
}

/// One scheduled occurrence to claim, as run `run_id` with the attempt's `token`.
pub(crate) struct Occurrence<'a> {
    pub(crate) run_id: &'a str,
    /// The nominal occurrence.
    pub(crate) nominal: DateTime<Utc>,
    /// When it may start (nominal + jitter), by the server's clock.
    pub(crate) fire_at: DateTime<Utc>,
    pub(crate) token: &'a str,
}

/// Runs `claim.lua` for a scheduled occurrence of `entry`'s job.
pub(crate) async fn claim(
    shared: &Shared,
    entry: &JobEntry,
    occurrence: &Occurrence<'_>,
) -> Result<Claim, Error> {
    let keys = &entry.keys;
    let mut invocation = scripts::CLAIM.prepare_invoke();
    invocation
        .key(&keys.claims)
        .key(&keys.runs)
        .key(&keys.ledger)
        .key(&keys.paused)
        .key(&keys.replicas)
        .key(&keys.turn)
        .arg(occurrence.run_id)
        .arg(occurrence.nominal.timestamp_millis())
        .arg(&shared.replica.id)
        .arg(&shared.replica.host)
        .arg(shared.replica.pid)
        .arg(occurrence.token)
        .arg(millis(shared.retention))
        .arg(shared.history)
        .arg(occurrence.fire_at.timestamp_millis())
        .arg(millis(shared.turn_grace))
        .arg(millis(shared.liveness()));
    let sent = shared.clock.local();
    let reply: Vec<Value> =
        __private::invoke(&shared.client, &invocation, "claim an occurrence").await?;
    shared.heard(Some(entry), sent, reply.get(2));
    let next = match reply.get(3) {
        Some(Value::BulkString(id)) if id.as_slice() == shared.replica.id.as_bytes() => Turn::Mine,
        Some(Value::BulkString(id)) if !id.is_empty() => Turn::Others,
        _ => Turn::Unknown,
    };
    entry.set_next_turn(next);
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
    shared: &Shared,
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
        .arg(&shared.replica.id)
        .arg(&shared.replica.host)
        .arg(shared.replica.pid)
        .arg(token)
        .arg(millis(shared.retention))
        .arg(shared.history);
    let sent = shared.clock.local();
    let reply: Vec<Value> =
        __private::invoke(&shared.client, &invocation, "take a run_now request").await?;
    shared.heard(None, sent, reply.last());
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
    shared: &Shared,
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
    let withdrawn: i64 = __private::invoke(&shared.client, &invocation, "withdraw a claim").await?;
    Ok(withdrawn == 1)
}
