//! [`SchedulerBuilder`]: a scheduler's jobs and settings, checked by `build()`, and the defaults
//! of those settings.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use dlock_core::Client;

use crate::clock::{Clock, ServerClock, SystemClock};
use crate::context::{JobContext, Replica};
use crate::error::Error;
use crate::handler::{HandlerOptions, RegisteredHandler};
use crate::job::Job;
use crate::replica_state::{JobEntry, Jobs, LoopHook, Shared};
use crate::schedule_store::ScheduleKeys;
use crate::scheduler::Scheduler;

/// How long a claim is remembered by default: a day. Claims older than this are forgotten, so a
/// replica catching up on an occurrence older than a day could run it again; keep the retention
/// above the longest [`crate::MisfirePolicy::CatchUp`] window.
pub const DEFAULT_CLAIM_RETENTION: Duration = Duration::from_secs(24 * 60 * 60);
/// How many runs the ledger keeps per job by default.
pub const DEFAULT_HISTORY: usize = 100;
/// How often a replica looks for `run_now` requests when no wake-up arrives, by default: every
/// 5 s, one script call per job. A request is announced over pub/sub and picked up as soon as
/// it is made; the poll is the fallback for an announcement that was lost (a replica that was
/// reconnecting).
pub const DEFAULT_REQUEST_POLL: Duration = Duration::from_secs(5);
/// How often a replica tells Redis it is live for its jobs, by default: every second (only for
/// jobs it did not try to claim within that second, and whose loop runs). A replica counts as
/// live for three heartbeats: a replica that died stops getting turns after at most 3 s, and
/// so does one whose loop for a job stalled (for that job). Its registry entry is shown stalled
/// from then on, and lives ten heartbeats (at least 30 s).
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(1);
/// How long the other replicas leave an occurrence to the live replica whose turn it is, by
/// default: 500 ms after its fire time. Replicas correct their clocks by the Redis server's, so
/// the replica whose turn it is asks within milliseconds; the grace only delays an occurrence
/// whose replica died and does not count as dead yet.
pub const DEFAULT_TURN_GRACE: Duration = Duration::from_millis(500);
/// How many one-off jobs ([`Scheduler::run_at`]) one replica runs at a time by default, over
/// all its handlers: 64. A replica claims a due one-off only while it has a free slot, so a
/// burst (10,000 due in the same second) is spread over the live replicas instead of being
/// started at once by the first that looks.
pub const DEFAULT_ONE_OFF_CONCURRENCY: usize = 64;

/// Builds a [`Scheduler`]; start with [`Scheduler::builder`].
pub struct SchedulerBuilder {
    client: Client,
    replica_id: Option<String>,
    clock: Arc<dyn Clock>,
    jobs: Vec<Job>,
    handlers: Vec<RegisteredHandler>,
    /// Job groups as declared, checked by `build()`.
    groups: Vec<(String, u32)>,
    retention: Duration,
    history: usize,
    request_poll: Duration,
    heartbeat: Duration,
    turn_grace: Duration,
    shutdown_client: bool,
    loop_hook: Option<LoopHook>,
    one_off_concurrency: usize,
    trace_hook: Option<crate::trace::TraceHook>,
}

impl SchedulerBuilder {
    /// The replica's id in the ledger (default `<host>:<pid>`).
    pub fn replica_id(mut self, id: impl Into<String>) -> Self {
        self.replica_id = Some(id.into());
        self
    }

    /// The clock occurrences are timed by (default [`SystemClock`]); the scheduler corrects it
    /// by the Redis server's time seen in its replies.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Adds a job. Every replica should add the same jobs.
    pub fn job(mut self, job: Job) -> Self {
        self.jobs.push(job);
        self
    }

    /// Registers `handler` under `name`, for the run-time schedules
    /// ([`Scheduler::add_schedule`]) and one-off jobs that name it, with the options of a
    /// [`Job`] by default ([`HandlerOptions::new`]). Register it on every replica that should
    /// run them: a replica without it says so in the job registry and never claims them.
    ///
    /// ```
    /// use dlock_scheduler::Scheduler;
    ///
    /// # fn demo(client: dlock_core::Client) -> Result<(), dlock_scheduler::Error> {
    /// #[derive(serde::Deserialize)]
    /// struct Report { tenant: String }
    ///
    /// let scheduler = Scheduler::builder(client)
    ///     .handler("send_report", |ctx| async move {
    ///         let report: Report = ctx.args()?;
    ///         println!("report for {}", report.tenant);
    ///         Ok::<(), dlock_scheduler::Error>(())
    ///     })
    ///     .build()?;
    /// # let _ = scheduler; Ok(()) }
    /// ```
    pub fn handler<F, Fut, E>(self, name: impl Into<String>, handler: F) -> Self
    where
        F: Fn(JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: fmt::Display,
    {
        self.handler_with(name, HandlerOptions::new(), handler)
    }

    /// Like [`SchedulerBuilder::handler`], with the options its runs take.
    pub fn handler_with<F, Fut, E>(
        mut self,
        name: impl Into<String>,
        options: HandlerOptions,
        handler: F,
    ) -> Self
    where
        F: Fn(JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: fmt::Display,
    {
        let name: Arc<str> = name.into().into();
        self.handlers
            .push(RegisteredHandler::new(name, options, handler));
        self
    }

    /// Declares the job group `name`: at most `max` runs of its jobs ([`Job::group`]) go on
    /// at once, across every replica. `max = 1`: the group's jobs never overlap each other.
    /// A run that finds the group full waits for a slot at most until its job's next
    /// occurrence's fire time, then is recorded [`crate::RunOutcome::SkippedGroup`]; see
    /// [`Job::group`] for the whole rule.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use dlock_scheduler::{Job, Scheduler};
    ///
    /// let client = dlock_core::Client::open("redis://127.0.0.1:6379/")?;
    /// let job = |name: &str, cron: &str| {
    ///     Job::new(name, cron, "UTC", |_ctx| async { Ok::<(), std::io::Error>(()) })
    /// };
    /// let scheduler = Scheduler::builder(client)
    ///     .group("db-maintenance", 1)
    ///     .job(job("vacuum", "*/10 * * * *")?.group("db-maintenance"))
    ///     .job(job("reindex", "*/15 * * * *")?.group("db-maintenance"))
    ///     .build()?;
    /// # let _ = scheduler; Ok(()) }
    /// ```
    ///
    /// `max` is read from the builder of each replica: **declare every group with the same
    /// `max` on every replica.** The group is a dlock [`dlock_core::Semaphore`] named
    /// `sched-group:<name>`, whose limit is stored in Redis by the first run that takes or
    /// waits for a slot and kept while any run holds or waits for one. Meanwhile a replica
    /// that declared another `max` cannot take a slot: its runs of the group's jobs are
    /// recorded failed, with an error naming both limits (so the group never runs more than
    /// the stored limit at once). Once the group is idle, the next run's replica stores its
    /// own `max`. A deploy that changes `max` therefore fails some grouped runs until every
    /// replica runs the new value; to avoid it, give the group a new name.
    ///
    /// [`SchedulerBuilder::build`] refuses a bad name (the rules of job names), a `max` of 0,
    /// a group declared twice and a job that joins a group not declared here.
    pub fn group(mut self, name: impl Into<String>, max: u32) -> Self {
        self.groups.push((name.into(), max));
        self
    }

    /// How long claims are remembered (default [`DEFAULT_CLAIM_RETENTION`]).
    pub fn claim_retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
        self
    }

    /// How many runs the ledger keeps per job (default [`DEFAULT_HISTORY`]).
    pub fn history(mut self, runs: usize) -> Self {
        self.history = runs;
        self
    }

    /// How often to look for `run_now` requests without a wake-up (default
    /// [`DEFAULT_REQUEST_POLL`]).
    pub fn request_poll(mut self, every: Duration) -> Self {
        self.request_poll = every;
        self
    }

    /// How often to tell Redis this replica is live for its jobs (default
    /// [`DEFAULT_HEARTBEAT`]).
    pub fn heartbeat(mut self, every: Duration) -> Self {
        self.heartbeat = every;
        self
    }

    /// How long the other replicas leave an occurrence to the replica whose turn it is
    /// (default [`DEFAULT_TURN_GRACE`]). Zero turns sharing off: whoever asks first after the
    /// fire time wins (usually the replica whose timer fires first, every time).
    pub fn turn_grace(mut self, grace: Duration) -> Self {
        self.turn_grace = grace;
        self
    }

    /// Whether [`Scheduler::run_until`] ends by shutting the client down (default `true`):
    /// releasing whatever it still holds, so that the other replicas need not wait out a lease.
    /// Turn it off when the rest of the application shares the client and goes on after the
    /// scheduler has stopped; then shut the client down yourself at the end. See
    /// [`Scheduler::run_until`] for why it is the default.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use dlock_scheduler::Scheduler;
    ///
    /// let client = dlock_core::Client::open("redis://127.0.0.1:6379/")?;
    /// // The web handlers lock with `client` too, and drain after the scheduler.
    /// let scheduler = Scheduler::builder(client.clone())
    ///     .shutdown_client(false)
    ///     .build()?;
    /// scheduler.run_until(async { /* SIGTERM */ }, Duration::from_secs(10)).await;
    /// // … the web server drains …
    /// client.shutdown(Duration::from_secs(5)).await;
    /// # Ok(()) }
    /// ```
    pub fn shutdown_client(mut self, shutdown: bool) -> Self {
        self.shutdown_client = shutdown;
        self
    }

    /// How many one-off jobs ([`Scheduler::run_at`]) this replica runs at a time, over all its
    /// handlers (default [`DEFAULT_ONE_OFF_CONCURRENCY`], at least 1). Due one-off jobs beyond
    /// that wait for a free slot here, or are taken by the other replicas.
    pub fn one_off_concurrency(mut self, runs: usize) -> Self {
        self.one_off_concurrency = runs;
        self
    }

    /// Carries trace context from whoever enqueues a one-off or delayed job to its run:
    /// `hook` gives the caller's current W3C `traceparent` (`00-<trace id>-<parent id>-<flags>`),
    /// if it has one, each time this scheduler enqueues ([`Scheduler::run_at`] and the like).
    /// It is stored with the job (the `<id>:trace` record of its ledger, format version 1),
    /// replaced with the arguments by [`crate::KeyedOneOff::replace`], and the run's span
    /// (`dlock.run`, around the handler, on whichever replica runs it) records it as its
    /// `traceparent` field, so a subscriber that knows W3C trace context can link the run to
    /// the request that asked for it. A value that is not a version-00 `traceparent` is
    /// dropped with a warning (the job is enqueued without it). `tracing` alone has no trace
    /// ids: read them from your tracing stack here (e.g. OpenTelemetry's propagator).
    ///
    /// ```no_run
    /// # fn demo(client: dlock_core::Client) -> Result<(), dlock_scheduler::Error> {
    /// let scheduler = dlock_scheduler::Scheduler::builder(client)
    ///     .handler("send_report", |_| async { Ok::<(), String>(()) })
    ///     .trace_context(|| std::env::var("TRACEPARENT").ok())
    ///     .build()?;
    /// # let _ = scheduler; Ok(()) }
    /// ```
    pub fn trace_context(
        mut self,
        hook: impl Fn() -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.trace_hook = Some(std::sync::Arc::new(hook));
        self
    }

    /// [`SchedulerBuilder::trace_context`] from OpenTelemetry (feature `opentelemetry`): the
    /// hook reads the current `tracing` span's OpenTelemetry context (the application's
    /// `tracing_opentelemetry` layer gives it), and each run's span `dlock.run` gets a link to
    /// the submitter's span besides its `traceparent` field — a link, not a parent: a run may
    /// start long after the request that asked for it ended (OpenTelemetry's advice for work
    /// started by a message). Without an OpenTelemetry layer there is no context: nothing is
    /// stored.
    ///
    /// ```no_run
    /// # fn demo(client: dlock_core::Client) -> Result<(), dlock_scheduler::Error> {
    /// let scheduler = dlock_scheduler::Scheduler::builder(client)
    ///     .handler("send_report", |_| async { Ok::<(), String>(()) })
    ///     .trace_context_from_opentelemetry()
    ///     .build()?;
    /// # let _ = scheduler; Ok(()) }
    /// ```
    #[cfg(feature = "opentelemetry")]
    #[cfg_attr(docsrs, doc(cfg(feature = "opentelemetry")))]
    pub fn trace_context_from_opentelemetry(self) -> Self {
        self.trace_context(crate::trace::current_traceparent)
    }

    /// Installs the test hook of `__private::on_loop_poll`.
    pub(crate) fn loop_hook(mut self, hook: LoopHook) -> Self {
        self.loop_hook = Some(hook);
        self
    }

    /// Checks the jobs and options and creates the scheduler (nothing runs yet).
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidJob`] for a bad job name (empty, braces, control characters,
    /// longer than 500 bytes, or starting with `once:`, reserved for one-off jobs), a name
    /// used twice, a handler name longer than 495 bytes, a lease shorter than [`crate::MIN_RUN_LEASE`]
    /// or beyond dlock's TTL range, a jitter not shorter than the schedule's shortest interval,
    /// a `max_run` not longer than the lease, a replica id with control characters, a zero
    /// history, one-off concurrency, retention, poll or heartbeat interval, a job group with a
    /// bad name (the rules of job names), a `max` of 0 or declared twice, or a job or handler
    /// that joins a group not declared with [`SchedulerBuilder::group`].
    pub fn build(self) -> Result<Scheduler, Error> {
        crate::metrics::describe();
        let replica = Arc::new(replica(self.replica_id)?);
        if self.history == 0
            || self.one_off_concurrency == 0
            || self.request_poll.is_zero()
            || self.retention.is_zero()
            || self.heartbeat.is_zero()
        {
            return Err(Error::invalid_job(
                "history, one-off concurrency, claim retention, request poll and heartbeat \
                 intervals must be greater than zero",
            ));
        }
        let mut handlers = HashMap::new();
        for handler in self.handlers {
            crate::validate::handler(&handler)?;
            let name = handler.name.clone();
            if handlers.insert(name.clone(), handler).is_some() {
                return Err(Error::invalid_job(format!(
                    "handler `{name}` was registered twice; handler names must be unique"
                )));
            }
        }
        let groups = crate::group::declared(&self.groups)?;
        for handler in handlers.values() {
            if let Some(group) = &handler.options.group
                && !groups.contains_key(group)
            {
                return Err(Error::invalid_job(format!(
                    "handler `{}` joins the group `{group}`, which is not declared; declare it \
                     with SchedulerBuilder::group(\"{group}\", max)",
                    handler.name
                )));
            }
        }
        let once = crate::once_loop::entries(&self.client, &handlers, &groups)?;
        let mut entries = Vec::with_capacity(self.jobs.len());
        for job in self.jobs {
            let mut entry = JobEntry::new(&self.client, job)?;
            entry.join_group(&self.client, &groups)?;
            entries.push(entry);
        }
        crate::replica_state::spread_groups(&mut entries);
        let mut jobs = HashMap::new();
        for entry in entries {
            let name = entry.job.name.clone();
            if jobs.insert(name.clone(), Arc::new(entry)).is_some() {
                return Err(Error::invalid_job(format!(
                    "job `{name}` was added twice; job names must be unique"
                )));
            }
        }
        let schedule_keys = ScheduleKeys::new(&self.client)?;
        Ok(Scheduler {
            shared: Arc::new(Shared {
                client: self.client,
                replica,
                instance: instance_token(),
                attempts: AtomicU64::new(0),
                clock: ServerClock::new(self.clock),
                jobs: Jobs::new(jobs),
                handlers,
                groups,
                schedule_keys,
                unrunnable: std::sync::Mutex::new(Vec::new()),
                once,
                once_slots: Arc::new(tokio::sync::Semaphore::new(
                    self.one_off_concurrency
                        .min(tokio::sync::Semaphore::MAX_PERMITS),
                )),
                retention: self.retention,
                history: self.history,
                request_poll: self.request_poll,
                heartbeat: self.heartbeat,
                turn_grace: self.turn_grace,
                shutdown_client: self.shutdown_client,
                loop_hook: self.loop_hook,
                trace_hook: self.trace_hook,
            }),
        })
    }
}

impl fmt::Debug for SchedulerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SchedulerBuilder")
            .field("replica_id", &self.replica_id)
            .field("jobs", &self.jobs)
            .field("handlers", &self.handlers)
            .field("groups", &self.groups)
            .field("retention", &self.retention)
            .field("history", &self.history)
            .field("request_poll", &self.request_poll)
            .field("heartbeat", &self.heartbeat)
            .field("turn_grace", &self.turn_grace)
            .field("shutdown_client", &self.shutdown_client)
            .field("loop_hook", &self.loop_hook.is_some())
            .field("one_off_concurrency", &self.one_off_concurrency)
            .field("trace_hook", &self.trace_hook.is_some())
            .finish_non_exhaustive()
    }
}

/// This replica: its id (default `<host>:<pid>`), with the host name as dlock-core stores it
/// with a lock.
fn replica(id: Option<String>) -> Result<Replica, Error> {
    let host = dlock_core::ext::host_name();
    let pid = std::process::id();
    let id = id.unwrap_or_else(|| format!("{host}:{pid}"));
    crate::validate::replica_id(&id)?;
    Ok(Replica { id, host, pid })
}

/// A token that tells this scheduler instance's claims from those of any other process (or of
/// an earlier instance with the same replica id). Not a secret: it only has to differ.
fn instance_token() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    format!("{:016x}", hasher.finish())
}

// Here rather than in scheduler.rs: the builder makes the `Scheduler`, so scheduler.rs does not
// name the builder (every import points down).
impl Scheduler {
    /// Starts configuring a scheduler that uses `client`.
    pub fn builder(client: Client) -> SchedulerBuilder {
        SchedulerBuilder {
            client,
            replica_id: None,
            clock: Arc::new(SystemClock),
            jobs: Vec::new(),
            handlers: Vec::new(),
            groups: Vec::new(),
            retention: DEFAULT_CLAIM_RETENTION,
            history: DEFAULT_HISTORY,
            request_poll: DEFAULT_REQUEST_POLL,
            heartbeat: DEFAULT_HEARTBEAT,
            turn_grace: DEFAULT_TURN_GRACE,
            shutdown_client: true,
            loop_hook: None,
            trace_hook: None,
            one_off_concurrency: DEFAULT_ONE_OFF_CONCURRENCY,
        }
    }
}
