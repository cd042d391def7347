//! Claims, the Redis side of runs: claiming an occurrence (`claim.lua`), taking a `run_now`
//! request and claiming its run (`take_request.lua`), withdrawing a claim whose reply was lost
//! (`withdraw.lua`); under at-least-once delivery, taking a due retry (`take_retry.lua`) and
//! renewing a running attempt's lease (`renew_attempt.lua`). Every reply carries the server's time, from which the replica corrects its
//! clock ([`crate::clock::ServerClock`]).

use std::time::Duration;

use chrono::{DateTime, Utc};
use dlock_core::ext;
use redis::Value;

use crate::error::Error;
use crate::replica_state::{JobEntry, Shared, Turn};
use crate::scripts::{self, millis};

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
        .key(&keys.retries)
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
        .arg(millis(shared.liveness()))
        .arg(attempt_lease(entry))
        .arg(entry.turn_offset);
    let sent = shared.clock.local();
    let reply: Vec<Value> = ext::invoke(&shared.client, &invocation, "claim an occurrence").await?;
    // A won claim answers {1, now, next[, due]}; the others {0|2, reason|wait, now, next[, due]}.
    let (now_at, next_at) = if matches!(reply.first(), Some(Value::Int(1))) {
        (1, 2)
    } else {
        (2, 3)
    };
    shared.heard(Some(entry), sent, reply.get(now_at));
    let next = match reply.get(next_at) {
        Some(Value::BulkString(id)) if id.as_slice() == shared.replica.id.as_bytes() => Turn::Mine,
        Some(Value::BulkString(id)) if !id.is_empty() => Turn::Others,
        _ => Turn::Unknown,
    };
    entry.set_next_turn(next);
    if entry.job.delivery.retries()
        && let Some(Value::Int(due_ms)) = reply.last()
    {
        entry.note_retry_due(*due_ms);
    }
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
        .key(&keys.retries)
        .arg(run_id)
        .arg(&shared.replica.id)
        .arg(&shared.replica.host)
        .arg(shared.replica.pid)
        .arg(token)
        .arg(millis(shared.retention))
        .arg(shared.history)
        .arg(attempt_lease(entry));
    let sent = shared.clock.local();
    let reply: Vec<Value> =
        ext::invoke(&shared.client, &invocation, "take a run_now request").await?;
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
        .key(&keys.retries)
        .arg(run_id)
        .arg(token)
        .arg(scripts::secs(scripts::REQUEST_TTL));
    let withdrawn: i64 = ext::invoke(&shared.client, &invocation, "withdraw a claim").await?;
    Ok(withdrawn == 1)
}

/// The attempt lease a claim starts: the job's lease under at-least-once delivery, 0 (none)
/// at most once.
fn attempt_lease(entry: &JobEntry) -> u64 {
    if entry.job.delivery.retries() {
        millis(entry.job.lease)
    } else {
        0
    }
}

/// A retry this replica claimed (`take_retry.lua`).
pub(crate) struct Retry {
    pub(crate) run_id: String,
    pub(crate) attempt: u32,
    /// The run's occurrence (or a manual run's request time).
    pub(crate) occurrence: DateTime<Utc>,
    pub(crate) manual: bool,
    /// The run's own JSON arguments (a one-off job's), if it has any.
    pub(crate) args: Option<std::sync::Arc<str>>,
    /// The submitter's `traceparent` (a one-off job's, see `trace.rs`), if it has one.
    pub(crate) trace: Option<std::sync::Arc<str>>,
}

/// What `take_retry.lua` answered.
pub(crate) enum Retries {
    /// This replica claimed an attempt and must run it.
    Claimed(Retry),
    /// An abandoned attempt was settled: ask again.
    Again,
    /// Nothing is due; the first run is due at this server time (`None`: no run is pending,
    /// or the job is paused).
    Idle(Option<DateTime<Utc>>),
}

/// Settles an abandoned attempt or claims the first due retry of `entry`'s job with `token`.
pub(crate) async fn take_retry(
    shared: &Shared,
    entry: &JobEntry,
    token: &str,
) -> Result<Retries, Error> {
    let keys = &entry.keys;
    let job = &entry.job;
    let mut invocation = scripts::TAKE_RETRY.prepare_invoke();
    invocation
        .key(&keys.runs)
        .key(&keys.ledger)
        .key(&keys.paused)
        .key(&keys.retries)
        .arg(&shared.replica.id)
        .arg(&shared.replica.host)
        .arg(shared.replica.pid)
        .arg(token)
        .arg(millis(job.lease))
        .arg(job.delivery.attempts())
        .arg(millis(job.delivery.backoff()));
    let sent = shared.clock.local();
    let reply: Vec<Value> = ext::invoke(&shared.client, &invocation, "take a due retry").await?;
    shared.heard(None, sent, reply.last());
    let time = |ms: i64| {
        chrono::TimeZone::timestamp_millis_opt(&Utc, ms)
            .single()
            .ok_or_else(|| {
                Error::protocol(format!(
                    "job `{}`: a retry holds the time {ms} ms",
                    job.name
                ))
            })
    };
    match reply.as_slice() {
        [
            Value::Int(1),
            Value::BulkString(id),
            Value::Int(attempt),
            Value::Int(occurrence),
            Value::Int(manual),
            args,
            trace,
            ..,
        ] => Ok(Retries::Claimed(Retry {
            trace: match trace {
                Value::BulkString(record) => {
                    let run = String::from_utf8_lossy(id);
                    crate::trace::parse(&job.name, &run, &String::from_utf8_lossy(record))
                }
                _ => None,
            },
            run_id: String::from_utf8_lossy(id).into_owned(),
            attempt: u32::try_from(*attempt).unwrap_or(u32::MAX),
            occurrence: time(*occurrence)?,
            manual: *manual == 1,
            args: match args {
                Value::BulkString(json) => Some(String::from_utf8_lossy(json).into()),
                _ => None,
            },
        })),
        [Value::Int(3), ..] => Ok(Retries::Again),
        [Value::Int(0), Value::Int(next), ..] if *next >= 0 => {
            Ok(Retries::Idle(Some(time(*next)?)))
        }
        [Value::Int(0), ..] => Ok(Retries::Idle(None)),
        other => Err(Error::protocol(format!(
            "job `{}`: take_retry.lua answered {other:?}",
            job.name
        ))),
    }
}

/// Renews the lease of this replica's attempt `token` at run `run_id`: `false` when the run's
/// current attempt is another one (this one was superseded) or has ended.
pub(crate) async fn renew_attempt(
    shared: &Shared,
    entry: &JobEntry,
    run_id: &str,
    token: &str,
) -> Result<bool, Error> {
    let mut invocation = scripts::RENEW_ATTEMPT.prepare_invoke();
    invocation
        .key(&entry.keys.ledger)
        .key(&entry.keys.retries)
        .arg(run_id)
        .arg(token)
        .arg(millis(entry.job.lease));
    let sent = shared.clock.local();
    let reply: Vec<Value> = ext::invoke(&shared.client, &invocation, "renew an attempt").await?;
    shared.heard(None, sent, reply.last());
    Ok(matches!(reply.first(), Some(Value::Int(1))))
}

/// The at-least-once protocol, script by script, on a real `redis-server`: an attempt whose
/// lease lapses is settled abandoned and superseded; a superseded attempt can neither record,
/// renew nor withdraw; a failed attempt is retried after its backoff; the last attempt's
/// outcome is final.
#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use chrono::Utc;
    use dlock_core::Client;
    use dlock_testkit::RedisServer;

    use super::*;
    use crate::job::{Delivery, Job, Overlap};
    use crate::ledger::{self, Recorded, Recording, RunOutcome};
    use crate::scheduler::Scheduler;

    fn scheduler(url: &str, name: &str, attempts: u32) -> Scheduler {
        let job = Job::new(name, "0 0 * * *", "UTC", |_| async { Ok::<(), String>(()) })
            .unwrap()
            .delivery(Delivery::at_least_once(attempts, Duration::ZERO))
            .overlap(Overlap::Allow)
            .lease(Duration::from_secs(1));
        Scheduler::builder(Client::open(url).unwrap())
            .job(job)
            .build()
            .unwrap()
    }

    /// Records `outcome` of run `run_id` for the attempt `token` (fence 7), as an attempt does.
    pub(crate) async fn record(
        shared: &Shared,
        entry: &JobEntry,
        run_id: &str,
        token: &str,
        outcome: &RunOutcome,
    ) -> Recorded {
        let how = Recording {
            run_id,
            token,
            fence: Some(7),
            delivery: entry.job.delivery,
            wake: (&entry.keys.wake, &entry.job.name, "PUBLISH"),
            suspect: false,
        };
        ledger::record(&shared.client, &entry.keys, &how, outcome)
            .await
            .unwrap()
    }

    /// Asks `take_retry.lua` until it claims an attempt for `token`, sleeping until the first
    /// pending run is due (an attempt's lease deadline) as its replies say.
    pub(crate) async fn retry_for(shared: &Shared, entry: &JobEntry, token: &str) -> Retry {
        for _ in 0..20 {
            match take_retry(shared, entry, token).await.unwrap() {
                Retries::Claimed(retry) => return retry,
                Retries::Again => {}
                Retries::Idle(Some(due)) => tokio::time::sleep(shared.clock.until(due)).await,
                Retries::Idle(None) => panic!("no run is pending"),
            }
        }
        panic!("no retry became due");
    }

    async fn claim_first(shared: &Shared, entry: &JobEntry, token: &str) {
        let at = chrono::TimeZone::timestamp_millis_opt(&Utc, 1000).unwrap();
        let occurrence = Occurrence {
            run_id: "1000",
            nominal: at,
            fire_at: at,
            token,
        };
        assert!(matches!(
            claim(shared, entry, &occurrence).await.unwrap(),
            Claim::Won
        ));
    }

    #[tokio::test]
    async fn a_superseded_attempt_cannot_write_and_the_last_attempt_is_final() {
        let server = RedisServer::start().unwrap();
        let scheduler = scheduler(&server.url(), "p", 3);
        let shared: Arc<Shared> = scheduler.shared.clone();
        let entry = shared.jobs.all()[0].clone();

        claim_first(&shared, &entry, "A").await;
        assert_eq!(
            record(&shared, &entry, "1000", "A", &RunOutcome::Running).await,
            Recorded::Done
        );
        assert!(renew_attempt(&shared, &entry, "1000", "A").await.unwrap());
        // A stops renewing (killed, paused): once its lease lapses the run is settled
        // abandoned and its next attempt claimed.
        let second = retry_for(&shared, &entry, "B").await;
        assert_eq!((second.run_id.as_str(), second.attempt), ("1000", 2));

        // A comes back: superseded, it can neither renew, record nor withdraw.
        assert!(!renew_attempt(&shared, &entry, "1000", "A").await.unwrap());
        let cancelled = RunOutcome::Cancelled("lost".into());
        assert_eq!(
            record(&shared, &entry, "1000", "A", &cancelled).await,
            Recorded::Superseded
        );
        assert!(!withdraw(&shared, &entry, "1000", "A").await.unwrap());
        let history = ledger::history(&shared.client, "p", shared.clock.now())
            .await
            .unwrap();
        assert_eq!(history[0].attempt, 2);
        assert_eq!(history[0].outcome, RunOutcome::Running);

        // B fails: attempt 3 is due at once (no backoff here); B cannot record again.
        assert!(renew_attempt(&shared, &entry, "1000", "B").await.unwrap());
        let failed = RunOutcome::Failed("boom".into());
        assert!(matches!(
            record(&shared, &entry, "1000", "B", &failed).await,
            Recorded::Retry(_)
        ));
        assert!(!renew_attempt(&shared, &entry, "1000", "B").await.unwrap());
        let third = retry_for(&shared, &entry, "C").await;
        assert_eq!(third.attempt, 3);
        let ok = RunOutcome::Succeeded;
        assert_eq!(
            record(&shared, &entry, "1000", "C", &ok).await,
            Recorded::Done
        );
        // Retry safety: the same outcome again changes nothing.
        assert_eq!(
            record(&shared, &entry, "1000", "C", &ok).await,
            Recorded::Done
        );
        assert_eq!(
            record(&shared, &entry, "1000", "B", &ok).await,
            Recorded::Superseded
        );

        let run = &ledger::history(&shared.client, "p", shared.clock.now())
            .await
            .unwrap()[0];
        assert_eq!((run.attempt, &run.outcome, run.next_retry), (3, &ok, None));
        let earlier: Vec<_> = run
            .earlier_attempts
            .iter()
            .map(|a| {
                (
                    a.attempt,
                    a.outcome.code(),
                    a.fencing_token.map(|f| f.get()),
                )
            })
            .collect();
        assert_eq!(earlier, [(1, "abandoned", Some(7)), (2, "failed", Some(7))]);
        assert!(matches!(
            take_retry(&shared, &entry, "D").await.unwrap(),
            Retries::Idle(None)
        ));
    }

    #[tokio::test]
    async fn a_won_claim_tells_whose_turn_the_next_occurrence_is() {
        let server = RedisServer::start().unwrap();
        let scheduler = scheduler(&server.url(), "t", 1);
        let shared: Arc<Shared> = scheduler.shared.clone();
        let entry = shared.jobs.all()[0].clone();
        claim_first(&shared, &entry, "A").await;
        // The only live replica is this one: the next turn is its own. (Read from the won
        // reply's own layout, {1, now, next}; read as the others', it was unknown.)
        assert_eq!(entry.take_next_turn(), Turn::Mine);
    }

    #[tokio::test]
    async fn the_last_attempt_abandoned_is_final() {
        let server = RedisServer::start().unwrap();
        let scheduler = scheduler(&server.url(), "q", 1);
        let shared: Arc<Shared> = scheduler.shared.clone();
        let entry = shared.jobs.all()[0].clone();
        claim_first(&shared, &entry, "A").await;
        // Its lease lapses; with no attempt left the run ends abandoned, and nothing is due.
        loop {
            match take_retry(&shared, &entry, "B").await.unwrap() {
                Retries::Idle(Some(due)) => tokio::time::sleep(shared.clock.until(due)).await,
                Retries::Again => {}
                Retries::Idle(None) => break,
                Retries::Claimed(_) => panic!("a run with one attempt was retried"),
            }
        }
        let run = &ledger::history(&shared.client, "q", shared.clock.now())
            .await
            .unwrap()[0];
        assert_eq!(
            (run.attempt, &run.outcome, run.next_retry),
            (1, &RunOutcome::Abandoned, None)
        );
        assert!(run.ended_at.is_some());
    }

    #[tokio::test]
    async fn a_run_of_another_record_version_is_refused_by_name_and_kept() {
        let server = RedisServer::start().unwrap();
        let scheduler = scheduler(&server.url(), "v", 2);
        let shared: Arc<Shared> = scheduler.shared.clone();
        let entry = shared.jobs.all()[0].clone();
        // A newer dlock's run, due now (written as that version would, during a deploy).
        let mut con = server.connection().unwrap();
        let newer = "2\x1fr\x1fh\x1f1\x1f0\x1f0\x1ftok\x1f1\x1fsomething new";
        let _: () = redis::pipe()
            .hset(&entry.keys.ledger, "1000:claim", newer)
            .zadd(&entry.keys.retries, "1000", 0)
            .query(&mut con)
            .unwrap();
        let refused = take_retry(&shared, &entry, "A").await.err().unwrap();
        assert!(
            refused.to_string().contains("format version 2"),
            "{refused}"
        );
        let score: Option<i64> = redis::cmd("ZSCORE")
            .arg(&entry.keys.retries)
            .arg("1000")
            .query(&mut con)
            .unwrap();
        assert_eq!(score, Some(0), "the newer run was dropped");
        let claim: String = redis::cmd("HGET")
            .arg(&entry.keys.ledger)
            .arg("1000:claim")
            .query(&mut con)
            .unwrap();
        assert_eq!(claim, newer);
    }

    /// A `run_now` request whose claim's reply was lost is withdrawn and queued again. Taking
    /// the last request deleted the list and its expiry, so the withdrawal must set the expiry
    /// again, as a new request does: otherwise a job that no replica runs any more keeps the
    /// list forever.
    #[tokio::test]
    async fn a_withdrawn_request_is_queued_again_with_the_lists_expiry() {
        let server = RedisServer::start().unwrap();
        let scheduler = scheduler(&server.url(), "p", 1);
        let shared: Arc<Shared> = scheduler.shared.clone();
        let entry = shared.jobs.all()[0].clone();
        scheduler.run_now("p").await.unwrap();
        let mut con = server.connection().unwrap();
        let ttl = |con: &mut redis::Connection| -> i64 {
            redis::cmd("TTL")
                .arg(&entry.keys.requests)
                .query(con)
                .unwrap()
        };
        assert!(ttl(&mut con) > 0, "request.lua sets the expiry");
        let taken = take_request(&shared, &entry, "mA", "A").await.unwrap();
        assert!(taken.is_some(), "the request is taken");
        assert_eq!(
            ttl(&mut con),
            -2,
            "the last request taken: the list is gone"
        );
        assert!(withdraw(&shared, &entry, "mA", "A").await.unwrap());
        let queued: i64 = redis::cmd("LLEN")
            .arg(&entry.keys.requests)
            .query(&mut con)
            .unwrap();
        assert_eq!(queued, 1, "the request is queued again");
        let day = scripts::secs(scripts::REQUEST_TTL);
        let left = ttl(&mut con);
        assert!(
            (day - 60..=day).contains(&left),
            "the list expires in a day again, not never: TTL {left}"
        );
    }
}
