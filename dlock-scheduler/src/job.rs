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
    pub(crate) schedule: Schedule,
    pub(crate) handler: Handler,
    pub(crate) overlap: Overlap,
    pub(crate) misfire: MisfirePolicy,
    pub(crate) jitter: Duration,
    pub(crate) lease: Duration,
    pub(crate) on_lost: OnLost,
    pub(crate) max_run: Option<Duration>,
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
        let handler: Handler = Arc::new(move |ctx| {
            let run = handler(ctx);
            Box::pin(async move { run.await.map_err(|e| e.to_string()) })
        });
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

    /// The job's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The job's schedule.
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
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
            .finish_non_exhaustive()
    }
}
