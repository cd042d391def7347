//! One attempt at one occurrence on this replica: claim it (one replica wins), take the job's
//! lock with the watchdog (the overlap guard), run the handler under the lease, record the
//! outcome, release.
//!
//! **At most once** (the default delivery): the claim is keyed by (job, nominal occurrence)
//! and remembered for the claim retention, so a late, skewed or restarted replica never runs an
//! occurrence another replica claimed. A replica that dies mid-run leaves its occurrence
//! claimed: it is not run again, and the ledger shows it [`RunOutcome::Abandoned`].
//!
//! **At least once** ([`crate::Delivery::AtLeastOnce`]): the claim starts the attempt's own
//! lease in the ledger (`retries`), which this module renews every third of the job's lease
//! while the attempt lives — waiting for the lock, running, recording. An attempt that fails
//! is recorded with its next attempt's time (`finish.lua`); one whose replica died is found by
//! the lapse of that lease (`take_retry.lua`, from the job loop). The next attempt is claimed
//! by whichever replica asks first once it is due ([`Trigger::Retry`]); it waits for the run's
//! lock, so its fencing token is larger than the previous attempt's. An attempt that learns it
//! was superseded (its renewal is refused: it was paused or cut off past its lease) stops at
//! once: its handler is cancelled, its lock released, its outcome not recorded.
//!
//! A claim whose answer never came (Redis unreachable or too slow) may have been made anyway:
//! the attempt reports it to its job loop ([`AttemptEnd::Unreachable`]), which withdraws it by
//! the attempt's token once Redis answers — unless its run started — so that the occurrence
//! follows the misfire policy instead of being lost, and is still never run twice.

use std::convert::Infallible;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use dlock_core::{Lease, LeaseState, MutexGuard, OnLost, Permit};
use futures_util::FutureExt;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::claim::{self, Claim, Occurrence};
use crate::context::JobContext;
use crate::group::{Membership, Slot, Until};
use crate::jitter::jitter_for;
use crate::ledger::{self, Recorded, Recording, RunOutcome};
use crate::replica_state::{JobEntry, Shared};

/// Why an attempt is made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Trigger {
    /// An occurrence attempted on time: if the previous run still holds the job, it is skipped
    /// ([`crate::Overlap::Skip`]).
    OnTime,
    /// An occurrence from a batch worked through in order (missed ones after downtime, and what
    /// came due meanwhile): it waits for the previous run instead of being skipped.
    InOrder,
    /// A `run_now` request, already taken and claimed under this run id.
    Manual(String),
    /// A later attempt of an at-least-once run, already claimed (`take_retry.lua`): it waits
    /// for the run's lock.
    Retry {
        run_id: String,
        attempt: u32,
        manual: bool,
    },
}

/// One attempt at one occurrence on this replica.
pub(crate) struct Attempt {
    pub(crate) shared: Arc<Shared>,
    pub(crate) entry: Arc<JobEntry>,
    /// The nominal occurrence, or the request time of a manual run.
    pub(crate) occurrence: DateTime<Utc>,
    /// When the occurrence may start (nominal + jitter), by the server's clock.
    pub(crate) fire_at: DateTime<Utc>,
    pub(crate) trigger: Trigger,
    /// Names this attempt in its claim, so that only it can record, renew or withdraw it.
    pub(crate) token: String,
    /// Cancelled when the scheduler stops claiming.
    pub(crate) stop: CancellationToken,
    /// Cancelled when the scheduler's drain deadline passes.
    pub(crate) cancel: CancellationToken,
    /// The run's JSON arguments ([`JobContext::args`]): the job's, or a one-off job's own.
    pub(crate) args: Option<Arc<str>>,
    /// The submitter's `traceparent` (a one-off job's), for the run's span.
    pub(crate) trace: Option<Arc<str>>,
    /// Keeps the attempt's lease renewals and its records apart (see [`RecordGate`]).
    pub(crate) gate: RecordGate,
}

/// Serialises an attempt's lease renewals (at-least-once delivery) with its records, and
/// remembers that its end was recorded. Without it a renewal sent while the final record was
/// on its way (or while the lock was being released after it) found the attempt's lease gone
/// — `finish.lua` removes it — and the attempt logged that it was *superseded* although it
/// had completed (issue #51). With it a renewal never overlaps a record, and none is sent
/// after the end was recorded, so a refused renewal means what it says.
#[derive(Debug, Default)]
pub(crate) struct RecordGate(tokio::sync::Mutex<bool>);

/// What one renewal of an attempt's lease learned.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Renewal {
    /// Renewed: the attempt still holds its run.
    Renewed,
    /// The attempt recorded its end: there is nothing left to renew.
    Ended,
    /// Refused: another attempt holds the run, or this one was found abandoned.
    Superseded,
    /// Redis did not answer; renew again at the next turn.
    Failed,
}

impl Attempt {
    fn run_id(&self) -> String {
        match &self.trigger {
            Trigger::Manual(id) | Trigger::Retry { run_id: id, .. } => id.clone(),
            Trigger::OnTime | Trigger::InOrder => self.occurrence.timestamp_millis().to_string(),
        }
    }

    /// Whether the attempt was claimed before it started (a request or a retry).
    fn claimed(&self) -> bool {
        matches!(self.trigger, Trigger::Manual(_) | Trigger::Retry { .. })
    }

    fn manual(&self) -> bool {
        matches!(
            self.trigger,
            Trigger::Manual(_) | Trigger::Retry { manual: true, .. }
        )
    }

    /// The attempt's number at its occurrence, from 1.
    fn number(&self) -> u32 {
        match self.trigger {
            Trigger::Retry { attempt, .. } => attempt,
            _ => 1,
        }
    }

    /// Whether it waits for the run's lock rather than skipping when it is held.
    fn waits_for_the_lock(&self) -> bool {
        matches!(self.trigger, Trigger::InOrder | Trigger::Retry { .. })
    }

    /// How long a run of a grouped job waits for a slot ([`crate::Job::group`]): until
    /// [`SLOT_HANDOVER`] before the fire time of the job's next occurrence after this one
    /// (scheduled runs) or after now (`run_now` runs and retries, which have no next
    /// occurrence of their own), by the server's clock; [`crate::group::WAIT_WITHOUT_NEXT`]
    /// when the schedule has no next occurrence.
    fn slot_wait(&self) -> Duration {
        let (job, clock) = (&self.entry.job, &self.shared.clock);
        let after = match self.trigger {
            Trigger::OnTime | Trigger::InOrder => self.occurrence,
            Trigger::Manual(_) | Trigger::Retry { .. } => clock.now(),
        };
        let Some(next) = job.schedule.as_ref().and_then(|s| s.next_after(after)) else {
            return crate::group::WAIT_WITHOUT_NEXT;
        };
        let jitter = TimeDelta::from_std(jitter_for(&job.name, next, job.jitter));
        let fire_at = next
            .checked_add_signed(jitter.unwrap_or_default())
            .unwrap_or(next);
        clock.until(fire_at).saturating_sub(SLOT_HANDOVER)
    }
}

/// A run of a grouped job stops waiting for a slot this long before its job's next occurrence
/// fires: time to record the skip and release the job's lock, so that the next occurrence
/// finds the lock free instead of being skipped as an overlap too.
const SLOT_HANDOVER: Duration = Duration::from_millis(100);

/// How an attempt ended, for its job loop.
#[derive(Debug)]
pub(crate) enum AttemptEnd {
    /// Claimed and run, or found claimed, paused, or left to others: nothing more to do.
    Done,
    /// Redis did not answer the claim or the lock request; the claim `run_id` (made with the
    /// attempt's token) may exist without a run and must be withdrawn once Redis answers.
    Unreachable { run_id: String },
}

/// How many times an attempt waits for its fire time or its turn before giving up (a replica
/// clock that runs ahead by more than a few seconds is a misconfiguration worth a warning).
const MAX_EARLY_WAITS: usize = 20;

/// Claims and, if won, performs the run. Errors are logged: there is nobody to return them to.
pub(crate) async fn attempt(attempt: Attempt) -> AttemptEnd {
    let job = attempt.entry.job.name.clone();
    let run_id = attempt.run_id();
    let mut waits = 0;
    while !attempt.claimed() {
        let occurrence = Occurrence {
            run_id: &run_id,
            nominal: attempt.occurrence,
            fire_at: attempt.fire_at,
            token: &attempt.token,
        };
        match claim::claim(&attempt.shared, &attempt.entry, &occurrence).await {
            Ok(Claim::Won) => break,
            Ok(Claim::Lost) => return AttemptEnd::Done,
            Ok(Claim::Wait(wait)) if waits < MAX_EARLY_WAITS => {
                waits += 1;
                let slept = attempt.stop.run_until_cancelled(tokio::time::sleep(wait));
                if slept.await.is_none() {
                    return AttemptEnd::Done;
                }
            }
            Ok(Claim::Wait(wait)) => {
                tracing::warn!(%job, run = %run_id, ahead_ms = wait.as_millis(), "dlock-scheduler: this replica's clock runs ahead of Redis; occurrence left to the others");
                return AttemptEnd::Done;
            }
            Err(e) => {
                tracing::warn!(%job, run = %run_id, error = %e, "dlock-scheduler: claim failed; will withdraw it and apply the misfire policy when Redis answers");
                return AttemptEnd::Unreachable { run_id };
            }
        }
    }
    let superseded = CancellationToken::new();
    let run = run_claimed(&attempt, run_id.clone(), &superseded);
    if !attempt.entry.job.delivery.retries() {
        return run.await;
    }
    tokio::select! {
        biased;
        end = run => end,
        never = renew_lease(&attempt, &run_id, &superseded) => match never {},
    }
}

/// Renews the attempt's lease in the ledger every third of the job's lease, for as long as the
/// attempt lives (the caller drops this future when it ends); cancels `superseded` when a
/// renewal is refused (another attempt holds the run, or this one was found abandoned) and
/// stops renewing. A timer that fires late (the process was paused) renews at once, so a
/// replica that comes back from a pause learns it was superseded in one round trip.
async fn renew_lease(
    attempt: &Attempt,
    run_id: &str,
    superseded: &CancellationToken,
) -> Infallible {
    let entry = &attempt.entry;
    let every = entry.job.lease / 3;
    loop {
        tokio::time::sleep(every).await;
        match renew_once(attempt, run_id).await {
            Renewal::Renewed | Renewal::Failed => {}
            Renewal::Ended => return std::future::pending().await,
            Renewal::Superseded => {
                tracing::warn!(job = %entry.job.name, run = %run_id, attempt = attempt.number(), "dlock-scheduler: this attempt was superseded (its lease in the ledger ran out: the replica was paused or cut off); stopping it");
                superseded.cancel();
                return std::future::pending().await;
            }
        }
    }
}

/// Renews the attempt's lease once, unless its end was recorded; never while a record of it
/// is on its way ([`RecordGate`]).
pub(crate) async fn renew_once(attempt: &Attempt, run_id: &str) -> Renewal {
    let (shared, entry) = (&attempt.shared, &attempt.entry);
    let ended = attempt.gate.0.lock().await;
    if *ended {
        return Renewal::Ended;
    }
    match claim::renew_attempt(shared, entry, run_id, &attempt.token).await {
        Ok(true) => Renewal::Renewed,
        Ok(false) => Renewal::Superseded,
        Err(e) => {
            tracing::debug!(job = %entry.job.name, run = %run_id, error = %e, "dlock-scheduler: could not renew the attempt's lease; trying again");
            Renewal::Failed
        }
    }
}

/// The claimed run: take the lock (skip, wait, or give the claim back), then perform it.
async fn run_claimed(
    attempt: &Attempt,
    run_id: String,
    superseded: &CancellationToken,
) -> AttemptEnd {
    let job = &attempt.entry.job.name;
    let lock = match attempt.entry.lock_for(&attempt.shared.client, &run_id) {
        Ok(lock) => lock,
        Err(e) => {
            let outcome = RunOutcome::Failed(format!("could not take the job's lock: {e}"));
            record(attempt, &run_id, &outcome, None).await;
            return AttemptEnd::Done;
        }
    };
    let guard = if attempt.waits_for_the_lock() {
        // Wait for the previous run (on any replica), or the previous attempt's lease, to end.
        // Dropping the acquire is cancel safe: dlock-core releases a grant that arrives for a
        // dropped waiter.
        tokio::select! {
            biased;
            () = superseded.cancelled() => return AttemptEnd::Done,
            () = attempt.stop.cancelled() => {
                let why = "the scheduler shut down while the previous run still went on";
                let outcome = RunOutcome::Cancelled(why.to_owned());
                record(attempt, &run_id, &outcome, None).await;
                return AttemptEnd::Done;
            }
            guard = lock.acquire() => guard.map(Some),
        }
    } else {
        lock.try_acquire().await
    };
    match guard {
        Ok(Some(guard)) => {
            let outcome = perform(attempt, &run_id, guard, superseded).await;
            if let Some(RunOutcome::Failed(text)) = &outcome {
                tracing::warn!(%job, run = %run_id, attempt = attempt.number(), error = %text, "dlock-scheduler: run failed");
            }
            AttemptEnd::Done
        }
        Ok(None) => {
            tracing::info!(%job, run = %run_id, "dlock-scheduler: previous run still going; skipped");
            record(attempt, &run_id, &RunOutcome::SkippedOverlap, None).await;
            AttemptEnd::Done
        }
        Err(e) if e.may_have_taken_effect() => {
            // Redis went away between the claim and the lock: nothing ran, so the claim is
            // given back (and the occurrence follows the misfire policy).
            tracing::warn!(%job, run = %run_id, error = %e, "dlock-scheduler: could not take the job's lock; will withdraw the claim when Redis answers");
            AttemptEnd::Unreachable { run_id }
        }
        Err(e) => {
            // Claimed but not run: the ledger says why, instead of showing it abandoned.
            let outcome = RunOutcome::Failed(format!("could not take the job's lock: {e}"));
            tracing::warn!(%job, run = %run_id, error = %e, "dlock-scheduler: could not take the job's lock");
            record(attempt, &run_id, &outcome, None).await;
            AttemptEnd::Done
        }
    }
}

/// Runs the handler under `guard`, records the outcome, releases. `None` when the attempt
/// turned out to be superseded before its handler started (nothing ran).
async fn perform(
    attempt: &Attempt,
    run_id: &str,
    guard: MutexGuard,
    superseded: &CancellationToken,
) -> Option<RunOutcome> {
    let entry = &attempt.entry;
    // The job's locks are `fenced`: the token came with the lock, no round trip.
    let fence = match guard.fencing_token().await {
        Ok(fence) => fence,
        Err(e) => {
            let outcome = RunOutcome::Failed(format!("the run's lease was lost at once: {e}"));
            record(attempt, run_id, &outcome, None).await;
            return Some(outcome);
        }
    };
    // The attempt holds the run's lock now; it runs only if the run is still its own (an
    // attempt paused between its claim and its lock may have been superseded meanwhile).
    if record(attempt, run_id, &RunOutcome::Running, Some(fence.get())).await
        == Some(Recorded::Superseded)
    {
        tracing::warn!(job = %entry.job.name, run = %run_id, "dlock-scheduler: this attempt was superseded before it started; not running it");
        release(entry, guard).await;
        return None;
    }
    let lease = guard.lease();
    let slot = match &entry.group {
        None => None,
        Some(group) => match group_slot(attempt, run_id, group, &lease, superseded).await {
            Ok(permit) => Some(permit),
            Err(ended) => {
                if let Some(outcome) = &ended {
                    record(attempt, run_id, outcome, Some(fence.get())).await;
                }
                release(entry, guard).await;
                return ended;
            }
        },
    };
    let ctx = JobContext {
        job: entry.job.name.clone(),
        occurrence: attempt.occurrence,
        manual: attempt.manual(),
        replica: attempt.shared.replica.clone(),
        lease: lease.clone(),
        fence,
        attempt: attempt.number(),
        client: attempt.shared.client.clone(),
        args: attempt.args.clone(),
        slot: slot.as_ref().map(Permit::lease),
    };
    // The run's span: the handler's own spans and events nest in it; `traceparent` links it to
    // the submitter's trace (recorded as a field: `tracing` has no trace ids of its own).
    let span = tracing::info_span!(
        "dlock.run",
        job = %entry.job.name,
        run = %run_id,
        attempt = attempt.number(),
        traceparent = tracing::field::Empty,
    );
    if let Some(trace) = &attempt.trace {
        span.record("traceparent", tracing::field::display(&**trace));
        #[cfg(feature = "opentelemetry")]
        crate::trace::link(&span, trace);
    }
    let outcome = run_handler(attempt, ctx, &lease, slot.as_ref(), superseded)
        .instrument(span)
        .await;
    // Whether the lease was in danger as the handler ended: said in the record, for whoever
    // checks the run's effects.
    let suspect = lease.state() == LeaseState::Suspect;
    if record_end(attempt, run_id, &outcome, Some(fence.get()), suspect).await
        == Some(Recorded::Superseded)
    {
        tracing::info!(job = %entry.job.name, run = %run_id, attempt = attempt.number(), %outcome, "dlock-scheduler: this attempt was superseded; its outcome is not recorded");
    }
    if let Some(permit) = slot {
        release_slot(entry, permit).await;
    }
    release(entry, guard).await;
    Some(outcome)
}

/// Runs the handler until it ends, its run's lease — the job's lock or its group's slot — is
/// lost (under [`OnLost::Cancel`]), the attempt is superseded, or the drain deadline passes.
async fn run_handler(
    attempt: &Attempt,
    ctx: JobContext,
    lease: &Lease,
    slot: Option<&Permit>,
    superseded: &CancellationToken,
) -> RunOutcome {
    let entry = &attempt.entry;
    // The handler is a closure that returns a future: either may panic.
    let future = match std::panic::catch_unwind(AssertUnwindSafe(|| (entry.job.handler)(ctx))) {
        Err(panic) => return panicked(panic.as_ref()),
        Ok(future) => future,
    };
    let handler = AssertUnwindSafe(future).catch_unwind();
    let watch_lease = entry.job.on_lost == OnLost::Cancel;
    let slot_lost = async {
        match slot {
            Some(permit) => permit.lost().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        biased;
        result = handler => match result {
            Ok(Ok(())) => RunOutcome::Succeeded,
            Ok(Err(text)) => RunOutcome::Failed(text),
            Err(panic) => panicked(panic.as_ref()),
        },
        lost = lease.lost(), if watch_lease => RunOutcome::Cancelled(lost.to_string()),
        lost = slot_lost, if watch_lease => {
            let group = entry.group.as_ref().map_or("", |g| &*g.name);
            RunOutcome::Cancelled(format!("the slot of group `{group}`: {lost}"))
        }
        () = superseded.cancelled() => {
            RunOutcome::Cancelled("another attempt superseded this one".to_owned())
        }
        () = attempt.cancel.cancelled() => {
            RunOutcome::Cancelled("the scheduler shut down before the run finished".to_owned())
        }
    }
}

/// Takes one slot of the job's group for the run, which holds the job's lock (`job_lease`),
/// waiting at most [`Attempt::slot_wait`]. `Err` with the outcome to record when the run does
/// not start (`None`: the attempt was superseded, nothing to record).
///
/// Cancel safety: dropping it leaves the group's queue (see [`Membership::take`]).
async fn group_slot(
    attempt: &Attempt,
    run_id: &str,
    group: &Membership,
    job_lease: &Lease,
    superseded: &CancellationToken,
) -> Result<Permit, Option<RunOutcome>> {
    let (job, name) = (&attempt.entry.job.name, &group.name);
    let wait = attempt.slot_wait();
    tracing::debug!(%job, run = %run_id, group = %name, wait_ms = wait.as_millis(), "dlock-scheduler: taking a slot of the job's group");
    let until = Until {
        superseded,
        stop: &attempt.stop,
        job_lease,
    };
    let why = match group.take(wait, until).await {
        Slot::Taken(permit) => return Ok(permit),
        Slot::Superseded => return Err(None),
        Slot::Missed => {
            tracing::info!(%job, run = %run_id, group = %name, "dlock-scheduler: no slot of the job's group came before its next occurrence; skipped");
            return Err(Some(RunOutcome::SkippedGroup));
        }
        Slot::Failed(e) => {
            tracing::warn!(%job, run = %run_id, group = %name, error = %e, "dlock-scheduler: could not take a slot of the job's group");
            return Err(Some(RunOutcome::Failed(format!(
                "could not take a slot of group `{name}`: {e}"
            ))));
        }
        Slot::Stopped => {
            format!("the scheduler shut down while the run waited for a slot of group `{name}`")
        }
        Slot::JobLeaseLost(lost) => {
            format!("{lost} while the run waited for a slot of group `{name}`")
        }
    };
    Err(Some(RunOutcome::Cancelled(why)))
}

async fn release_slot(entry: &JobEntry, permit: Permit) {
    if let Err(e) = permit.release().await {
        tracing::warn!(job = %entry.job.name, error = %e, "dlock-scheduler: giving the group's slot back failed; its lease will expire");
    }
}

async fn release(entry: &JobEntry, guard: MutexGuard) {
    if let Err(e) = guard.release().await {
        tracing::warn!(job = %entry.job.name, error = %e, "dlock-scheduler: release failed; the lease will expire");
    }
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

/// Records `outcome` of the attempt in the ledger (best effort: a failure is logged, and
/// answers `None`).
async fn record(
    attempt: &Attempt,
    run_id: &str,
    outcome: &RunOutcome,
    fence: Option<u64>,
) -> Option<Recorded> {
    record_end(attempt, run_id, outcome, fence, false).await
}

/// [`record`], saying whether the attempt's lease was suspect as the handler ended.
async fn record_end(
    attempt: &Attempt,
    run_id: &str,
    outcome: &RunOutcome,
    fence: Option<u64>,
    suspect: bool,
) -> Option<Recorded> {
    let shared = &attempt.shared;
    let entry = &attempt.entry;
    if *outcome == RunOutcome::Running {
        if attempt.number() == 1 {
            let late = (Utc::now() - attempt.fire_at).to_std().unwrap_or_default();
            crate::metrics::started(&entry.job.name, late);
        }
    } else {
        crate::metrics::ended(&entry.job.name, outcome.code());
    }
    let how = Recording {
        run_id,
        token: &attempt.token,
        fence,
        delivery: entry.job.delivery,
        wake: (
            &entry.keys.wake,
            &entry.job.name,
            dlock_core::ext::publish_command(&shared.client),
        ),
        suspect,
    };
    // No renewal goes out while this record does; once an end is recorded none goes out at
    // all (the guard is held to the function's end).
    let mut ended = attempt.gate.0.lock().await;
    if *outcome != RunOutcome::Running {
        *ended = true;
    }
    // finish.lua is retry-safe (the same record twice is one), so a request that timed out or
    // lost its connection is sent once more: a record lost to one slow reply would leave the
    // run looking abandoned once its lock is released.
    let mut sent = 0;
    loop {
        sent += 1;
        match ledger::record(&shared.client, &entry.keys, &how, outcome).await {
            Ok(Recorded::Retry(due)) => {
                crate::metrics::retried(&entry.job.name, outcome.code());
                tracing::info!(job = %entry.job.name, run = %run_id, attempt = attempt.number(), %outcome, next_attempt_ms = due, "dlock-scheduler: attempt ended; the next attempt is scheduled");
                return Some(Recorded::Retry(due));
            }
            Ok(recorded) => return Some(recorded),
            Err(e) if sent < RECORD_SENDS && (e.is_timeout() || e.is_connection()) => {
                tracing::debug!(job = %entry.job.name, run = %run_id, error = %e, "dlock-scheduler: recording the run failed; sending it once more");
            }
            Err(e) => {
                tracing::warn!(job = %entry.job.name, run = %run_id, error = %e, "dlock-scheduler: could not record the run");
                return None;
            }
        }
    }
}

/// How many times a run's record is sent at most when Redis does not answer in time.
const RECORD_SENDS: u32 = 2;

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue #51: a one-off job that completed logged "this attempt was superseded" when a
    /// lease renewal reached Redis after its final record (which removes the lease) — while
    /// the record's reply or the lock's release was on its way. Here that renewal comes right
    /// after the record, deterministically: it must learn that the attempt ended, not that it
    /// was superseded.
    #[tokio::test]
    async fn a_renewal_after_the_final_record_is_not_a_supersession() {
        use crate::claim::tests::retry_for;
        use crate::handler::HandlerOptions;
        use crate::job::Delivery;

        let server = dlock_testkit::RedisServer::start().unwrap();
        let options = HandlerOptions::new()
            .lease(Duration::from_secs(1))
            .delivery(Delivery::at_least_once(3, Duration::ZERO));
        let scheduler = crate::Scheduler::builder(dlock_core::Client::open(server.url()).unwrap())
            .handler_with("send_report", options, |_| async { Ok::<(), String>(()) })
            .build()
            .unwrap();
        let shared = scheduler.shared.clone();
        let entry = shared.once["send_report"].clone();
        scheduler
            .run_at("send_report", Utc::now(), &1)
            .await
            .unwrap();
        let retry = retry_for(&shared, &entry, "A").await;
        let attempt = Attempt {
            shared: shared.clone(),
            entry: entry.clone(),
            occurrence: retry.occurrence,
            fire_at: retry.occurrence,
            trigger: Trigger::Retry {
                run_id: retry.run_id.clone(),
                attempt: retry.attempt,
                manual: retry.manual,
            },
            token: "A".to_owned(),
            stop: CancellationToken::new(),
            cancel: CancellationToken::new(),
            args: retry.args,
            gate: RecordGate::default(),
            trace: None,
        };
        let run_id = retry.run_id.as_str();
        assert_eq!(
            record(&attempt, run_id, &RunOutcome::Running, Some(1)).await,
            Some(Recorded::Done)
        );
        assert_eq!(renew_once(&attempt, run_id).await, Renewal::Renewed);
        assert_eq!(
            record(&attempt, run_id, &RunOutcome::Succeeded, Some(1)).await,
            Some(Recorded::Done)
        );
        assert_eq!(renew_once(&attempt, run_id).await, Renewal::Ended);
    }

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
