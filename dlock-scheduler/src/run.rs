//! One run: claim the occurrence (one replica wins), take the job's lock with the watchdog (the
//! overlap guard), run the handler under the lease, record the outcome, release.
//!
//! Guarantee: **at most once per occurrence.** The claim is keyed by (job, nominal occurrence)
//! and remembered for the claim retention, so a late, skewed or restarted replica never runs an
//! occurrence another replica claimed. A replica that dies mid-run leaves its occurrence
//! claimed: it is not run again, and the ledger shows it [`RunOutcome::Abandoned`]. At-least-once
//! would let a lottery draw twice; a job that must not be lost should be idempotent and use
//! [`crate::MisfirePolicy`] or `run_now` to retry.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use dlock_core::{Client, Mutex, MutexGuard, MutexOptions, OnLost};
use futures_util::FutureExt;
use redis::Value;
use tokio_util::sync::CancellationToken;

use crate::context::JobContext;
use crate::error::Error;
use crate::job::{Job, Overlap};
use crate::ledger::{JobKeys, RunOutcome};
use crate::runner::Inner;
use crate::scripts;

/// A registered job with its keys and lock handle.
pub(crate) struct JobEntry {
    pub(crate) job: Job,
    pub(crate) keys: JobKeys,
    /// The job's run lock (overlap guard) for [`Overlap::Skip`].
    lock: Mutex,
    options: MutexOptions,
}

impl JobEntry {
    pub(crate) fn new(client: &Client, job: Job) -> Result<Self, Error> {
        crate::validate::job(&job)?;
        let keys = crate::runner::keys(client, &job.name);
        let mut options = MutexOptions::new()
            .ttl(job.lease)
            .watchdog()
            .reentrant(false)
            .on_lost(job.on_lost)
            // The job is in the lock name already; a label built from the name would pass the
            // label limit (256 bytes) for names the job-name limit accepts.
            .label("dlock-scheduler");
        if let Some(max_run) = job.max_run {
            options = options.max_hold(max_run);
        }
        // dlock-core checks the lease range and the lock name built from the job name.
        let lock = client
            .mutex_with(&keys.lock_name, options.clone())
            .map_err(|e| Error::refused_by_core(&format!("job `{}`", job.name), e))?;
        Ok(Self {
            job,
            keys,
            lock,
            options,
        })
    }

    /// The lock a run of `occurrence` takes: the job's, or (overlap allowed) the occurrence's.
    fn lock_for(&self, client: &Client, run_id: &str) -> Result<Mutex, dlock_core::Error> {
        match self.job.overlap {
            Overlap::Skip => Ok(self.lock.clone()),
            Overlap::Allow => client.mutex_with(
                &format!("{}@{run_id}", self.keys.lock_name),
                self.options.clone(),
            ),
        }
    }
}

/// One attempt at one occurrence on this replica.
pub(crate) struct Attempt {
    pub(crate) inner: Arc<Inner>,
    pub(crate) entry: Arc<JobEntry>,
    pub(crate) occurrence: DateTime<Utc>,
    /// When the occurrence may start (nominal + jitter), by the server's clock.
    pub(crate) fire_at: DateTime<Utc>,
    pub(crate) manual: bool,
    /// Cancelled when the scheduler stops claiming.
    pub(crate) stop: CancellationToken,
    /// Cancelled when the scheduler's drain deadline passes.
    pub(crate) cancel: CancellationToken,
}

/// What `claim.lua` answered.
enum Claim {
    Won,
    Lost,
    TooEarly(std::time::Duration),
}

/// How many times an attempt waits for the server's clock before giving up (a replica clock
/// that runs ahead by more than a few seconds is a misconfiguration worth a warning).
const MAX_EARLY_WAITS: usize = 20;

impl Attempt {
    fn run_id(&self) -> String {
        let ms = self.occurrence.timestamp_millis();
        if self.manual {
            format!("m{ms}")
        } else {
            ms.to_string()
        }
    }
}

/// Claims and, if won, performs the run. Errors are logged: there is nobody to return them to.
pub(crate) async fn attempt(attempt: Attempt) {
    let job = attempt.entry.job.name.clone();
    let run_id = attempt.run_id();
    let mut waits = 0;
    loop {
        match claim(&attempt, &run_id).await {
            Ok(Claim::Won) => break,
            Ok(Claim::Lost) => return,
            Ok(Claim::TooEarly(wait)) if waits < MAX_EARLY_WAITS => {
                waits += 1;
                tokio::select! {
                    () = attempt.stop.cancelled() => return,
                    () = tokio::time::sleep(wait) => {}
                }
            }
            Ok(Claim::TooEarly(wait)) => {
                tracing::warn!(%job, run = %run_id, ahead_ms = wait.as_millis(), "dlock-scheduler: this replica's clock runs ahead of Redis; occurrence left to the others");
                return;
            }
            Err(e) => {
                // At most once: a claim whose answer was lost counts as lost.
                tracing::warn!(%job, run = %run_id, error = %e, "dlock-scheduler: claim failed; occurrence not run here");
                return;
            }
        }
    }
    let client = &attempt.inner.client;
    let guard = match attempt.entry.lock_for(client, &run_id) {
        Ok(lock) => lock.try_acquire().await,
        Err(e) => Err(e),
    };
    let outcome = match guard {
        Ok(Some(guard)) => perform(&attempt, &run_id, guard).await,
        Ok(None) => {
            tracing::info!(%job, run = %run_id, "dlock-scheduler: previous run still going; skipped");
            record(&attempt, &run_id, &RunOutcome::SkippedOverlap, None).await;
            return;
        }
        Err(e) => {
            // Claimed but not run: the ledger says why, instead of showing it abandoned.
            let outcome = RunOutcome::Failed(format!("could not take the job's lock: {e}"));
            record(&attempt, &run_id, &outcome, None).await;
            outcome
        }
    };
    if let RunOutcome::Failed(text) = &outcome {
        tracing::warn!(%job, run = %run_id, error = %text, "dlock-scheduler: run failed");
    }
}

/// Runs the handler under `guard`, records the outcome, releases.
async fn perform(attempt: &Attempt, run_id: &str, guard: MutexGuard) -> RunOutcome {
    let entry = &attempt.entry;
    let fence = guard.fencing_token().get();
    record(attempt, run_id, &RunOutcome::Running, Some(fence)).await;
    let lease = guard.lease();
    let ctx = JobContext {
        job: entry.job.name.clone(),
        occurrence: attempt.occurrence,
        manual: attempt.manual,
        replica: attempt.inner.replica.clone(),
        lease: lease.clone(),
        client: attempt.inner.client.clone(),
    };
    // The handler is a closure that returns a future: either may panic.
    let outcome = match std::panic::catch_unwind(AssertUnwindSafe(|| (entry.job.handler)(ctx))) {
        Err(panic) => panicked(panic.as_ref()),
        Ok(future) => {
            let handler = AssertUnwindSafe(future).catch_unwind();
            let watch_lease = entry.job.on_lost == OnLost::Cancel;
            tokio::select! {
                biased;
                result = handler => match result {
                    Ok(Ok(())) => RunOutcome::Succeeded,
                    Ok(Err(text)) => RunOutcome::Failed(text),
                    Err(panic) => panicked(panic.as_ref()),
                },
                lost = lease.lost(), if watch_lease => RunOutcome::Cancelled(lost.to_string()),
                () = attempt.cancel.cancelled() => {
                    RunOutcome::Cancelled("the scheduler shut down before the run finished".to_owned())
                }
            }
        }
    };
    record(attempt, run_id, &outcome, Some(fence)).await;
    if let Err(e) = guard.release().await {
        tracing::warn!(job = %entry.job.name, error = %e, "dlock-scheduler: release failed; the lease will expire");
    }
    outcome
}

/// The outcome of a handler that panicked with `payload` (`panic!("…")` carries a `&str` or a
/// `String`; anything else has no text).
fn panicked(payload: &(dyn std::any::Any + Send)) -> RunOutcome {
    let text = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_owned());
    RunOutcome::Failed(format!("the handler panicked: {text}"))
}

/// Runs `claim.lua`.
async fn claim(attempt: &Attempt, run_id: &str) -> Result<Claim, Error> {
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
        .arg(u64::try_from(inner.retention.as_millis()).unwrap_or(u64::MAX))
        .arg(inner.history)
        .arg(if attempt.manual { "1" } else { "0" })
        .arg(if attempt.manual {
            0
        } else {
            attempt.fire_at.timestamp_millis()
        });
    let reply: Vec<Value> =
        scripts::eval(&inner.client, &invocation, "claim an occurrence").await?;
    Ok(match reply.as_slice() {
        [Value::Int(1), ..] => Claim::Won,
        [Value::Int(2), Value::Int(wait)] => {
            // A little past the instant, so the retry is not early again by rounding.
            let wait = u64::try_from(*wait).unwrap_or(0) + 2;
            Claim::TooEarly(std::time::Duration::from_millis(wait))
        }
        _ => Claim::Lost,
    })
}

/// Records `outcome` of the run in the ledger (best effort: a failure is logged).
async fn record(attempt: &Attempt, run_id: &str, outcome: &RunOutcome, fence: Option<u64>) {
    let inner = &attempt.inner;
    let (code, text) = outcome.encode();
    let mut invocation = scripts::FINISH.prepare_invoke();
    invocation
        .key(&attempt.entry.keys.ledger)
        .arg(run_id)
        .arg(&inner.replica.id)
        .arg(code)
        .arg(fence.map(|f| f.to_string()).unwrap_or_default())
        .arg(text);
    if let Err(e) = scripts::eval::<i64>(&inner.client, &invocation, "record a run").await {
        tracing::warn!(job = %attempt.entry.job.name, run = %run_id, error = %e, "dlock-scheduler: could not record the run");
    }
}

/// The latest scheduled occurrence in the ledger: where this replica's misfire handling starts.
pub(crate) async fn latest_occurrence(inner: &Inner, entry: &JobEntry) -> Option<DateTime<Utc>> {
    match crate::control::latest_scheduled(&inner.client, &entry.keys).await {
        Ok(latest) => latest,
        Err(e) => {
            tracing::warn!(job = %entry.job.name, error = %e, "dlock-scheduler: could not read the ledger; missed occurrences before now are not caught up");
            None
        }
    }
}

/// Pops the pending `run_now` requests of the job (each is taken by exactly one replica).
pub(crate) async fn take_requests(inner: &Inner, entry: &JobEntry) -> Vec<i64> {
    match crate::control::pop_requests(&inner.client, &entry.keys).await {
        Ok(requests) => requests,
        Err(e) => {
            tracing::debug!(job = %entry.job.name, error = %e, "dlock-scheduler: could not read run requests");
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panic_messages_are_read_from_the_payload() {
        let text = |payload: Box<dyn std::any::Any + Send>| panicked(payload.as_ref());
        assert_eq!(
            text(Box::new("static text")),
            RunOutcome::Failed("the handler panicked: static text".into())
        );
        assert_eq!(
            text(Box::new(format!("formatted {}", 42))),
            RunOutcome::Failed("the handler panicked: formatted 42".into())
        );
        assert_eq!(
            text(Box::new(7_u8)),
            RunOutcome::Failed("the handler panicked: (no message)".into())
        );
    }
}
