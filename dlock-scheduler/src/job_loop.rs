//! One job's loop on one replica: what is due, in which order, and what happens when Redis
//! does not answer.
//!
//! * **Due occurrences** come from [`crate::misfire::due_occurrences_with_grace`], timed by the
//!   replica's estimate of the Redis server's clock. An occurrence that is on time, when
//!   nothing is queued, starts at once (after its jitter) — overlapping the previous run is
//!   the overlap policy's business. Anything else — missed occurrences after downtime, and what
//!   comes due while they are worked through — is queued and run **in order, one at a time**:
//!   each waits for the previous run instead of being skipped as an overlap, and at most one
//!   claim of the queue is in flight, however long the downtime was (the queue holds at most
//!   [`crate::misfire::MAX_DUE`]; the rest is computed when it has drained).
//! * **Redis unreachable.** An attempt whose claim (or lock) got no answer reports it. The loop
//!   then stops starting attempts, waits until Redis answers (`PING`, with backoff), withdraws
//!   the claims whose replies were lost ([`crate::claim::withdraw`]: a claim made but never
//!   run), and goes back to just before the earliest occurrence it could not claim: whatever
//!   fell into the outage is then *missed*, and follows the job's misfire policy (by default one
//!   catch-up run). Claims keep that from running anything twice.
//! * **`run_now` requests** are taken (atomically popped and claimed, `take_request.lua`) when a
//!   wake-up arrives ([`crate::wake`]) or the fallback poll comes round.
//! * **Retries** (at-least-once delivery): the loop asks `take_retry.lua` when the first
//!   pending run is due by the server's clock — its own replies say when that is, and so do
//!   every claim and heartbeat reply (`claim.lua`, `heartbeat.lua`), so a replica that lost
//!   the claim of an attempt still looks when that attempt's lease would lapse — on a wake-up
//!   (`finish.lua` announces a scheduled retry) and at the fallback poll. Whichever replica asks
//!   first after a retry is due claims it; an attempt whose lease lapsed is settled as
//!   abandoned by the first replica that looks.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::attempt::{self, Attempt, AttemptEnd, Trigger};
use crate::claim::{self, Retries};
use crate::error::Error;
use crate::jitter::jitter_for;
use crate::ledger;
use crate::misfire::{DEFAULT_GRACE, MAX_DUE, due_occurrences_with_grace};
use crate::replica_state::{JobEntry, Shared, Turn};

/// How many `run_now` requests one poll takes at most (the rest at the next one).
const MAX_REQUESTS_PER_POLL: usize = 100;
/// How many retries (claimed or settled) one look takes at most (the rest at once after).
const MAX_RETRIES_PER_LOOK: usize = 100;
/// Backoff while waiting for Redis to answer again.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// What one job loop needs.
pub(crate) struct LoopCtx {
    pub(crate) shared: Arc<Shared>,
    pub(crate) entry: Arc<JobEntry>,
    pub(crate) stop: CancellationToken,
    pub(crate) runs: TaskTracker,
    pub(crate) cancel_runs: CancellationToken,
    /// A run-time schedule's: occurrences before this are not its own (it was added then), so
    /// the misfire policy never reaches back past it.
    pub(crate) start_after: Option<DateTime<Utc>>,
}

/// Starts `ctx`'s job on `loops`: its loop (marked for the heartbeat's liveness check) and its
/// `run_now` listener, both until `ctx.stop`.
pub(crate) fn spawn(loops: &TaskTracker, ctx: LoopCtx) {
    loops.spawn(crate::wake::listen(
        ctx.shared.clone(),
        ctx.entry.clone(),
        ctx.stop.clone(),
    ));
    let (shared, entry) = (ctx.shared.clone(), ctx.entry.clone());
    // Marks each poll of the loop's task: the heartbeat vouches only for running loops.
    loops.spawn(crate::liveness::ticking(shared, entry, job_loop(ctx)));
}

/// A claim that got no answer: to withdraw once Redis answers.
#[derive(Debug)]
struct Unanswered {
    /// The scheduled occurrence (`None` for a `run_now` request).
    occurrence: Option<DateTime<Utc>>,
    run_id: String,
    token: String,
    /// Withdrawn already (kept until the loop restarts from it).
    withdrawn: bool,
}

struct JobLoop {
    ctx: LoopCtx,
    /// Up to where the schedule has been dealt with (see [`due_occurrences_with_grace`]).
    last_seen: Option<DateTime<Utc>>,
    /// Occurrences to run in order, oldest first.
    queue: VecDeque<DateTime<Utc>>,
    /// The queue's attempt in flight.
    in_order: Option<JoinHandle<()>>,
    /// When the last queued attempt ended: an occurrence due before that is behind too, and
    /// is queued rather than started on time (it would be skipped as an overlap otherwise, or
    /// make the next one skipped).
    in_order_ended: Option<DateTime<Utc>>,
    unanswered: Vec<Unanswered>,
    reports: mpsc::UnboundedSender<Unanswered>,
    reported: mpsc::UnboundedReceiver<Unanswered>,
    next_poll: Instant,
    poll_now: bool,
    /// When to ask for due retries next (at-least-once delivery only).
    next_retry_look: Instant,
}

/// One job's loop on this replica, until `ctx.stop`.
pub(crate) async fn job_loop(ctx: LoopCtx) {
    let Some(last_seen) = latest_in_ledger(&ctx).await else {
        return;
    };
    let last_seen = last_seen.max(ctx.start_after);
    let (reports, reported) = mpsc::unbounded_channel();
    let mut this = JobLoop {
        ctx,
        last_seen,
        queue: VecDeque::new(),
        in_order: None,
        in_order_ended: None,
        unanswered: Vec::new(),
        reports,
        reported,
        next_poll: Instant::now(),
        poll_now: false,
        next_retry_look: Instant::now(),
    };
    this.run().await;
    this.leave_retries().await;
}

/// The latest scheduled occurrence in the ledger, where misfire handling starts; waits for
/// Redis to answer. `None` if stopped meanwhile.
async fn latest_in_ledger(ctx: &LoopCtx) -> Option<Option<DateTime<Utc>>> {
    let mut backoff = FIRST_BACKOFF;
    loop {
        match ledger::latest_scheduled(&ctx.shared.client, &ctx.entry.keys).await {
            Ok(latest) => return Some(latest),
            Err(e) => {
                tracing::warn!(job = %ctx.entry.job.name, error = %e, "dlock-scheduler: cannot read the run ledger; waiting for Redis");
            }
        }
        ctx.stop.run_until_cancelled(sleep(backoff)).await?;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

impl JobLoop {
    async fn run(&mut self) {
        loop {
            while let Ok(unanswered) = self.reported.try_recv() {
                self.unanswered.push(unanswered);
            }
            if !self.unanswered.is_empty() && !self.recover().await {
                return;
            }
            let now = self.ctx.shared.clock.now();
            if self.queue.is_empty() {
                self.schedule(now);
            }
            self.next_in_order();
            let woken = self.poll_now;
            if woken || Instant::now() >= self.next_poll {
                self.take_requests().await;
            }
            if self.ctx.entry.job.delivery.retries() {
                if let Some(due) = self.ctx.entry.take_retry_due() {
                    let at = Instant::now() + self.ctx.shared.clock.until(due);
                    self.next_retry_look = self.next_retry_look.min(at);
                }
                if woken || Instant::now() >= self.next_retry_look {
                    self.take_retries().await;
                }
            }
            let wake = self.next_wake();
            let in_order = async {
                match &mut self.in_order {
                    Some(handle) => {
                        let _ = handle.await;
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                () = self.ctx.stop.cancelled() => return,
                Some(unanswered) = self.reported.recv() => self.unanswered.push(unanswered),
                () = in_order => {
                    self.in_order = None;
                    self.in_order_ended = Some(self.ctx.shared.clock.now());
                }
                () = self.ctx.entry.wake.notified() => self.poll_now = true,
                // A claim or heartbeat reply told of a pending run due earlier.
                () = self.ctx.entry.retry_hint.notified() => {}
                () = sleep(wake) => {}
            }
        }
    }

    /// Works out what is due at `now` and starts or queues it.
    fn schedule(&mut self, now: DateTime<Utc>) {
        let job = &self.ctx.entry.job;
        let Some(schedule) = &job.schedule else {
            return;
        };
        let grace = DEFAULT_GRACE + job.jitter;
        let due = due_occurrences_with_grace(schedule, self.last_seen, now, job.misfire, grace);
        let more = due.len() == MAX_DUE;
        self.last_seen = if more { due.last().copied() } else { Some(now) }.max(self.last_seen);
        let on_time_from = TimeDelta::from_std(grace)
            .ok()
            .and_then(|grace| now.checked_sub_signed(grace))
            .unwrap_or(DateTime::<Utc>::MIN_UTC);
        let caught_up_from = self
            .in_order_ended
            .map_or(on_time_from, |t| t.max(on_time_from));
        for occurrence in due {
            if self.queue.is_empty() && self.in_order.is_none() && occurrence >= caught_up_from {
                self.spawn(occurrence, Trigger::OnTime);
            } else {
                self.queue.push_back(occurrence);
            }
        }
    }

    /// Starts the next queued occurrence unless one is in flight.
    fn next_in_order(&mut self) {
        if self.in_order.is_none()
            && let Some(occurrence) = self.queue.pop_front()
        {
            self.in_order = Some(self.spawn(occurrence, Trigger::InOrder));
        }
    }

    /// Starts an attempt at a scheduled occurrence; see [`JobLoop::start`]. An occurrence on
    /// time that the last claim reply said is another replica's turn is first asked for after
    /// the turn grace: only the replica whose turn it is wakes up at the fire time.
    fn spawn(&self, occurrence: DateTime<Utc>, trigger: Trigger) -> JoinHandle<()> {
        let ctx = &self.ctx;
        let fire_at = later(
            occurrence,
            jitter_for(&ctx.entry.job.name, occurrence, ctx.entry.job.jitter),
        );
        let ask_at = match (&trigger, ctx.entry.take_next_turn()) {
            (Trigger::OnTime, Turn::Others) => later(fire_at, ctx.shared.turn_grace),
            _ => fire_at,
        };
        let attempt = self.attempt(occurrence, fire_at, trigger, ctx.shared.attempt_token());
        self.start(attempt, ask_at, Some(occurrence))
    }

    fn attempt(
        &self,
        occurrence: DateTime<Utc>,
        fire_at: DateTime<Utc>,
        trigger: Trigger,
        token: String,
    ) -> Attempt {
        Attempt {
            shared: self.ctx.shared.clone(),
            entry: self.ctx.entry.clone(),
            occurrence,
            fire_at,
            trigger,
            token,
            stop: self.ctx.stop.clone(),
            cancel: self.ctx.cancel_runs.clone(),
            args: self.ctx.entry.job.args.clone(),
            gate: Default::default(),
            trace: None,
        }
    }

    /// Runs `attempt` as a tracked task (drained at shutdown) from `ask_at` on (by the server's
    /// clock); it reports a claim that got no answer.
    fn start(
        &self,
        attempt: Attempt,
        ask_at: DateTime<Utc>,
        scheduled: Option<DateTime<Utc>>,
    ) -> JoinHandle<()> {
        let reports = self.reports.clone();
        self.ctx.runs.spawn(async move {
            let (wait, stop) = (attempt.shared.clock.until(ask_at), &attempt.stop);
            if !wait.is_zero() && stop.run_until_cancelled(sleep(wait)).await.is_none() {
                return;
            }
            let token = attempt.token.clone();
            if let AttemptEnd::Unreachable { run_id } = attempt::attempt(attempt).await {
                // The loop may have stopped: then nobody withdraws, and the ledger shows the
                // claim (if it was made) abandoned.
                let _ = reports.send(Unanswered {
                    occurrence: scheduled,
                    run_id,
                    token,
                    withdrawn: false,
                });
            }
        })
    }

    /// Takes pending `run_now` requests, each atomically claimed, and starts their runs.
    async fn take_requests(&mut self) {
        self.poll_now = false;
        self.next_poll = Instant::now() + self.ctx.shared.request_poll;
        for _ in 0..MAX_REQUESTS_PER_POLL {
            let shared = &self.ctx.shared;
            let token = shared.attempt_token();
            let run_id = format!("m{token}");
            match claim::take_request(shared, &self.ctx.entry, &run_id, &token).await {
                Ok(Some(requested)) => {
                    let attempt =
                        self.attempt(requested, requested, Trigger::Manual(run_id), token);
                    self.start(attempt, requested, None);
                }
                Ok(None) => return,
                Err(e) => {
                    tracing::debug!(job = %self.ctx.entry.job.name, error = %e, "dlock-scheduler: could not take run_now requests");
                    if e.may_have_taken_effect() {
                        self.unanswered.push(Unanswered {
                            occurrence: None,
                            run_id,
                            token,
                            withdrawn: false,
                        });
                    }
                    return;
                }
            }
        }
    }

    /// Settles abandoned attempts and claims due retries of the job, starting their runs, and
    /// works out when to look again: when the first pending run is due, or at the next poll.
    async fn take_retries(&mut self) {
        let shared = &self.ctx.shared;
        let poll = Instant::now() + shared.request_poll;
        self.next_retry_look = poll;
        for _ in 0..MAX_RETRIES_PER_LOOK {
            let token = shared.attempt_token();
            match claim::take_retry(shared, &self.ctx.entry, &token).await {
                Ok(Retries::Claimed(retry)) => {
                    tracing::info!(job = %self.ctx.entry.job.name, run = %retry.run_id, attempt = retry.attempt, "dlock-scheduler: running the next attempt of a run");
                    let trigger = Trigger::Retry {
                        run_id: retry.run_id,
                        attempt: retry.attempt,
                        manual: retry.manual,
                    };
                    let now = shared.clock.now();
                    let attempt = self.attempt(retry.occurrence, now, trigger, token);
                    self.start(attempt, now, None);
                }
                Ok(Retries::Again) => {}
                Ok(Retries::Idle(next)) => {
                    if let Some(next) = next {
                        self.next_retry_look = poll.min(Instant::now() + shared.clock.until(next));
                    }
                    return;
                }
                Err(e) => {
                    // A lost reply may have claimed an attempt that nobody runs: its lease
                    // lapses and it is settled as abandoned, like a killed replica's. (Also a
                    // run of a newer record format, refused by name: said at warn.)
                    tracing::warn!(job = %self.ctx.entry.job.name, error = %e, "dlock-scheduler: could not look for due retries; looking again at the next poll");
                    return;
                }
            }
        }
        self.next_retry_look = Instant::now();
    }

    /// At shutdown, says which at-least-once runs this replica leaves to the others (their
    /// attempts running elsewhere or due later).
    async fn leave_retries(&self) {
        let entry = &self.ctx.entry;
        if !entry.job.delivery.retries() {
            return;
        }
        let mut count = redis::cmd("ZCARD");
        count.arg(&entry.keys.retries);
        let shared = &self.ctx.shared;
        if let Ok(left) =
            dlock_core::ext::query::<u64>(&shared.client, &count, "count pending runs").await
            && left > 0
        {
            tracing::info!(job = %entry.job.name, runs = left, "dlock-scheduler: shutting down with at-least-once runs not final (running, or waiting for their next attempt); the other replicas take them over");
        }
    }

    /// How long to sleep at most: until the next occurrence, the next poll or the next look
    /// for retries.
    fn next_wake(&self) -> Duration {
        let shared = &self.ctx.shared;
        let mut poll = self.next_poll.saturating_duration_since(Instant::now());
        if self.ctx.entry.job.delivery.retries() {
            poll = poll.min(
                self.next_retry_look
                    .saturating_duration_since(Instant::now()),
            );
        }
        let schedule = self.ctx.entry.job.schedule.as_ref();
        match schedule.and_then(|s| s.next_after(shared.clock.now())) {
            Some(next) => shared.clock.until(next).min(poll),
            None => poll,
        }
    }

    /// Waits until Redis answers and the unanswered claims are withdrawn, then starts over
    /// from just before the earliest occurrence that could not be claimed, so that what fell
    /// into the outage follows the misfire policy. Returns `false` if stopped meanwhile.
    async fn recover(&mut self) -> bool {
        let job = self.ctx.entry.job.name.clone();
        tracing::warn!(%job, "dlock-scheduler: Redis does not answer; waiting to catch up by the misfire policy");
        let mut backoff = FIRST_BACKOFF;
        loop {
            while let Ok(unanswered) = self.reported.try_recv() {
                self.unanswered.push(unanswered);
            }
            match self.withdraw_unanswered().await {
                Ok(()) => break,
                Err(e) => {
                    tracing::debug!(%job, error = %e, "dlock-scheduler: Redis still does not answer")
                }
            }
            let stop = &self.ctx.stop;
            if stop.run_until_cancelled(sleep(backoff)).await.is_none() {
                return false;
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
        let earliest = self
            .unanswered
            .iter()
            .filter_map(|u| u.occurrence)
            .chain(self.queue.front().copied())
            .min();
        if let Some(earliest) = earliest {
            let before = earliest
                .checked_sub_signed(TimeDelta::nanoseconds(1))
                .unwrap_or(earliest);
            self.last_seen = Some(self.last_seen.map_or(before, |seen| seen.min(before)));
        }
        self.unanswered.clear();
        self.queue.clear();
        self.poll_now = true;
        tracing::info!(%job, "dlock-scheduler: Redis answers again");
        true
    }

    /// `PING`, then withdraws every unanswered claim not withdrawn yet.
    async fn withdraw_unanswered(&mut self) -> Result<(), Error> {
        let shared = &self.ctx.shared;
        shared.client.ping().await?;
        for unanswered in self.unanswered.iter_mut().filter(|u| !u.withdrawn) {
            let entry = &self.ctx.entry;
            if claim::withdraw(shared, entry, &unanswered.run_id, &unanswered.token).await? {
                tracing::info!(job = %entry.job.name, run = %unanswered.run_id, "dlock-scheduler: withdrew a claim whose reply was lost");
            }
            unanswered.withdrawn = true;
        }
        Ok(())
    }
}

/// `at` plus `delay`, saturating.
fn later(at: DateTime<Utc>, delay: Duration) -> DateTime<Utc> {
    TimeDelta::from_std(delay)
        .ok()
        .and_then(|delay| at.checked_add_signed(delay))
        .unwrap_or(at)
}
