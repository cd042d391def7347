//! [`Job`]: a name, a schedule, a handler, and the policies that govern its runs.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use dlock_core::OnLost;

use crate::context::JobContext;
use crate::error::Error;
use crate::misfire::MisfirePolicy;
use dlock_cron::Schedule;

/// The future a handler returns, boxed: `Err` carries the text recorded in the ledger.
pub(crate) type HandlerFuture = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;
pub(crate) type Handler = Arc<dyn Fn(JobContext) -> HandlerFuture + Send + Sync>;

/// Default lease of a run's lock: 5 s, renewed by the watchdog every third of it while the
/// handler runs, however long that is. It bounds how long a replica that dies mid-run (SIGKILL,
/// power loss) keeps the job: another replica runs the next occurrence after at most one lease
/// plus one renewal interval. A longer lease only rides out longer Redis hiccups.
pub const DEFAULT_RUN_LEASE: Duration = Duration::from_secs(5);

/// The shortest run lease accepted: 1 s (renewed every ~333 ms).
pub const MIN_RUN_LEASE: Duration = Duration::from_secs(1);

/// What to do with an occurrence while the previous run of the job is still going (on any
/// replica).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Overlap {
    /// Skip it, and record [`crate::RunOutcome::SkippedOverlap`] (default): runs of a job never
    /// overlap, like ShedLock and Kubernetes' `concurrencyPolicy: Forbid`.
    #[default]
    Skip,
    /// Run it anyway: each occurrence takes its own lock, so runs may overlap (each occurrence
    /// still runs at most once).
    Allow,
}

/// What a job promises about each occurrence when a run fails or its replica dies.
///
/// | delivery | a replica dies (SIGKILL, pause past the lease) or the handler fails |
/// |---|---|
/// | [`Delivery::AtMostOnce`] (default) | the occurrence is recorded (abandoned, failed) and never run again |
/// | [`Delivery::AtLeastOnce`] | another attempt runs on any live replica after the backoff, until `attempts` |
///
/// Under [`Delivery::AtLeastOnce`] each attempt has its own fencing token, larger than the
/// previous attempt's ([`crate::JobContext::fencing_token`], [`crate::JobContext::attempt`]):
/// a handler makes its side effects idempotent by the occurrence, and stale by the fence. An
/// attempt is retried when the handler returns `Err` or panics, when its lease is lost (its
/// replica paused, `max_run` passed, Redis cut off) or the scheduler shut down before it
/// finished, and when its replica stops renewing it (killed): the attempt's own lease in the
/// ledger, renewed with the run's lock, runs out. An occurrence skipped because the previous
/// run was still going ([`crate::Overlap::Skip`]) is not retried: the running one does the
/// work. A retry waits for the run's lock (the previous attempt's lease, or under
/// [`crate::Overlap::Skip`] the job's running occurrence) instead of being skipped.
///
/// An attempt that was superseded — its replica stopped renewing it past the lease (paused,
/// cut off from Redis) and another replica took the run over — is cancelled when it runs
/// again, whatever [`Job::on_lost`] says, its lock released (so [`crate::JobContext::lost`]
/// fires), and its outcome is not recorded: the run belongs to the newer attempt. An attempt
/// cancelled by a graceful shutdown counts as one of the attempts. [`crate::Scheduler::pause`]
/// holds pending attempts until the job is resumed.
///
/// Cost: under at least once every running attempt renews its ledger lease every third of the
/// job's lease (one script call), and each replica looks for due retries when the first pending
/// run is due (once per renewal while an attempt runs); at most once costs nothing of this.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Delivery {
    /// Each occurrence runs at most once: a run that fails or whose replica dies is recorded
    /// and not repeated (the lottery must never draw twice).
    #[default]
    AtMostOnce,
    /// Each occurrence is attempted until one attempt succeeds, at most `attempts` times in
    /// all (the first included, 1 to [`MAX_ATTEMPTS`]). Attempt `k + 1` starts `backoff ×
    /// 2^(k−1)` after attempt `k` ended (at most [`MAX_BACKOFF`]), by the Redis server's clock;
    /// an attempt whose replica died ends when its attempt lease (the job's lease) runs out.
    AtLeastOnce {
        /// Attempts in all, the first included (1: no retry, but a dead replica's run is still
        /// recorded with its fence and attempt).
        attempts: u32,
        /// Delay before the second attempt; it doubles for each further one.
        backoff: Duration,
    },
}

/// The most attempts [`Delivery::AtLeastOnce`] accepts.
pub const MAX_ATTEMPTS: u32 = 100;

/// The longest delay between two attempts: the doubling backoff stops there.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60 * 60);

impl Delivery {
    /// [`Delivery::AtLeastOnce`] with `attempts` in all and `backoff` before the second.
    pub fn at_least_once(attempts: u32, backoff: Duration) -> Self {
        Self::AtLeastOnce { attempts, backoff }
    }

    /// How many attempts an occurrence gets: 1 for at most once.
    pub fn attempts(self) -> u32 {
        match self {
            Self::AtMostOnce => 1,
            Self::AtLeastOnce { attempts, .. } => attempts,
        }
    }

    /// Whether failed or abandoned attempts are retried (the ledger then tracks attempts).
    pub fn retries(self) -> bool {
        matches!(self, Self::AtLeastOnce { .. })
    }

    /// The base backoff (zero for at most once).
    pub(crate) fn backoff(self) -> Duration {
        match self {
            Self::AtMostOnce => Duration::ZERO,
            Self::AtLeastOnce { backoff, .. } => backoff,
        }
    }
}

/// A job: every replica registers the same jobs; each occurrence runs on exactly one of them.
///
/// ```
/// use std::time::Duration;
/// use dlock_scheduler::{Job, MisfirePolicy};
///
/// let job = Job::new("nightly-report", "30 2 * * *", "Europe/Berlin", |ctx| async move {
///     println!("report for {} (fence {})", ctx.occurrence(), ctx.fencing_token());
///     Ok::<(), std::io::Error>(())
/// })?
/// .misfire(MisfirePolicy::FireOnce)
/// .jitter(Duration::from_secs(30));
/// # let _ = job;
/// # Ok::<(), dlock_scheduler::Error>(())
/// ```
pub struct Job {
    pub(crate) name: Arc<str>,
    /// `None` only for the hidden job that runs a handler's one-off jobs (`once:<handler>`,
    /// see `once_loop.rs`): they are due when enqueued, not on a calendar. Never handed out.
    pub(crate) schedule: Option<Schedule>,
    pub(crate) handler: Handler,
    pub(crate) overlap: Overlap,
    pub(crate) misfire: MisfirePolicy,
    pub(crate) jitter: Duration,
    pub(crate) lease: Duration,
    pub(crate) on_lost: OnLost,
    pub(crate) max_run: Option<Duration>,
    pub(crate) delivery: Delivery,
    /// The JSON arguments handed to the handler ([`crate::JobContext::args`]): those of a
    /// run-time schedule; `None` for a job in code.
    pub(crate) args: Option<Arc<str>>,
    /// The registered handler a run-time schedule runs; `None` for a job in code.
    pub(crate) handler_name: Option<Arc<str>>,
    /// The job group it belongs to (declared on the builder), if any.
    pub(crate) group: Option<Arc<str>>,
}

/// Boxes a handler closure: its future's `Err` becomes the text recorded in the ledger.
pub(crate) fn boxed<F, Fut, E>(handler: F) -> Handler
where
    F: Fn(JobContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: fmt::Display,
{
    Arc::new(move |ctx| {
        let run = handler(ctx);
        Box::pin(async move { run.await.map_err(|e| e.to_string()) })
    })
}

impl Job {
    /// A job named `name` (its Redis key: keep it stable across refactors and deploys) that runs
    /// `handler` on the `cron` schedule (5 fields, or 6 with leading seconds) in the IANA time
    /// zone `tz`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidSchedule`] for a bad cron expression or time zone, with what
    /// is wrong and how to fix it. The name and options are checked by
    /// [`crate::SchedulerBuilder::build`] (an empty name, for one, is refused there).
    pub fn new<F, Fut, E>(
        name: impl Into<String>,
        cron: &str,
        tz: &str,
        handler: F,
    ) -> Result<Self, Error>
    where
        F: Fn(JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: fmt::Display,
    {
        Ok(Self::with_schedule(name, Schedule::new(cron, tz)?, handler))
    }

    /// Like [`Job::new`] with a schedule parsed already.
    pub fn with_schedule<F, Fut, E>(name: impl Into<String>, schedule: Schedule, handler: F) -> Self
    where
        F: Fn(JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: fmt::Display,
    {
        Self::from_handler(name, Some(schedule), boxed(handler))
    }

    /// A job with the defaults that runs a boxed handler (`schedule`: `None` for the hidden job
    /// of a handler's one-off jobs).
    pub(crate) fn from_handler(
        name: impl Into<String>,
        schedule: Option<Schedule>,
        handler: Handler,
    ) -> Self {
        Self {
            name: name.into().into(),
            schedule,
            handler,
            overlap: Overlap::Skip,
            misfire: MisfirePolicy::default(),
            jitter: Duration::ZERO,
            lease: DEFAULT_RUN_LEASE,
            on_lost: OnLost::Cancel,
            max_run: None,
            delivery: Delivery::AtMostOnce,
            args: None,
            handler_name: None,
            group: None,
        }
    }

    /// The overlap policy (default [`Overlap::Skip`]).
    pub fn overlap(mut self, overlap: Overlap) -> Self {
        self.overlap = overlap;
        self
    }

    /// The misfire policy after downtime (default [`MisfirePolicy::FireOnce`]).
    pub fn misfire(mut self, misfire: MisfirePolicy) -> Self {
        self.misfire = misfire;
        self
    }

    /// Delay each occurrence by up to `max`, decided per occurrence so that every replica waits
    /// the same ([`crate::jitter_for`]); spreads jobs scheduled at the same instant. Default none.
    /// It must be shorter than the schedule's shortest interval (checked by `build()`).
    pub fn jitter(mut self, max: Duration) -> Self {
        self.jitter = max;
        self
    }

    /// Lease of the run's lock, renewed by the watchdog every third of it (default
    /// [`DEFAULT_RUN_LEASE`], at least [`MIN_RUN_LEASE`]). A replica that dies mid-run frees
    /// the job after at most this long.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// What happens when a run's lease is lost (default [`OnLost::Cancel`]: the handler is
    /// dropped and the run recorded as cancelled).
    pub fn on_lost(mut self, on_lost: OnLost) -> Self {
        self.on_lost = on_lost;
        self
    }

    /// Stop renewing a run's lease after this long, so that a hung handler eventually loses
    /// the job (and is cancelled, under [`OnLost::Cancel`]). Must be longer than the lease.
    pub fn max_run(mut self, max_run: Duration) -> Self {
        self.max_run = Some(max_run);
        self
    }

    /// What each occurrence promises when a run fails or its replica dies (default
    /// [`Delivery::AtMostOnce`]); see [`Delivery`].
    pub fn delivery(mut self, delivery: Delivery) -> Self {
        self.delivery = delivery;
        self
    }

    /// Makes the job a member of the job group `group`, declared on the scheduler with
    /// [`crate::SchedulerBuilder::group`]: at most that group's `max` runs of its jobs go on at
    /// once across every replica. `group("db-maintenance")` on jobs declared with
    /// `builder.group("db-maintenance", 1)` means these jobs never overlap each other
    /// (ShedLock's "never at the same time"); each job's own runs never overlap anyway
    /// ([`Overlap::Skip`]).
    ///
    /// ```no_run
    /// use dlock_scheduler::{Job, Scheduler};
    ///
    /// let vacuum = Job::new("vacuum", "0 3 * * *", "UTC", |_ctx| async {
    ///     Ok::<(), std::io::Error>(())
    /// })?
    /// .group("db-maintenance");
    /// let reindex = Job::new("reindex", "30 3 * * *", "UTC", |_ctx| async {
    ///     Ok::<(), std::io::Error>(())
    /// })?
    /// .group("db-maintenance");
    /// # let client = dlock_core::Client::open("redis://127.0.0.1:6379/")?;
    /// let scheduler = Scheduler::builder(client)
    ///     .group("db-maintenance", 1) // never both at once, on any replicas
    ///     .job(vacuum)
    ///     .job(reindex)
    ///     .build()?;
    /// # let _ = scheduler;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// A run of a grouped job takes its job's lock first (the overlap guard), then one slot of
    /// the group, **waiting for it at most until the job's next occurrence's fire time** (by
    /// the Redis server's clock, as the scheduler estimates it; the wait ends 100 ms early, so
    /// that the next occurrence finds the job's lock free), in FIFO order with the runs of the
    /// group's other jobs on every replica. If no slot came by then, the run does not
    /// start: it is recorded [`crate::RunOutcome::SkippedGroup`] and is not retried, also under
    /// [`Delivery::AtLeastOnce`] (the next occurrence does the work). While it waits, the
    /// ledger shows it running (it holds the job's lock, so the job's next occurrence is
    /// skipped as an overlap under [`Overlap::Skip`]). An occurrence caught up after downtime
    /// follows the same rule (one whose next occurrence has passed already takes a slot only
    /// if one is free at once). A `run_now` run and a retry of an at-least-once run, which
    /// have no next occurrence of their own, wait until the fire time of the job's first
    /// occurrence after the moment they hold the job's lock. If the schedule has no next
    /// occurrence, the wait is one minute.
    ///
    /// The slot is a permit of a dlock [`dlock_core::Semaphore`] named
    /// `sched-group:<group>` (keys `<prefix>{sched-group:<group>}:sem…`, never a job's), held
    /// with the watchdog under the job's lease, `on_lost` and `max_run`, and given back with
    /// the job's lock when the run ends. Losing it is losing the run's lease: under
    /// [`OnLost::Cancel`] the handler is cancelled and the run recorded cancelled; under
    /// [`OnLost::Signal`] the handler runs on ([`crate::JobContext::lost`] watches the job's
    /// lock only). A run cancelled while it waits for a slot — a shutdown, its job's lease
    /// lost, its attempt superseded — leaves the group's queue at once and is recorded
    /// cancelled as any cancelled run (a superseded attempt records nothing).
    ///
    /// `build()` refuses a group that was not declared on the builder.
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into().into());
        self
    }

    /// The job's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The job's schedule: always `Some` for a job built with [`Job::new`],
    /// [`Job::with_schedule`] or `#[scheduled]` (`None` is kept for the hidden jobs that run
    /// one-off jobs, which are never handed out).
    pub fn schedule(&self) -> Option<&Schedule> {
        self.schedule.as_ref()
    }
}

impl fmt::Debug for Job {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            name,
            schedule,
            handler: _,
            overlap,
            misfire,
            jitter,
            lease,
            on_lost,
            max_run,
            delivery,
            args,
            handler_name,
            group,
        } = self;
        f.debug_struct("Job")
            .field("name", name)
            .field("schedule", schedule)
            .field("overlap", overlap)
            .field("misfire", misfire)
            .field("jitter", jitter)
            .field("lease", lease)
            .field("on_lost", on_lost)
            .field("max_run", max_run)
            .field("delivery", delivery)
            .field("args", args)
            .field("handler_name", handler_name)
            .field("group", group)
            .finish_non_exhaustive()
    }
}
