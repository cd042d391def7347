//! Operating jobs across replicas, through Redis: pause / resume (honoured by every replica's
//! claim), `run_now` (one replica picks the request up), and the run ledger.
//!
//! These work for any job known under the client's prefix — registered by a running replica or
//! this one, or with ledger entries or a pause record — so an admin tool can build a
//! [`Scheduler`] without jobs and call them; another name is refused as a likely typo
//! ([`crate::ErrorKind::UnknownJob`], with close names), unless a `force_` variant is used. A
//! name no job could have (empty, braces, control characters, too long) is an
//! [`crate::ErrorKind::InvalidJob`] error, as in `build()`.

use dlock_core::ext;

use crate::error::Error;
use crate::ledger::{self, JobKeys, RunRecord};
use crate::registry::{self, RegisteredReplica};
use crate::scheduler::Scheduler;
use crate::scripts;
use crate::validate;

impl Scheduler {
    /// Pauses `job` on every replica: occurrences are not claimed, and pending attempts of
    /// at-least-once runs ([`crate::Delivery`]) not started, until [`Scheduler::resume`] (runs
    /// already going finish). Stored in Redis.
    ///
    /// The job must be known ([`Scheduler::is_known`]): a name no replica registered, without
    /// ledger entries or a pause record, is refused as a likely typo
    /// ([`crate::ErrorKind::UnknownJob`]); [`Scheduler::force_pause`] pauses any valid name.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidJob`] for a name no job can have, naming the rule;
    /// [`crate::ErrorKind::UnknownJob`] for a job that is not known, naming it and up to five
    /// registered jobs with close names; a Redis error ([`crate::ErrorKind::Redis`]).
    ///
    /// # Cancel safety
    /// Cancel safe: pausing twice is pausing once.
    pub async fn pause(&self, job: &str) -> Result<(), Error> {
        self.ensure_known(job).await?;
        self.force_pause(job).await
    }

    /// Pauses `job` whether or not it is known (a job about to be deployed).
    ///
    /// # Errors
    /// As [`Scheduler::pause`], without [`crate::ErrorKind::UnknownJob`].
    ///
    /// # Cancel safety
    /// Cancel safe: pausing twice is pausing once.
    pub async fn force_pause(&self, job: &str) -> Result<(), Error> {
        validate::job_name(job)?;
        let keys = JobKeys::new(&self.shared.client, job)?;
        let mut cmd = redis::cmd("SET");
        cmd.arg(&keys.paused).arg(1);
        ext::query::<()>(&self.shared.client, &cmd, &format!("pause `{job}`")).await?;
        Ok(())
    }

    /// Resumes a paused `job` on every replica. `run_now` requests made while it was paused
    /// are taken at once: the replicas are woken in the same step (`resume.lua`).
    ///
    /// # Errors
    /// As [`Scheduler::pause`] (an unknown job is refused; [`Scheduler::force_resume`] is not).
    ///
    /// # Cancel safety
    /// Cancel safe: resuming twice is resuming once.
    pub async fn resume(&self, job: &str) -> Result<(), Error> {
        self.ensure_known(job).await?;
        self.force_resume(job).await
    }

    /// Resumes `job` whether or not it is known.
    ///
    /// # Errors
    /// As [`Scheduler::resume`], without [`crate::ErrorKind::UnknownJob`].
    ///
    /// # Cancel safety
    /// Cancel safe: resuming twice is resuming once.
    pub async fn force_resume(&self, job: &str) -> Result<(), Error> {
        validate::job_name(job)?;
        let client = &self.shared.client;
        let keys = JobKeys::new(client, job)?;
        let mut invocation = scripts::RESUME.prepare_invoke();
        invocation
            .key(&keys.paused)
            .key(&keys.requests)
            .key(&keys.retries)
            .arg(&keys.wake)
            .arg(job)
            .arg(ext::publish_command(client));
        ext::invoke::<i64>(client, &invocation, &format!("resume `{job}`")).await?;
        Ok(())
    }

    /// Whether `job` is paused.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidJob`] for a name no job can have; a Redis error.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn is_paused(&self, job: &str) -> Result<bool, Error> {
        validate::job_name(job)?;
        let keys = JobKeys::new(&self.shared.client, job)?;
        let mut cmd = redis::cmd("EXISTS");
        cmd.arg(&keys.paused);
        Ok(ext::query(&self.shared.client, &cmd, &format!("is `{job}` paused")).await?)
    }

    /// Whether `job` is known under the client's key prefix: this scheduler has it, a running
    /// replica registered it ([`Scheduler::registered_replicas`]; `once:<handler>` when a
    /// replica registered the handler, whether or not a one-off of it ran), or it has ledger
    /// entries or a pause record in Redis. The control calls refuse a job that is not.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidJob`] for a name no job can have; a Redis error.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn is_known(&self, job: &str) -> Result<bool, Error> {
        validate::job_name(job)?;
        Ok(self.known(job).await?.is_ok())
    }

    /// `Ok(())` for a known job; else its [`crate::ErrorKind::UnknownJob`] error.
    async fn ensure_known(&self, job: &str) -> Result<(), Error> {
        validate::job_name(job)?;
        self.known(job).await?
    }

    /// Whether `job` (a valid name) is known: `Ok(Ok(()))`, or `Ok(Err(why))`.
    async fn known(&self, job: &str) -> Result<Result<(), Error>, Error> {
        let handler = job.strip_prefix(crate::validate::ONE_OFF_PREFIX);
        let one_offs = handler.is_some_and(|handler| self.shared.once.contains_key(handler));
        if self.shared.jobs.contains(job) || one_offs {
            return Ok(Ok(()));
        }
        // A replica runs the one-off jobs `once:<h>` of every handler `h` it registered, so
        // those names are known as soon as it publishes its handlers — before any one-off ran.
        let registered: Vec<String> = self
            .registered_replicas()
            .await?
            .into_iter()
            .flat_map(|r| {
                let once = r
                    .handlers
                    .into_iter()
                    .map(|h| format!("{}{h}", crate::validate::ONE_OFF_PREFIX));
                r.jobs.into_iter().map(|j| j.name).chain(once)
            })
            .chain(
                self.shared
                    .jobs
                    .names()
                    .into_iter()
                    .map(|name| name.to_string()),
            )
            .collect();
        if registered.iter().any(|name| name == job) {
            return Ok(Ok(()));
        }
        // A run-time schedule that no running replica has the handler for yet.
        let mut cmd = redis::cmd("HEXISTS");
        cmd.arg(&self.shared.schedule_keys.hash).arg(job);
        let scheduled: bool =
            ext::query(&self.shared.client, &cmd, &format!("is `{job}` scheduled")).await?;
        if scheduled {
            return Ok(Ok(()));
        }
        let keys = JobKeys::new(&self.shared.client, job)?;
        let mut cmd = redis::cmd("EXISTS");
        // One slot: both keys carry the job's hash tag.
        cmd.arg(&keys.ledger).arg(&keys.paused);
        let found: i64 =
            ext::query(&self.shared.client, &cmd, &format!("is `{job}` known")).await?;
        if found > 0 {
            return Ok(Ok(()));
        }
        let close = close_names(job, registered);
        let hint = if close.is_empty() {
            String::new()
        } else {
            format!("; did you mean {}?", close.join(", "))
        };
        Ok(Err(Error::unknown_job(format!(
            "no job `{job}` is known under this key prefix: no running replica registered it, \
             it is no run-time schedule, and it has no ledger entries and no pause \
             record{hint}"
        ))))
    }

    /// Asks for one run of `job` now, outside its schedule. The request is queued in Redis and
    /// announced to the replicas over pub/sub; one replica running the job takes it and claims
    /// its run in one atomic step — at once, or, if the announcement was lost (a replica
    /// reconnecting), at its next request poll ([`crate::DEFAULT_REQUEST_POLL`]).
    /// The ledger records the run as manual. Overlap applies as to scheduled runs; while the
    /// job is paused, requests wait in the queue (for a day at most) and run as soon as it is
    /// resumed. An unknown job is refused as [`Scheduler::pause`] says
    /// ([`Scheduler::force_run_now`] is not).
    ///
    /// A handler's one-off jobs (`once:<handler>`) are refused: a run of that job is one
    /// one-off job, with its own arguments and due time, so enqueue one with
    /// [`Scheduler::run_at`] (the time now) instead. (Earlier versions queued a request that
    /// no replica took: `Ok`, and nothing ran.)
    ///
    /// # Errors
    /// As [`Scheduler::pause`]; [`crate::ErrorKind::InvalidJob`] for `once:<handler>`, naming
    /// the call to use.
    ///
    /// # Cancel safety
    /// If the future is dropped, the request may or may not have been queued; a retry after
    /// an error that [may have taken effect](Error::may_have_taken_effect) may queue a second run.
    pub async fn run_now(&self, job: &str) -> Result<(), Error> {
        validate::job_name(job)?;
        refuse_one_offs(job)?;
        self.ensure_known(job).await?;
        self.force_run_now(job).await
    }

    /// Asks for one run of `job` now whether or not it is known (it runs once a replica that
    /// has the job takes the request, within a day).
    ///
    /// # Errors
    /// As [`Scheduler::run_now`], without [`crate::ErrorKind::UnknownJob`].
    ///
    /// # Cancel safety
    /// As [`Scheduler::run_now`].
    pub async fn force_run_now(&self, job: &str) -> Result<(), Error> {
        validate::job_name(job)?;
        refuse_one_offs(job)?;
        let client = &self.shared.client;
        let keys = JobKeys::new(client, job)?;
        let requested = self.shared.clock.now().timestamp_millis();
        let mut invocation = scripts::REQUEST.prepare_invoke();
        invocation
            .key(&keys.requests)
            .arg(requested)
            .arg(scripts::secs(scripts::REQUEST_TTL))
            .arg(&keys.wake)
            .arg(job)
            .arg(ext::publish_command(client));
        ext::invoke::<i64>(client, &invocation, &format!("run_now `{job}`")).await?;
        Ok(())
    }

    /// The ledger of `job`: its last runs (up to the history size), oldest first — which replica
    /// ran which occurrence, when (server time), and how it ended.
    ///
    /// # Errors
    /// As [`Scheduler::is_paused`]; also [`crate::ErrorKind::Redis`] when the ledger holds data
    /// dlock did not write.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn history(&self, job: &str) -> Result<Vec<RunRecord>, Error> {
        validate::job_name(job)?;
        ledger::history(&self.shared.client, job, self.shared.clock.now()).await
    }
}

/// `run_now` of a handler's one-off jobs (`once:<handler>`) is refused: that job has no
/// schedule to run ahead of, and a run of it is one one-off job, which needs its arguments and
/// a due time (`run_at`) — queueing a request nobody takes would answer `Ok` and run nothing.
fn refuse_one_offs(job: &str) -> Result<(), Error> {
    let Some(handler) = job.strip_prefix(crate::validate::ONE_OFF_PREFIX) else {
        return Ok(());
    };
    Err(Error::invalid_job(format!(
        "`{job}` is the one-off jobs of handler `{handler}`, not a job with a schedule: \
         run_now has no arguments to give a one-off job; enqueue one to run now with \
         Scheduler::run_at(\"{handler}\", now, args) (or run_after with a zero delay)"
    )))
}

/// Up to five of `names` close to `job` (a typo away: by edit distance, or one containing the
/// other), closest first.
pub(crate) fn close_names(job: &str, mut names: Vec<String>) -> Vec<String> {
    names.sort_unstable();
    names.dedup();
    let limit = (job.chars().count() / 3).max(2);
    let mut scored: Vec<(usize, String)> = names
        .into_iter()
        .filter_map(|name| {
            let distance = edit_distance(job, &name);
            // Containment counts from three characters on (`c` is in every name with a c).
            let related = (job.len() >= 3 && name.contains(job))
                || (name.len() >= 3 && job.contains(name.as_str()));
            (distance <= limit || related).then_some((distance, name))
        })
        .collect();
    scored.sort();
    scored.into_iter().take(5).map(|(_, name)| name).collect()
}

/// Levenshtein distance, by characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substituted = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substituted.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

impl Scheduler {
    /// The scheduler instances in the job registry: each with its replica id, host, pid, last
    /// heartbeat, whether it is stalled, and the jobs it runs (name, cron expression, time
    /// zone, whether their loop stalled), by replica id. Every instance renews its entry each
    /// heartbeat and withdraws it when it stops. One that stops heartbeating (blocked, paused,
    /// cut off from Redis, dead) is [`RegisteredReplica::stalled`] once its liveness (three
    /// heartbeats) has run out, and vanishes when its entry expires (ten heartbeats, at least
    /// 30 s). An admin tool's scheduler (no jobs) is not listed.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use dlock_scheduler::Scheduler;
    ///
    /// let admin = Scheduler::builder(dlock_core::Client::open("redis://127.0.0.1:6379/")?).build()?;
    /// for replica in admin.registered_replicas().await? {
    ///     let state = if replica.stalled { "stalled" } else { "live" };
    ///     for job in &replica.jobs {
    ///         println!("{} ({state}) runs {} ({} in {})", replica.id, job.name, job.cron, job.time_zone);
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

    /// The live replicas: those of [`Scheduler::registered_replicas`] that are not stalled,
    /// each with its handlers ([`RegisteredReplica::handlers`]: it runs their one-off jobs
    /// and the run-time schedules of them) and its jobs, by replica id.
    ///
    /// ```no_run
    /// # async fn demo(admin: dlock_scheduler::Scheduler) -> Result<(), dlock_scheduler::Error> {
    /// for replica in admin.replicas().await? {
    ///     println!("{} runs {} jobs, handlers {:?}", replica.id, replica.jobs.len(), replica.handlers);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Scheduler::registered_replicas`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn replicas(&self) -> Result<Vec<RegisteredReplica>, Error> {
        let mut replicas = self.registered_replicas().await?;
        replicas.retain(|r| !r.stalled);
        Ok(replicas)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_names_are_a_typo_away() {
        let names = [
            "tick",
            "report",
            "nightly-report",
            "cleanup",
            "a",
            "b",
            "c",
            "d",
            "e",
            "f",
        ]
        .map(str::to_owned)
        .to_vec();
        assert_eq!(close_names("tikc", names.clone()), ["tick"]);
        assert_eq!(close_names("reprot", names.clone()), ["report"]);
        assert_eq!(
            close_names("report", names.clone()),
            ["report", "nightly-report"]
        );
        assert!(close_names("zzzzzzzz", names.clone()).is_empty());
        // At most five (six one-letter names are one edit from `z`).
        assert_eq!(close_names("z", names), ["a", "b", "c", "d", "e"]);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
