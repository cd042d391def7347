//! One-off and delayed jobs: [`Scheduler::run_at`], [`Scheduler::run_after`] (and their
//! `_keyed` variants with an idempotency key), [`Scheduler::cancel_one_off`],
//! [`Scheduler::one_off`]; the [`OneOffId`] they return.
//!
//! A one-off job of handler `H` is a run of the hidden job `once:H`, pending in Redis until it
//! is due (`once.lua`); every replica that registered `H` runs the loop that claims them
//! (`once_loop.rs`). Its runs are in that job's ledger: `Scheduler::history("once:H")` and
//! `dlock runs once:H` list them, `Scheduler::pause("once:H")` holds them.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use dlock_core::ext;
use serde::Serialize;

use crate::control::close_names;
use crate::error::Error;
use crate::ledger::{JobKeys, RecordError, RunOutcome, RunRecord};
use crate::scheduler::Scheduler;
use crate::scripts;
use crate::validate::{self, ONE_OFF_PREFIX};

/// Names one one-off job: its handler and its run id, shown as `<handler>/<run id>`
/// (`send_report/o3f2a9c1d0b7e6a54.12`). It parses back from that text, so it can be stored
/// and used to cancel the job or read its state later, from any process.
///
/// ```
/// use dlock_scheduler::OneOffId;
///
/// let id: OneOffId = "send_report/o3f2a9c1d0b7e6a54.12".parse()?;
/// assert_eq!(id.handler(), "send_report");
/// assert_eq!(id.run_id(), "o3f2a9c1d0b7e6a54.12");
/// assert_eq!(id.job(), "once:send_report");
/// assert_eq!(id.to_string(), "send_report/o3f2a9c1d0b7e6a54.12");
/// # Ok::<(), dlock_scheduler::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OneOffId {
    handler: String,
    run: String,
}

impl OneOffId {
    /// The id of run `run` of `handler`'s one-off jobs.
    pub(crate) fn new(handler: &str, run: String) -> Self {
        Self {
            handler: handler.to_owned(),
            run,
        }
    }

    /// The handler that runs it.
    pub fn handler(&self) -> &str {
        &self.handler
    }

    /// Its run id in the ledger of [`OneOffId::job`] (`o…`; never a scheduled occurrence's).
    pub fn run_id(&self) -> &str {
        &self.run
    }

    /// The hidden job whose run it is: `once:<handler>`, as [`Scheduler::history`] and
    /// `dlock runs` name it.
    pub fn job(&self) -> String {
        format!("{ONE_OFF_PREFIX}{}", self.handler)
    }
}

impl fmt::Display for OneOffId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.handler, self.run)
    }
}

impl FromStr for OneOffId {
    type Err = Error;

    /// Parses `<handler>/<run id>`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidJob`] when it is not of that form: the run id (after the last
    /// `/`) starts with `o` followed by letters, digits, `.` or `-`; the handler is a valid
    /// handler name.
    fn from_str(text: &str) -> Result<Self, Error> {
        let refused = |why: &str| {
            Error::invalid_job(format!(
                "{text:?} is not a one-off job id (`<handler>/<run id>`, as `run_at` returns it): \
                 {why}"
            ))
        };
        let (handler, run) = text
            .rsplit_once('/')
            .ok_or_else(|| refused("there is no `/`"))?;
        let well_formed = run.len() > 1
            && run.starts_with('o')
            && run
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
        if !well_formed {
            return Err(refused(
                "the run id must be `o` followed by letters and digits",
            ));
        }
        validate::handler_name(handler)?;
        Ok(Self {
            handler: handler.to_owned(),
            run: run.to_owned(),
        })
    }
}

/// When a one-off job is due.
pub(crate) enum Due {
    /// At this time (the past: now), by the Redis server's clock.
    At(DateTime<Utc>),
    /// This long after now, by the Redis server's clock.
    After(Duration),
}

/// The text recorded with a cancelled one-off job.
const CANCELLED: &str = "cancelled before it ran (Scheduler::cancel_one_off)";

impl Scheduler {
    /// Runs `handler` once at `when`, with `args` (JSON) as [`crate::JobContext::args`]: one
    /// replica that registered the handler claims it when it is due, by the **Redis server's**
    /// clock (`when` in the past: at once), and runs it per the handler's
    /// [`crate::HandlerOptions`] — at most once by default (a replica killed mid-run leaves it
    /// recorded abandoned after its lease), or retried per [`crate::Delivery::AtLeastOnce`].
    /// Each one-off takes a lock of its own, so one-off jobs of a handler run side by side
    /// (with [`crate::JobContext::fencing_token`] and lease as any run); the context's
    /// [`crate::JobContext::job`] is `once:<handler>`, its occurrence the due time, and
    /// [`crate::JobContext::is_manual`] is true.
    ///
    /// The job is stored in Redis: it survives the restart of every replica, and waits while
    /// no live replica has the handler (it runs when one starts) or while `once:<handler>` is
    /// paused ([`Scheduler::pause`]). Each replica runs at most
    /// [`crate::SchedulerBuilder::one_off_concurrency`] one-off jobs at a time; due ones
    /// beyond that are taken by the other replicas, or wait for a free slot.
    ///
    /// The handler must be registered on *this* scheduler
    /// ([`crate::SchedulerBuilder::handler`]), even if it never runs jobs: a typo would
    /// otherwise leave a job in Redis that no replica ever runs. Register the same handlers on
    /// the process that enqueues as on the replicas.
    ///
    /// **Retention**: the run stays in the ledger of `once:<handler>` ([`Scheduler::one_off`],
    /// [`Scheduler::history`]) while it is pending or running, and once ended among the last
    /// [`crate::SchedulerBuilder::history`] runs of the handler's one-off jobs (by due time;
    /// the replicas trim the rest after runs end).
    ///
    /// ```no_run
    /// # async fn demo(scheduler: dlock_scheduler::Scheduler) -> Result<(), dlock_scheduler::Error> {
    /// use chrono::{Duration, Utc};
    ///
    /// #[derive(serde::Serialize)]
    /// struct Report<'a> { tenant: &'a str }
    ///
    /// let id = scheduler
    ///     .run_at("send_report", Utc::now() + Duration::hours(1), &Report { tenant: "acme" })
    ///     .await?;
    /// println!("queued {id}"); // send_report/o3f2a9c1d0b7e6a54.0
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidJob`] when `handler` is not registered on this scheduler
    /// (with up to five registered handlers of close names); [`crate::ErrorKind::InvalidArgs`]
    /// when `args` do not serialize to JSON; a Redis error ([`crate::ErrorKind::Redis`]).
    ///
    /// # Cancel safety
    /// If the future is dropped (or a Redis error [may have taken
    /// effect](Error::may_have_taken_effect)), the job may or may not have been enqueued, and
    /// calling again may enqueue it twice: use [`Scheduler::run_at_keyed`] when a retry must
    /// not.
    pub async fn run_at(
        &self,
        handler: &str,
        when: DateTime<Utc>,
        args: &impl Serialize,
    ) -> Result<OneOffId, Error> {
        self.enqueue(handler, None, Due::At(when), args).await
    }

    /// Runs `handler` once, `delay` from now by the Redis server's clock; otherwise as
    /// [`Scheduler::run_at`].
    ///
    /// ```no_run
    /// # async fn demo(scheduler: dlock_scheduler::Scheduler) -> Result<(), dlock_scheduler::Error> {
    /// use std::time::Duration;
    ///
    /// let id = scheduler
    ///     .run_after("send_report", Duration::from_secs(90), &serde_json::json!({"tenant": "acme"}))
    ///     .await?;
    /// # let _ = id; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Scheduler::run_at`].
    ///
    /// # Cancel safety
    /// As [`Scheduler::run_at`].
    pub async fn run_after(
        &self,
        handler: &str,
        delay: Duration,
        args: &impl Serialize,
    ) -> Result<OneOffId, Error> {
        self.enqueue(handler, None, Due::After(delay), args).await
    }

    /// Cancels a one-off job that has not started: records it cancelled (its ledger entry
    /// stays, outcome [`RunOutcome::Cancelled`]) and no replica runs it. Returns `true` if it
    /// was cancelled; `false` if it is unknown (never enqueued, a typo, or trimmed from the
    /// ledger), was cancelled already, or a replica has claimed it — it runs or ran (under
    /// at-least-once delivery its later attempts are not cancelled either). Works from any
    /// process, whether or not it registered the handler.
    ///
    /// ```no_run
    /// # async fn demo(scheduler: dlock_scheduler::Scheduler, id: dlock_scheduler::OneOffId) -> Result<(), dlock_scheduler::Error> {
    /// if !scheduler.cancel_one_off(&id).await? {
    ///     println!("{id} already started (or is unknown)");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// A Redis error ([`crate::ErrorKind::Redis`]).
    ///
    /// # Cancel safety
    /// Cancel safe: if the future is dropped the job may or may not have been cancelled;
    /// cancelling again is safe (it answers `false` if the first call did it).
    pub async fn cancel_one_off(&self, id: &OneOffId) -> Result<bool, Error> {
        let client = &self.shared.client;
        let keys = JobKeys::new(client, &id.job())?;
        let mut invocation = scripts::ONCE_CANCEL.prepare_invoke();
        invocation
            .key(&keys.ledger)
            .key(&keys.retries)
            .arg(&id.run)
            .arg(CANCELLED);
        let reply: Vec<i64> =
            ext::invoke(client, &invocation, &format!("cancel the one-off job {id}")).await?;
        Ok(reply.first() == Some(&1))
    }

    /// The state of a one-off job: its run record — outcome [`RunOutcome::Scheduled`] (due at
    /// [`RunRecord::next_retry`]) until a replica claims it, then as any run's — or `None` if
    /// it is unknown (never enqueued, or trimmed from the ledger after its retention, see
    /// [`Scheduler::run_at`]).
    ///
    /// # Errors
    /// A Redis error ([`crate::ErrorKind::Redis`]), also when the record is not one this
    /// version of dlock reads.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn one_off(&self, id: &OneOffId) -> Result<Option<RunRecord>, Error> {
        let client = &self.shared.client;
        let keys = JobKeys::new(client, &id.job())?;
        let run = &id.run;
        let mut pipe = redis::pipe();
        pipe.cmd("HMGET")
            .arg(&keys.ledger)
            .arg(format!("{run}:claim"))
            .arg(format!("{run}:end"))
            .arg(format!("{run}:attempts"))
            .cmd("ZSCORE")
            .arg(&keys.runs)
            .arg(run)
            .cmd("ZSCORE")
            .arg(&keys.retries)
            .arg(run);
        type Read = (Vec<Option<String>>, Option<f64>, Option<f64>);
        let (fields, due, deadline): Read =
            ext::query_pipe(client, &pipe, &format!("read the one-off job {id}")).await?;
        let [claim, end, attempts] = <[Option<String>; 3]>::try_from(fields)
            .map_err(|_| Error::protocol("HMGET answered the wrong number of fields"))?;
        let (Some(claim), Some(due)) = (claim, due) else {
            return Ok(None);
        };
        #[allow(clippy::cast_possible_truncation)]
        let due_ms = due as i64;
        let mut record = RunRecord::parse(due_ms, &claim, end.as_deref(), attempts.as_deref())
            .map_err(|e| match e {
                RecordError::Version(v) => Error::protocol(format!(
                    "the one-off job {id} has records of format version {v}, written by a newer \
                     dlock; this one reads version 1: upgrade it"
                )),
                RecordError::Malformed => Error::protocol(format!(
                    "the one-off job {id} has a record dlock did not write: {claim:?}"
                )),
            })?;
        // A running attempt whose lease in the ledger lapsed is abandoned (as `history` says).
        #[allow(clippy::cast_possible_truncation)]
        if record.outcome == RunOutcome::Running
            && deadline.is_none_or(|d| (d as i64) < self.shared.clock.now().timestamp_millis())
        {
            record.outcome = RunOutcome::Abandoned;
        }
        Ok(Some(record))
    }

    /// Enqueues a one-off job of `handler` without a key.
    async fn enqueue(
        &self,
        handler: &str,
        key: Option<&str>,
        due: Due,
        args: &impl Serialize,
    ) -> Result<OneOffId, Error> {
        let args = to_json(handler, args)?;
        let enqueued = self
            .enqueue_json(handler, key, due, &args, None, false)
            .await?;
        Ok(enqueued.id().clone())
    }
}

/// A one-off job's arguments as JSON.
pub(crate) fn to_json(handler: &str, args: &impl Serialize) -> Result<String, Error> {
    serde_json::to_string(args).map_err(|e| {
        Error::invalid_args(format!(
            "the arguments of a one-off job of `{handler}` do not serialize to JSON: {e}"
        ))
    })
}

/// The error for a handler this scheduler did not register, with close names.
pub(crate) fn unknown_handler<'a>(
    handler: &str,
    registered: impl Iterator<Item = &'a std::sync::Arc<str>>,
) -> Error {
    let names: Vec<String> = registered.map(|name| name.to_string()).collect();
    let close = close_names(handler, names);
    let hint = if close.is_empty() {
        String::new()
    } else {
        format!("; did you mean {}?", close.join(", "))
    };
    Error::invalid_job(format!(
        "no handler `{handler}` is registered on this scheduler, so a one-off job of it would \
         wait in Redis for a replica that may never come; register it with \
         SchedulerBuilder::handler (on this process too){hint}"
    ))
}

/// The one-off protocol, script by script, on a real `redis-server`: enqueue (due times by the
/// server's clock, idempotency keys), the first attempt claimed by `take_retry.lua` without an
/// attempt 0 in the history, cancel, and a replica killed mid-run.
#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use chrono::Utc;
    use dlock_core::Client;
    use dlock_testkit::RedisServer;

    use super::*;
    use crate::claim::tests::{record, retry_for};
    use crate::claim::{self, Retries};
    use crate::handler::HandlerOptions;
    use crate::job::Delivery;
    use crate::ledger::Recorded;
    use crate::replica_state::{JobEntry, Shared};

    fn scheduler(url: &str, delivery: Delivery) -> Scheduler {
        let options = HandlerOptions::new()
            .lease(Duration::from_secs(1))
            .delivery(delivery);
        Scheduler::builder(Client::open(url).unwrap())
            .handler_with("send_report", options, |_| async { Ok::<(), String>(()) })
            .build()
            .unwrap()
    }

    fn entry(scheduler: &Scheduler) -> (Arc<Shared>, Arc<JobEntry>) {
        let shared = scheduler.shared.clone();
        let entry = shared.once["send_report"].clone();
        (shared, entry)
    }

    #[tokio::test]
    async fn a_one_off_is_pending_until_due_then_claimed_as_its_first_attempt() {
        let server = RedisServer::start().unwrap();
        let scheduler = scheduler(&server.url(), Delivery::AtMostOnce);
        let (shared, entry) = entry(&scheduler);
        let args = serde_json::json!({"tenant": "acme"});
        let id = scheduler
            .run_after("send_report", Duration::from_millis(600), &args)
            .await
            .unwrap();
        assert!(id.run_id().starts_with('o'), "{id}");
        assert_eq!(id.to_string().parse::<OneOffId>().unwrap(), id);

        let pending = scheduler.one_off(&id).await.unwrap().unwrap();
        assert_eq!(
            (pending.attempt, &pending.outcome),
            (0, &RunOutcome::Scheduled)
        );
        let due = pending.next_retry.unwrap();
        assert_eq!(
            due,
            std::time::SystemTime::from(pending.occurrence),
            "the run's occurrence is its due time"
        );
        assert_eq!(
            scheduler.history("once:send_report").await.unwrap(),
            std::slice::from_ref(&pending)
        );
        // Not due yet, by the server's clock: the reply says when.
        match claim::take_retry(&shared, &entry, "early").await.unwrap() {
            Retries::Idle(Some(at)) => {
                assert_eq!(std::time::SystemTime::from(at), due);
            }
            _ => panic!("a one-off was claimed before it was due"),
        }

        let retry = retry_for(&shared, &entry, "A").await;
        assert_eq!((retry.run_id.as_str(), retry.attempt), (id.run_id(), 1));
        assert!(retry.manual);
        assert_eq!(retry.occurrence, pending.occurrence);
        assert_eq!(retry.args.as_deref(), Some(r#"{"tenant":"acme"}"#));
        assert_eq!(
            record(&shared, &entry, &retry.run_id, "A", &RunOutcome::Running).await,
            Recorded::Done
        );
        assert_eq!(
            record(&shared, &entry, &retry.run_id, "A", &RunOutcome::Succeeded).await,
            Recorded::Done
        );

        let ran = scheduler.one_off(&id).await.unwrap().unwrap();
        assert_eq!(
            (ran.attempt, &ran.outcome, ran.next_retry),
            (1, &RunOutcome::Succeeded, None)
        );
        assert!(
            ran.earlier_attempts.is_empty(),
            "attempt 0 (never run) was archived: {:?}",
            ran.earlier_attempts
        );
        assert!(matches!(
            claim::take_retry(&shared, &entry, "B").await.unwrap(),
            Retries::Idle(None)
        ));
        // It ran: too late to cancel.
        assert!(!scheduler.cancel_one_off(&id).await.unwrap());
    }

    #[tokio::test]
    async fn when_in_the_past_is_due_now_and_unknown_handlers_are_refused() {
        let server = RedisServer::start().unwrap();
        let scheduler = scheduler(&server.url(), Delivery::AtMostOnce);
        let (shared, entry) = entry(&scheduler);
        let long_ago = Utc::now() - chrono::Duration::days(1);
        let id = scheduler.run_at("send_report", long_ago, &1).await.unwrap();
        let retry = match claim::take_retry(&shared, &entry, "A").await.unwrap() {
            Retries::Claimed(retry) => retry,
            _ => panic!("a one-off due in the past was not due at once"),
        };
        assert_eq!(retry.run_id, id.run_id());
        assert!(
            retry.occurrence > long_ago,
            "its due time is the enqueue time"
        );

        let unknown = scheduler
            .run_at("send_reprot", Utc::now(), &1)
            .await
            .unwrap_err();
        assert_eq!(unknown.kind(), crate::ErrorKind::InvalidJob);
        assert!(
            unknown.to_string().contains("did you mean send_report?"),
            "{unknown}"
        );
        struct Unserializable;
        impl Serialize for Unserializable {
            fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
                Err(serde::ser::Error::custom("no"))
            }
        }
        let bad = scheduler
            .run_at("send_report", Utc::now(), &Unserializable)
            .await
            .unwrap_err();
        assert_eq!(bad.kind(), crate::ErrorKind::InvalidArgs);
    }

    #[tokio::test]
    async fn an_idempotency_key_used_twice_enqueues_one_job() {
        let server = RedisServer::start().unwrap();
        let scheduler = scheduler(&server.url(), Delivery::AtMostOnce);
        let (shared, entry) = entry(&scheduler);
        let later = Utc::now() + chrono::Duration::hours(1);
        let first = scheduler
            .run_at_keyed("send_report", "k-1", later, &1)
            .await
            .unwrap();
        let again = scheduler
            .run_after_keyed("send_report", "k-1", Duration::ZERO, &2)
            .await
            .unwrap();
        assert_eq!(first, again);
        let other = scheduler
            .run_at_keyed("send_report", "k-2", later, &3)
            .await
            .unwrap();
        assert_ne!(first, other);
        let mut con = server.connection().unwrap();
        let pending: usize = redis::cmd("ZCARD")
            .arg(&entry.keys.retries)
            .query(&mut con)
            .unwrap();
        assert_eq!(pending, 2);
        // Still one job once it was cancelled: the key is remembered.
        assert!(scheduler.cancel_one_off(&first).await.unwrap());
        let after = scheduler
            .run_at_keyed("send_report", "k-1", Utc::now(), &1)
            .await
            .unwrap();
        assert_eq!(after, first);
        assert!(matches!(
            claim::take_retry(&shared, &entry, "A").await.unwrap(),
            Retries::Idle(Some(_))
        ));
        let empty = scheduler
            .run_at_keyed("send_report", "", later, &1)
            .await
            .unwrap_err();
        assert_eq!(empty.kind(), crate::ErrorKind::InvalidJob);
    }

    #[tokio::test]
    async fn a_cancelled_one_off_is_never_claimed() {
        let server = RedisServer::start().unwrap();
        let scheduler = scheduler(&server.url(), Delivery::AtMostOnce);
        let (shared, entry) = entry(&scheduler);
        let id = scheduler
            .run_at("send_report", Utc::now(), &1)
            .await
            .unwrap();
        assert!(scheduler.cancel_one_off(&id).await.unwrap());
        assert!(
            !scheduler.cancel_one_off(&id).await.unwrap(),
            "cancelled twice"
        );
        assert!(matches!(
            claim::take_retry(&shared, &entry, "A").await.unwrap(),
            Retries::Idle(None)
        ));
        let record = scheduler.one_off(&id).await.unwrap().unwrap();
        assert_eq!(record.outcome, RunOutcome::Cancelled(CANCELLED.into()));
        assert_eq!(record.attempt, 0);
        assert!(record.ended_at.is_some());
        let unknown = OneOffId {
            handler: "send_report".into(),
            run: "onever".into(),
        };
        assert!(!scheduler.cancel_one_off(&unknown).await.unwrap());
        assert_eq!(scheduler.one_off(&unknown).await.unwrap(), None);
    }

    #[tokio::test]
    async fn at_most_once_a_killed_replicas_one_off_is_abandoned_and_never_run_again() {
        let server = RedisServer::start().unwrap();
        let scheduler = scheduler(&server.url(), Delivery::AtMostOnce);
        let (shared, entry) = entry(&scheduler);
        let id = scheduler
            .run_at("send_report", Utc::now(), &1)
            .await
            .unwrap();
        let retry = retry_for(&shared, &entry, "A").await;
        assert_eq!(
            record(&shared, &entry, &retry.run_id, "A", &RunOutcome::Running).await,
            Recorded::Done
        );
        // A is killed: it stops renewing. Once its lease lapses the run is settled abandoned,
        // final (one attempt), and nobody claims it again.
        loop {
            match claim::take_retry(&shared, &entry, "B").await.unwrap() {
                Retries::Idle(Some(due)) => tokio::time::sleep(shared.clock.until(due)).await,
                Retries::Again => {}
                Retries::Idle(None) => break,
                Retries::Claimed(_) => panic!("an at-most-once one-off ran twice"),
            }
        }
        let run = scheduler.one_off(&id).await.unwrap().unwrap();
        assert_eq!(
            (run.attempt, &run.outcome, run.next_retry),
            (1, &RunOutcome::Abandoned, None)
        );
        assert!(!scheduler.cancel_one_off(&id).await.unwrap());
    }

    #[tokio::test]
    async fn at_least_once_a_killed_replicas_one_off_is_run_again() {
        let server = RedisServer::start().unwrap();
        let scheduler = scheduler(&server.url(), Delivery::at_least_once(2, Duration::ZERO));
        let (shared, entry) = entry(&scheduler);
        let id = scheduler
            .run_at("send_report", Utc::now(), &1)
            .await
            .unwrap();
        let first = retry_for(&shared, &entry, "A").await;
        assert_eq!(
            record(&shared, &entry, &first.run_id, "A", &RunOutcome::Running).await,
            Recorded::Done
        );
        let second = retry_for(&shared, &entry, "B").await;
        assert_eq!((second.run_id.as_str(), second.attempt), (id.run_id(), 2));
        assert_eq!(second.args.as_deref(), Some("1"));
        assert_eq!(
            record(&shared, &entry, &second.run_id, "B", &RunOutcome::Succeeded).await,
            Recorded::Done
        );
        let run = scheduler.one_off(&id).await.unwrap().unwrap();
        let earlier: Vec<_> = run
            .earlier_attempts
            .iter()
            .map(|a| (a.attempt, a.outcome.code()))
            .collect();
        assert_eq!(earlier, [(1, "abandoned")]);
    }

    #[tokio::test]
    async fn the_ledger_is_trimmed_to_the_history_but_never_a_pending_run() {
        let server = RedisServer::start().unwrap();
        let client = Client::open(server.url().as_str()).unwrap();
        let scheduler = Scheduler::builder(client)
            .handler("send_report", |_| async { Ok::<(), String>(()) })
            .history(2)
            .build()
            .unwrap();
        let (shared, entry) = entry(&scheduler);
        let mut ids = Vec::new();
        for _ in 0..4 {
            ids.push(
                scheduler
                    .run_at("send_report", Utc::now(), &1)
                    .await
                    .unwrap(),
            );
        }
        let pending = scheduler
            .run_after("send_report", Duration::from_secs(3600), &1)
            .await
            .unwrap();
        for _ in 0..4 {
            let retry = retry_for(&shared, &entry, "A").await;
            record(&shared, &entry, &retry.run_id, "A", &RunOutcome::Succeeded).await;
        }
        let mut invocation = scripts::ONCE_TRIM.prepare_invoke();
        invocation
            .key(&entry.keys.runs)
            .key(&entry.keys.ledger)
            .key(&entry.keys.retries)
            .arg(2)
            .arg(1000);
        let removed: i64 = ext::invoke(&shared.client, &invocation, "trim")
            .await
            .unwrap();
        assert_eq!(removed, 3);
        let left: Vec<_> = scheduler
            .history("once:send_report")
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.outcome)
            .collect();
        assert_eq!(left, [RunOutcome::Succeeded, RunOutcome::Scheduled]);
        assert!(scheduler.one_off(&ids[0]).await.unwrap().is_none());
        assert!(scheduler.one_off(&pending).await.unwrap().is_some());
        let mut con = server.connection().unwrap();
        let fields: usize = redis::cmd("HLEN")
            .arg(&entry.keys.ledger)
            .query(&mut con)
            .unwrap();
        assert_eq!(fields, 6, "claim, end and args of the two runs left");
    }
}
