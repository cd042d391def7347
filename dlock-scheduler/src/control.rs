//! Operating jobs across replicas, through Redis: pause / resume (honoured by every replica's
//! claim), `run_now` (one replica picks the request up), and the run ledger.
//!
//! These work for any valid job name, registered on this replica or not, so an admin tool can
//! build a [`Scheduler`] without jobs and call them. A name no job could have (empty, braces,
//! control characters, too long) is an [`crate::ErrorKind::InvalidJob`] error, as in `build()`.

use std::time::Duration;

use dlock_core::__private;

use crate::error::Error;
use crate::ledger::{self, JobKeys, RunRecord};
use crate::registry::{self, RegisteredReplica};
use crate::scheduler::Scheduler;
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
        let keys = JobKeys::new(&self.shared.client, job)?;
        let mut cmd = redis::cmd("SET");
        cmd.arg(&keys.paused).arg(1);
        __private::query::<()>(&self.shared.client, &cmd, &format!("pause `{job}`")).await?;
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
        let keys = JobKeys::new(&self.shared.client, job)?;
        let mut cmd = redis::cmd("DEL");
        cmd.arg(&keys.paused);
        __private::query::<i64>(&self.shared.client, &cmd, &format!("resume `{job}`")).await?;
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
        let keys = JobKeys::new(&self.shared.client, job)?;
        let mut cmd = redis::cmd("EXISTS");
        cmd.arg(&keys.paused);
        Ok(__private::query(&self.shared.client, &cmd, &format!("is `{job}` paused")).await?)
    }

    /// Asks for one run of `job` now, outside its schedule. The request is queued in Redis and
    /// announced to the replicas over pub/sub; one replica running the job takes it and claims
    /// its run in one atomic step — at once, or, if the announcement was lost (a replica
    /// reconnecting), at its next request poll ([`crate::DEFAULT_REQUEST_POLL`]).
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
        let client = &self.shared.client;
        let keys = JobKeys::new(client, job)?;
        let requested = self.shared.clock.now().timestamp_millis();
        let mut invocation = scripts::REQUEST.prepare_invoke();
        invocation
            .key(&keys.requests)
            .arg(requested)
            .arg(secs(REQUEST_TTL))
            .arg(&keys.wake)
            .arg(job)
            .arg(__private::publish_command(client));
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
        ledger::history(&self.shared.client, job).await
    }
}

impl Scheduler {
    /// The scheduler instances running now, from the job registry: each with its replica id,
    /// host, pid, last heartbeat and the jobs it runs (name, cron expression, time zone), by
    /// replica id. Every instance renews its entry each heartbeat and withdraws it when it stops;
    /// one that died vanishes within three heartbeats. An admin tool's scheduler (no jobs) is not
    /// listed.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use dlock_scheduler::Scheduler;
    ///
    /// let admin = Scheduler::builder(dlock_core::Client::open("redis://127.0.0.1:6379/")?).build()?;
    /// for replica in admin.registered_replicas().await? {
    ///     for job in &replica.jobs {
    ///         println!("{} runs {} ({} in {})", replica.id, job.name, job.cron, job.time_zone);
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// A Redis error ([`crate::ErrorKind::Redis`]), also when an entry holds data this version
    /// did not write.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn registered_replicas(&self) -> Result<Vec<RegisteredReplica>, Error> {
        registry::read(&self.shared.client).await
    }
}

fn secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}
