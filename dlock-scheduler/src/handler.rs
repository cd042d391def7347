//! Handlers registered by name ([`crate::SchedulerBuilder::handler`]): the code that run-time
//! schedules and one-off jobs name. Schedules and one-off jobs are data in Redis (a handler
//! name, a schedule or a due time, JSON arguments); the code they run is registered on every
//! replica that should run them, with the options its runs take ([`HandlerOptions`]).

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use dlock_core::OnLost;

use crate::context::JobContext;
use crate::job::{DEFAULT_RUN_LEASE, Delivery, Handler, Job, Overlap};
use crate::misfire::MisfirePolicy;
use dlock_cron::Schedule;

/// The options of the runs a registered handler performs: what [`Job`]'s builder methods set
/// for a job in code, for the run-time schedules and one-off jobs that name the handler.
///
/// ```
/// use std::time::Duration;
/// use dlock_scheduler::{Delivery, HandlerOptions};
///
/// let options = HandlerOptions::new()
///     .lease(Duration::from_secs(10))
///     .delivery(Delivery::at_least_once(3, Duration::from_secs(1)));
/// # let _ = options;
/// ```
#[derive(Clone, Debug)]
pub struct HandlerOptions {
    pub(crate) overlap: Overlap,
    pub(crate) misfire: MisfirePolicy,
    pub(crate) jitter: Duration,
    pub(crate) lease: Duration,
    pub(crate) on_lost: OnLost,
    pub(crate) max_run: Option<Duration>,
    pub(crate) delivery: Delivery,
    pub(crate) group: Option<Arc<str>>,
}

impl Default for HandlerOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl HandlerOptions {
    /// The defaults of a [`Job`]: overlap skipped, one catch-up run after downtime, no jitter,
    /// a [`DEFAULT_RUN_LEASE`] lease, cancelled when it is lost, at most once.
    pub fn new() -> Self {
        Self {
            overlap: Overlap::Skip,
            misfire: MisfirePolicy::default(),
            jitter: Duration::ZERO,
            lease: DEFAULT_RUN_LEASE,
            on_lost: OnLost::Cancel,
            max_run: None,
            delivery: Delivery::AtMostOnce,
            group: None,
        }
    }

    /// See [`Job::overlap`].
    pub fn overlap(mut self, overlap: Overlap) -> Self {
        self.overlap = overlap;
        self
    }

    /// See [`Job::misfire`] (run-time schedules only).
    pub fn misfire(mut self, misfire: MisfirePolicy) -> Self {
        self.misfire = misfire;
        self
    }

    /// See [`Job::jitter`] (run-time schedules only).
    pub fn jitter(mut self, max: Duration) -> Self {
        self.jitter = max;
        self
    }

    /// See [`Job::lease`].
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// See [`Job::on_lost`].
    pub fn on_lost(mut self, on_lost: OnLost) -> Self {
        self.on_lost = on_lost;
        self
    }

    /// See [`Job::max_run`].
    pub fn max_run(mut self, max_run: Duration) -> Self {
        self.max_run = Some(max_run);
        self
    }

    /// See [`Job::delivery`].
    pub fn delivery(mut self, delivery: Delivery) -> Self {
        self.delivery = delivery;
        self
    }

    /// See [`Job::group`]: the runs of every run-time schedule and one-off job that names the
    /// handler join the group (declared with [`crate::SchedulerBuilder::group`]; `build()`
    /// refuses another). A one-off job has no next occurrence: it waits for a slot at most a
    /// minute, then is recorded `skipped_group`.
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into().into());
        self
    }
}

/// A handler registered by name, with its options.
#[derive(Clone)]
pub(crate) struct RegisteredHandler {
    pub(crate) name: Arc<str>,
    pub(crate) handler: Handler,
    pub(crate) options: HandlerOptions,
}

impl RegisteredHandler {
    pub(crate) fn new<F, Fut, E>(name: Arc<str>, options: HandlerOptions, handler: F) -> Self
    where
        F: Fn(JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: fmt::Display,
    {
        Self {
            name,
            handler: crate::job::boxed(handler),
            options,
        }
    }

    /// The job a run-time schedule named `name` on `schedule` with `args` runs: this handler,
    /// with its options.
    pub(crate) fn job(&self, name: &str, schedule: Schedule, args: Option<Arc<str>>) -> Job {
        let o = &self.options;
        let mut job = Job::from_handler(name, Some(schedule), self.handler.clone())
            .overlap(o.overlap)
            .misfire(o.misfire)
            .jitter(o.jitter)
            .lease(o.lease)
            .on_lost(o.on_lost)
            .delivery(o.delivery);
        if let Some(max_run) = o.max_run {
            job = job.max_run(max_run);
        }
        job.args = args;
        job.handler_name = Some(self.name.clone());
        job.group = o.group.clone();
        job
    }
}

impl fmt::Debug for RegisteredHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegisteredHandler")
            .field("name", &self.name)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}
