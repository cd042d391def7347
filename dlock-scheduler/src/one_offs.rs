//! What operators see of one-off jobs: the handlers the replicas registered (each one's
//! hidden job `once:<handler>`, whether it is paused, which live replicas run it, how many of
//! its one-off jobs are queued) — [`Scheduler::one_off_handlers`] — and a handler's pending
//! one-off jobs, due first — [`Scheduler::pending_one_offs`]. `dlock jobs`, `dlock once` and
//! the dashboard show them; they only read.
//!
//! A pending one-off job is an entry of the hidden job's `retries` queue (`once.lua`,
//! `take_retry.lua`) whose ledger record says it is not running: one never claimed
//! (outcome `scheduled`, attempt 0), or a retry waiting for its next attempt (at-least-once
//! delivery). The same queue also holds running attempts (by their lease deadline): those are
//! left out.

use std::time::SystemTime;

use chrono::{DateTime, Utc};
use dlock_core::ext;

use crate::error::Error;
use crate::ledger::{JobKeys, RunOutcome, RunRecord};
use crate::once::OneOffId;
use crate::scheduler::Scheduler;
use crate::validate::{self, ONE_OFF_PREFIX};

/// A handler of one-off jobs, as the job registry and Redis show it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct OneOffHandler {
    /// The handler's name ([`crate::SchedulerBuilder::handler`]).
    pub name: String,
    /// The hidden job whose runs are its one-off jobs: `once:<handler>` (what
    /// [`Scheduler::pause`] and [`Scheduler::history`] take).
    pub job: String,
    /// Whether `once:<handler>` is paused: no replica starts its one-off jobs.
    pub paused: bool,
    /// The live (not stalled) replicas that registered the handler, by id: they run its
    /// one-off jobs. Empty: its jobs wait.
    pub replicas: Vec<String>,
    /// How many of its one-off jobs are queued: waiting for their due time or next attempt,
    /// or running (the length of its queue, read in one step).
    pub queued: u64,
}

/// A one-off job that has not started (or waits for its next attempt).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PendingOneOff {
    /// Its id, to cancel it ([`Scheduler::cancel_one_off`]) or read it
    /// ([`Scheduler::one_off`]).
    pub id: OneOffId,
    /// When it is due (its next attempt, for a retry), by the Redis server's clock.
    pub due: DateTime<Utc>,
    /// The attempt it waits for: 1 when it never ran, more for a retry.
    pub attempt: u32,
    /// The replica that enqueued it, while it never ran (`None` for a retry: the record names
    /// the last attempt's replica then).
    pub enqueued_by: Option<String>,
    /// When it was enqueued, by the Redis server's clock (`None` for a retry).
    pub enqueued_at: Option<SystemTime>,
    /// Whether it was enqueued with an idempotency key (`run_at_keyed`): its run id is
    /// derived from the key (`o` + the key's SHA-1), so a later call with the key finds it.
    pub keyed: bool,
    /// The idempotency key it was enqueued with, as given. `None` without a key, and for a
    /// keyed job that a replica older than this field enqueued (during a rolling deploy): only
    /// the key's hash, its run id, is known then.
    pub key: Option<String>,
    /// Its arguments (JSON), as given.
    pub args: Option<String>,
}

impl Scheduler {
    /// The handlers of one-off jobs: each one that a replica in the job registry registered
    /// (stalled ones included) or this scheduler has, by name, with its paused state, the live
    /// replicas that run it and its queue's length.
    ///
    /// ```no_run
    /// # async fn demo(admin: dlock_scheduler::Scheduler) -> Result<(), dlock_scheduler::Error> {
    /// for handler in admin.one_off_handlers().await? {
    ///     println!("{}: {} queued, run by {:?}", handler.job, handler.queued, handler.replicas);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// A Redis error ([`crate::ErrorKind::Redis`]), also when the registry holds data this
    /// version did not write.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn one_off_handlers(&self) -> Result<Vec<OneOffHandler>, Error> {
        let registry = self.registered_replicas().await?;
        let mut names: Vec<String> = registry
            .iter()
            .flat_map(|r| r.handlers.iter().cloned())
            .chain(self.shared.handlers.keys().map(|h| h.to_string()))
            .collect();
        names.sort_unstable();
        names.dedup();
        let mut handlers = Vec::with_capacity(names.len());
        for name in names {
            let job = format!("{ONE_OFF_PREFIX}{name}");
            let keys = JobKeys::new(&self.shared.client, &job)?;
            // One slot: both keys carry the job's hash tag.
            let mut pipe = redis::pipe();
            pipe.cmd("EXISTS")
                .arg(&keys.paused)
                .cmd("ZCARD")
                .arg(&keys.retries);
            let (paused, queued): (bool, u64) =
                ext::query_pipe(&self.shared.client, &pipe, &format!("read `{job}`")).await?;
            let replicas = registry
                .iter()
                .filter(|r| !r.stalled && r.handlers.contains(&name))
                .map(|r| r.id.clone())
                .collect();
            handlers.push(OneOffHandler {
                name,
                job,
                paused,
                replicas,
                queued,
            });
        }
        Ok(handlers)
    }

    /// The pending one-off jobs of `handler`, due first: up to `limit` of the first `limit`
    /// entries of its queue (running attempts are left out, so fewer may come back). Works
    /// from any process, whether or not it registered the handler.
    ///
    /// ```no_run
    /// # async fn demo(admin: dlock_scheduler::Scheduler) -> Result<(), dlock_scheduler::Error> {
    /// for job in admin.pending_one_offs("send_report", 100).await? {
    ///     println!("{} due {} with {:?}", job.id, job.due, job.args);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidJob`] for a name no handler can have; a Redis error
    /// ([`crate::ErrorKind::Redis`]), also when a record is not one this version reads.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn pending_one_offs(
        &self,
        handler: &str,
        limit: usize,
    ) -> Result<Vec<PendingOneOff>, Error> {
        validate::handler_name(handler)?;
        if limit == 0 {
            return Ok(Vec::new());
        }
        let client = &self.shared.client;
        let job = format!("{ONE_OFF_PREFIX}{handler}");
        let keys = JobKeys::new(client, &job)?;
        let last = i64::try_from(limit).unwrap_or(i64::MAX).saturating_sub(1);
        let mut cmd = redis::cmd("ZRANGE");
        cmd.arg(&keys.retries).arg(0).arg(last).arg("WITHSCORES");
        let queue: Vec<(String, f64)> =
            ext::query(client, &cmd, &format!("read the queue of `{job}`")).await?;
        if queue.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for (run, _) in &queue {
            pipe.cmd("HMGET")
                .arg(&keys.ledger)
                .arg(format!("{run}:claim"))
                .arg(format!("{run}:end"))
                .arg(format!("{run}:attempts"))
                .arg(format!("{run}:args"))
                .arg(format!("{run}:key"));
        }
        let fields: Vec<Vec<Option<String>>> =
            ext::query_pipe(client, &pipe, &format!("read the pending runs of `{job}`")).await?;
        let mut pending = Vec::with_capacity(queue.len());
        for ((run, score), fields) in queue.into_iter().zip(fields) {
            #[allow(clippy::cast_possible_truncation)]
            let due_ms = score as i64;
            let [claim, end, attempts, args, key] = <[Option<String>; 5]>::try_from(fields)
                .map_err(|_| Error::protocol("HMGET answered the wrong number of fields"))?;
            // Cancelled or trimmed meanwhile.
            let Some(claim) = claim else { continue };
            let record = RunRecord::parse(due_ms, &claim, end.as_deref(), attempts.as_deref())
                .map_err(|_| {
                    Error::protocol(format!(
                        "the one-off job {handler}/{run} has a record this version of dlock \
                         does not read: {claim:?}"
                    ))
                })?;
            let key = key.map(|k| key_of(handler, &run, &k)).transpose()?;
            let Some(item) = pending_of(handler, &run, due_ms, &record, args, key)? else {
                continue;
            };
            pending.push(item);
        }
        Ok(pending)
    }
}

/// The pending job a queue entry is, or `None` for a running attempt.
fn pending_of(
    handler: &str,
    run: &str,
    due_ms: i64,
    record: &RunRecord,
    args: Option<String>,
    key: Option<String>,
) -> Result<Option<PendingOneOff>, Error> {
    let never_ran = record.outcome == RunOutcome::Scheduled;
    if !never_ran && record.next_retry.is_none() {
        return Ok(None);
    }
    let id: OneOffId = format!("{handler}/{run}").parse()?;
    let due = DateTime::<Utc>::from_timestamp_millis(due_ms)
        .ok_or_else(|| Error::protocol(format!("the one-off job {id} is due at {due_ms} ms")))?;
    Ok(Some(PendingOneOff {
        keyed: is_keyed(run),
        key,
        id,
        due,
        attempt: if never_ran { 1 } else { record.attempt + 1 },
        enqueued_by: never_ran.then(|| record.replica.clone()),
        enqueued_at: never_ran.then_some(record.started_at),
        args,
    }))
}

/// The key in a keyed run's `<run>:key` record (`"1\x1f<key>"`, format version 1, written by
/// once.lua; the key is everything after the first separator).
///
/// # Errors
/// A protocol error naming the run for a record of another version or none.
fn key_of(handler: &str, run: &str, record: &str) -> Result<String, Error> {
    match record.split_once('\x1f') {
        Some(("1", key)) => Ok(key.to_owned()),
        Some((version, _))
            if !version.is_empty() && version.bytes().all(|b| b.is_ascii_digit()) =>
        {
            Err(Error::protocol(format!(
                "the one-off job {handler}/{run} has a key record of format version {version}, \
                 written by a newer dlock; this one reads version 1: upgrade it"
            )))
        }
        _ => Err(Error::protocol(format!(
            "the one-off job {handler}/{run} has a key record dlock did not write: {record:?}"
        ))),
    }
}

/// Whether a run id was derived from an idempotency key: `o` + 40 hex digits (a SHA-1), where
/// the others are `o` + an instance token and a counter (`o3f2a9c1d0b7e6a54.12`).
fn is_keyed(run: &str) -> bool {
    run.strip_prefix('o')
        .is_some_and(|hex| hex.len() == 40 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_run_ids_are_told_from_the_others() {
        assert!(is_keyed("o0123456789abcdef0123456789abcdef01234567"));
        assert!(!is_keyed("o3f2a9c1d0b7e6a54.12"));
        assert!(!is_keyed("0123456789abcdef0123456789abcdef012345678"));
    }

    #[test]
    fn a_key_record_gives_its_key_whole_and_refuses_another_version() {
        assert_eq!(
            key_of("h", "o1", "1\x1finvoice-4711").unwrap(),
            "invoice-4711"
        );
        // A key may hold the separator itself: everything after the first one is the key.
        assert_eq!(key_of("h", "o1", "1\x1fa\x1fb").unwrap(), "a\x1fb");
        assert_eq!(key_of("h", "o1", "1\x1f").unwrap(), "");
        let newer = key_of("h", "o1", "2\x1fk").unwrap_err().to_string();
        assert!(
            newer.contains("format version 2") && newer.contains("h/o1"),
            "{newer}"
        );
        let foreign = key_of("h", "o1", "k").unwrap_err().to_string();
        assert!(foreign.contains("did not write"), "{foreign}");
    }
}
