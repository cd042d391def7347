//! One-off jobs on one replica ([`crate::Scheduler::run_at`]): per registered handler, the
//! hidden job that runs them, and its loop.
//!
//! * **A one-off job is a pending run** of the hidden job `once:<handler>` (its own keys,
//!   `{sched:once:<handler>}:…`): `once.lua` writes its records (attempt 0, outcome
//!   `scheduled`) and puts it in the job's `retries` by due time. From there it is the
//!   at-least-once machinery of scheduled jobs: `take_retry.lua` claims its first attempt
//!   when it is due by the server's clock, the attempt renews its lease in the ledger while
//!   it runs, and a replica that dies mid-run is found by the lapse of that lease.
//! * **Delivery** follows the handler's [`crate::HandlerOptions::delivery`]: at most once is
//!   run as at least once with a single attempt (a killed replica's one-off is recorded
//!   abandoned after its lease, never run again); at least once is retried per its backoff.
//!   Each run takes a lock of its own (as [`crate::Overlap::Allow`]): one-off jobs of a handler
//!   run side by side, each with its lease and fencing token.
//! * **The loop** asks `take_retry.lua` when the first pending run is due (its replies say
//!   when), when woken on the hidden job's wake channel (`once.lua` announces a one-off due
//!   before every pending one, `finish.lua` a retry; [`crate::wake`] listens), and at the
//!   fallback poll ([`crate::DEFAULT_REQUEST_POLL`]). It claims only while the replica has a
//!   free one-off slot ([`crate::SchedulerBuilder::one_off_concurrency`]), so a burst is
//!   spread over the live replicas.
//! * **Retention**: once runs have ended, the loop trims the hidden job's ledger to the
//!   scheduler's `history` runs (`once_trim.lua`, oldest due time first, never a pending or
//!   running one).
//!
//! These hidden jobs are not in [`Shared::jobs`](crate::replica_state::Shared): they have no
//! schedule, no turns, no heartbeat, and are not in the job registry.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use dlock_core::{Client, ext};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, sleep_until};

use crate::attempt::{self, Attempt, AttemptEnd, Trigger};
use crate::claim::{self, Retries, Retry};
use crate::error::Error;
use crate::handler::RegisteredHandler;
use crate::job::{Delivery, Job, Overlap};
use crate::job_loop::LoopCtx;
use crate::replica_state::JobEntry;
use crate::scripts;
use crate::validate::{MAX_JOB_NAME_LEN, ONE_OFF_PREFIX};

/// How many runs one trim looks at, at most.
const MAX_TRIM: usize = 1000;

/// The hidden job of each handler's one-off jobs, by handler name.
///
/// # Errors
/// [`crate::ErrorKind::InvalidJob`] for a handler name too long to take the `once:` prefix, or
/// handler options that the run lock refuses.
pub(crate) fn entries(
    client: &Client,
    handlers: &HashMap<Arc<str>, RegisteredHandler>,
    groups: &HashMap<Arc<str>, u32>,
) -> Result<HashMap<Arc<str>, Arc<JobEntry>>, Error> {
    let longest = MAX_JOB_NAME_LEN - ONE_OFF_PREFIX.len();
    handlers
        .iter()
        .map(|(name, handler)| {
            if name.len() > longest {
                return Err(Error::invalid_job(format!(
                    "the handler name {:?}… is {} bytes long; the limit is {longest} bytes (its \
                     one-off jobs run as the job `{ONE_OFF_PREFIX}<handler>`, at most \
                     {MAX_JOB_NAME_LEN} bytes)",
                    name.chars().take(40).collect::<String>(),
                    name.len()
                )));
            }
            let mut entry = JobEntry::new(client, job(handler))?;
            entry.join_group(client, groups)?;
            Ok((name.clone(), Arc::new(entry)))
        })
        .collect()
}

/// The hidden job of `handler`'s one-off jobs: no schedule, a lock per run, and at most once
/// as a single attempt whose lease is kept in the ledger (so that a killed replica's one-off
/// is recorded abandoned, not left running forever).
fn job(handler: &RegisteredHandler) -> Job {
    let options = &handler.options;
    let delivery = match options.delivery {
        Delivery::AtMostOnce => Delivery::at_least_once(1, Duration::ZERO),
        at_least_once => at_least_once,
    };
    let name = format!("{ONE_OFF_PREFIX}{}", handler.name);
    let mut job = Job::from_handler(name, None, handler.handler.clone())
        .overlap(Overlap::Allow)
        .lease(options.lease)
        .on_lost(options.on_lost)
        .delivery(delivery);
    if let Some(max_run) = options.max_run {
        job = job.max_run(max_run);
    }
    job.handler_name = Some(handler.name.clone());
    job.group = options.group.clone();
    job
}

/// The loop of one handler's one-off jobs on this replica, until `ctx.stop`.
pub(crate) async fn once_loop(ctx: LoopCtx) {
    let mut next_look = Instant::now();
    // Whether runs ended (or may have) since the ledger was last trimmed.
    let mut untrimmed = true;
    loop {
        if Instant::now() < next_look {
            tokio::select! {
                biased;
                () = ctx.stop.cancelled() => return,
                () = ctx.entry.wake.notified() => {}
                () = sleep_until(next_look) => {}
            }
        }
        next_look = Instant::now() + ctx.shared.request_poll;
        match take_due(&ctx).await {
            None => return,
            Some(Look::Idle { next, claimed }) => {
                if let Some(next) = next {
                    next_look = next_look.min(next);
                }
                if untrimmed || claimed {
                    untrimmed = trim(&ctx).await || claimed;
                }
            }
            Some(Look::Failed) => {}
        }
    }
}

/// How a look ended.
enum Look {
    /// Nothing (more) is due; the first pending run is due at `next`, if any. `claimed`: this
    /// look started runs.
    Idle {
        next: Option<Instant>,
        claimed: bool,
    },
    /// Redis failed: look again at the poll.
    Failed,
}

/// Claims due one-off runs, each when this replica has a free slot, and starts them, until
/// none is due. `None` when stopped meanwhile.
async fn take_due(ctx: &LoopCtx) -> Option<Look> {
    let (shared, entry) = (&ctx.shared, &ctx.entry);
    let mut claimed = false;
    loop {
        // Without a free slot, the due runs are left to the other replicas meanwhile.
        let slot = tokio::select! {
            biased;
            () = ctx.stop.cancelled() => return None,
            slot = shared.once_slots.clone().acquire_owned() => slot.ok()?,
        };
        let token = shared.attempt_token();
        match claim::take_retry(shared, entry, &token).await {
            Ok(Retries::Claimed(retry)) => {
                claimed = true;
                start(ctx, retry, token, slot);
            }
            Ok(Retries::Again) => {}
            Ok(Retries::Idle(next)) => {
                let next = next.map(|next| Instant::now() + shared.clock.until(next));
                return Some(Look::Idle { next, claimed });
            }
            Err(e) => {
                // A lost reply may have claimed a run nobody starts: its lease in the ledger
                // lapses, and it is settled like a killed replica's.
                tracing::warn!(job = %entry.job.name, error = %e, "dlock-scheduler: could not look for due one-off jobs; looking again at the next poll");
                return Some(Look::Failed);
            }
        }
    }
}

/// Runs a claimed one-off (a tracked task, drained at shutdown) in `slot`.
fn start(ctx: &LoopCtx, retry: Retry, token: String, slot: OwnedSemaphorePermit) {
    let entry = &ctx.entry;
    tracing::debug!(job = %entry.job.name, run = %retry.run_id, attempt = retry.attempt, "dlock-scheduler: running a one-off job");
    let attempt = Attempt {
        shared: ctx.shared.clone(),
        entry: entry.clone(),
        occurrence: retry.occurrence,
        // Its due time: the start metric measures the delay from it.
        fire_at: retry.occurrence,
        trigger: Trigger::Retry {
            run_id: retry.run_id,
            attempt: retry.attempt,
            manual: retry.manual,
        },
        token,
        stop: ctx.stop.clone(),
        cancel: ctx.cancel_runs.clone(),
        args: retry.args,
        gate: Default::default(),
        trace: retry.trace,
    };
    ctx.runs.spawn(async move {
        let _slot = slot;
        let job = attempt.entry.job.name.clone();
        if let AttemptEnd::Unreachable { run_id } = attempt::attempt(attempt).await {
            // Nothing ran. The claim is not withdrawn (that would drop the one-off): its lease
            // in the ledger lapses, and it is settled as abandoned — retried at least once.
            tracing::warn!(%job, run = %run_id, "dlock-scheduler: could not take a one-off job's lock; it is settled when its lease in the ledger lapses");
        }
    });
}

/// Trims the hidden job's ledger; whether there may be more to trim (some was, or it failed).
async fn trim(ctx: &LoopCtx) -> bool {
    let keys = &ctx.entry.keys;
    let mut invocation = scripts::ONCE_TRIM.prepare_invoke();
    invocation
        .key(&keys.runs)
        .key(&keys.ledger)
        .key(&keys.retries)
        .arg(ctx.shared.history)
        .arg(MAX_TRIM);
    match ext::invoke::<i64>(&ctx.shared.client, &invocation, "trim the one-off ledger").await {
        Ok(removed) => removed > 0,
        Err(e) => {
            tracing::debug!(job = %ctx.entry.job.name, error = %e, "dlock-scheduler: could not trim the ledger of one-off jobs");
            true
        }
    }
}
