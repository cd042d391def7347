//! Operating jobs across replicas, through Redis: pause / resume (honoured by every replica's
//! claim), `run_now` (one replica picks the request up), and the run ledger.
//!
//! These work for any valid job name, registered on this replica or not, so an admin tool can
//! build a [`Scheduler`] without jobs and call them. A name no job could have (empty, braces,
//! control characters, too long) is an [`crate::ErrorKind::InvalidJob`] error, as in `build()`.

use std::time::{Duration, SystemTime};

use dlock_core::{Client, __private};

use crate::error::Error;
use crate::ledger::{JobKeys, RunOutcome, RunRecord, wake_channel};
use crate::runner::{Scheduler, keys};
use crate::scripts;
use crate::validate;

/// How long an unanswered `run_now` request is kept: a day.
const REQUEST_TTL: Duration = Duration::from_secs(24 * 60 * 60);

impl Scheduler {
    /// Pauses `job` on every replica: occurrences are not claimed until [`Scheduler::resume`]
    /// (runs already going finish). Stored in Redis.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidJob`] for a name no job can have, naming the rule; a Redis
    /// error ([`crate::ErrorKind::Redis`]).
    ///
    /// # Cancel safety
    /// Cancel safe: pausing twice is pausing once.
    pub async fn pause(&self, job: &str) -> Result<(), Error> {
        validate::job_name(job)?;
        let keys = keys(&self.inner.client, job)?;
        let mut cmd = redis::cmd("SET");
        cmd.arg(&keys.paused).arg(1);
        __private::query::<()>(&self.inner.client, &cmd, &format!("pause `{job}`")).await?;
        Ok(())
    }

    /// Resumes a paused `job` on every replica.
    ///
    /// # Errors
    /// As [`Scheduler::pause`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn resume(&self, job: &str) -> Result<(), Error> {
        validate::job_name(job)?;
        let keys = keys(&self.inner.client, job)?;
        let mut cmd = redis::cmd("DEL");
        cmd.arg(&keys.paused);
        __private::query::<i64>(&self.inner.client, &cmd, &format!("resume `{job}`")).await?;
        Ok(())
    }

    /// Whether `job` is paused.
    ///
    /// # Errors
    /// As [`Scheduler::pause`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn is_paused(&self, job: &str) -> Result<bool, Error> {
        validate::job_name(job)?;
        let keys = keys(&self.inner.client, job)?;
        let mut cmd = redis::cmd("EXISTS");
        cmd.arg(&keys.paused);
        Ok(__private::query(&self.inner.client, &cmd, &format!("is `{job}` paused")).await?)
    }

    /// Asks for one run of `job` now, outside its schedule. The request is queued in Redis and
    /// announced to the replicas; one replica running the job takes it and claims its run in
    /// one atomic step — at once if it subscribed to wake-ups
    /// ([`crate::SchedulerBuilder::wake_url`]), else at its next request poll (5 s by default).
    /// The ledger records the run as manual. Overlap applies as to scheduled runs; while the
    /// job is paused, requests wait in the queue (for a day at most) and run after `resume`.
    ///
    /// # Errors
    /// As [`Scheduler::pause`].
    ///
    /// # Cancel safety
    /// If the future is dropped, the request may or may not have been queued; a retry after
    /// an error that [may have taken effect](Error::may_have_taken_effect) may queue a second run.
    pub async fn run_now(&self, job: &str) -> Result<(), Error> {
        validate::job_name(job)?;
        let client = &self.inner.client;
        let keys = keys(client, job)?;
        let requested = self.inner.clock.now().timestamp_millis();
        let mut invocation = scripts::REQUEST.prepare_invoke();
        invocation
            .key(&keys.requests)
            .arg(requested)
            .arg(secs(REQUEST_TTL))
            .arg(wake_channel(client.key_prefix()))
            .arg(job);
        __private::invoke::<i64>(client, &invocation, &format!("run_now `{job}`")).await?;
        Ok(())
    }

    /// The ledger of `job`: its last runs (up to the history size), oldest first — which replica
    /// ran which occurrence, when (server time), and how it ended.
    ///
    /// # Errors
    /// As [`Scheduler::pause`]; also [`crate::ErrorKind::Redis`] when the ledger holds data
    /// dlock did not write.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn history(&self, job: &str) -> Result<Vec<RunRecord>, Error> {
        validate::job_name(job)?;
        history(&self.inner.client, job).await
    }
}

fn secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

/// Reads the ledger of `job` and works out which unfinished runs are still going.
pub(crate) async fn history(client: &Client, job: &str) -> Result<Vec<RunRecord>, Error> {
    let keys = keys(client, job)?;
    let mut pipe = redis::pipe();
    pipe.cmd("ZRANGE")
        .arg(&keys.runs)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .cmd("HGETALL")
        .arg(&keys.ledger);
    let (runs, ledger): (
        Vec<(String, i64)>,
        std::collections::HashMap<String, String>,
    ) = __private::query_pipe(client, &pipe, &format!("read the ledger of `{job}`")).await?;
    let mut records = Vec::with_capacity(runs.len());
    for (id, occurrence_ms) in runs {
        let Some(claim) = ledger.get(&format!("{id}:claim")) else {
            continue;
        };
        let end = ledger.get(&format!("{id}:end")).map(String::as_str);
        let mut record = RunRecord::parse(occurrence_ms, claim, end).ok_or_else(|| {
            Error::protocol(format!(
                "the ledger of job `{job}` holds a record dlock did not write: {claim:?}"
            ))
        })?;
        if record.outcome == RunOutcome::Running
            && !still_running(client, &keys, &id, &record).await?
        {
            record.outcome = RunOutcome::Abandoned;
        }
        records.push(record);
    }
    Ok(records)
}

/// A run recorded as running is still going if its lock is held under its fencing token (or,
/// before it took the lock, if it was claimed a moment ago).
async fn still_running(
    client: &Client,
    keys: &JobKeys,
    id: &str,
    record: &RunRecord,
) -> Result<bool, Error> {
    let Some(fence) = record.fencing_token else {
        let age = SystemTime::now()
            .duration_since(record.started_at)
            .unwrap_or_default();
        return Ok(age < Duration::from_secs(5));
    };
    for name in [keys.lock_name.clone(), format!("{}@{id}", keys.lock_name)] {
        let holder = client
            .inspect(&name)
            .await
            .map_err(|e| Error::core("inspect the run's lock", e))?;
        if let Some(holder) = holder
            && holder.fencing_token == Some(fence)
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The latest scheduled (not manual) occurrence in the ledger, in ms.
pub(crate) async fn latest_scheduled(
    client: &Client,
    keys: &JobKeys,
) -> Result<Option<chrono::DateTime<chrono::Utc>>, Error> {
    let mut cmd = redis::cmd("ZRANGE");
    cmd.arg(&keys.runs)
        .arg("+inf")
        .arg("-inf")
        .arg("BYSCORE")
        .arg("REV")
        .arg("LIMIT")
        .arg(0)
        .arg(20)
        .arg("WITHSCORES");
    let latest: Vec<(String, i64)> = __private::query(client, &cmd, "read the run ledger").await?;
    Ok(latest
        .into_iter()
        .find(|(id, _)| !id.starts_with('m'))
        .and_then(|(_, ms)| chrono::TimeZone::timestamp_millis_opt(&chrono::Utc, ms).single()))
}
