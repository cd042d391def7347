//! [`Scheduler`]: runs the jobs of one replica until shutdown, claiming each occurrence in Redis
//! so that it runs on exactly one replica, and drains running jobs on the way out.
//!
//! Per job, one loop: sleep until the next nominal occurrence (by the replica's [`Clock`]),
//! work out what is due ([`crate::due_occurrences_with_grace`]), and for each due occurrence
//! start an attempt that waits for the occurrence's jitter and then runs [`crate::run`]'s
//! claim → lock → handler → record → release sequence. `run_now` requests are polled from Redis.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use dlock_core::Client;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::clock::{Clock, SystemClock, until};
use crate::context::Replica;
use crate::error::Error;
use crate::jitter::jitter_for;
use crate::job::Job;
use crate::ledger::JobKeys;
use crate::misfire::{DEFAULT_GRACE, MAX_DUE, due_occurrences_with_grace};
use crate::run::{self, Attempt, JobEntry};

/// How long a claim is remembered by default: a day. Claims older than this are forgotten, so a
/// replica catching up on an occurrence older than a day could run it again; keep the retention
/// above the longest [`crate::MisfirePolicy::CatchUp`] window.
pub const DEFAULT_CLAIM_RETENTION: Duration = Duration::from_secs(24 * 60 * 60);
/// How many runs the ledger keeps per job by default.
pub const DEFAULT_HISTORY: usize = 100;
/// How often a replica looks for `run_now` requests by default: every 5 s, one `LPOP` per job
/// (a request is picked up within this interval; polling more often costs every replica one
/// round trip per job each time).
pub const DEFAULT_REQUEST_POLL: Duration = Duration::from_secs(5);

/// Builds a [`Scheduler`]; start with [`Scheduler::builder`].
pub struct SchedulerBuilder {
    client: Client,
    replica_id: Option<String>,
    clock: Arc<dyn Clock>,
    jobs: Vec<Job>,
    retention: Duration,
    history: usize,
    request_poll: Duration,
}

impl SchedulerBuilder {
    /// The replica's id in the ledger (default `<host>:<pid>`).
    pub fn replica_id(mut self, id: impl Into<String>) -> Self {
        self.replica_id = Some(id.into());
        self
    }

    /// The clock occurrences are timed by (default [`SystemClock`]).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Adds a job. Every replica should add the same jobs.
    pub fn job(mut self, job: Job) -> Self {
        self.jobs.push(job);
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

    /// How often to look for `run_now` requests (default [`DEFAULT_REQUEST_POLL`]).
    pub fn request_poll(mut self, every: Duration) -> Self {
        self.request_poll = every;
        self
    }

    /// Checks the jobs and options and creates the scheduler (nothing runs yet).
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidJob`] for a bad job name (empty, braces, control characters,
    /// longer than 500 bytes), a name used twice, a lease shorter than [`crate::MIN_RUN_LEASE`]
    /// or beyond dlock's TTL range, a jitter not
    /// shorter than the schedule's shortest interval, a `max_run` not longer than the lease, a
    /// replica id with control characters, a zero history or poll interval.
    pub fn build(self) -> Result<Scheduler, Error> {
        let replica = Arc::new(replica(self.replica_id)?);
        if self.history == 0 || self.request_poll.is_zero() || self.retention.is_zero() {
            return Err(Error::invalid_job(
                "history, claim retention and request poll interval must be greater than zero",
            ));
        }
        let mut jobs = HashMap::new();
        for job in self.jobs {
            let entry = JobEntry::new(&self.client, job)?;
            let name = entry.job.name.clone();
            if jobs.insert(name.clone(), Arc::new(entry)).is_some() {
                return Err(Error::invalid_job(format!(
                    "job `{name}` was added twice; job names must be unique"
                )));
            }
        }
        Ok(Scheduler {
            inner: Arc::new(Inner {
                client: self.client,
                replica,
                clock: self.clock,
                jobs,
                retention: self.retention,
                history: self.history,
                request_poll: self.request_poll,
            }),
        })
    }
}

impl fmt::Debug for SchedulerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SchedulerBuilder")
            .field("replica_id", &self.replica_id)
            .field("jobs", &self.jobs)
            .field("retention", &self.retention)
            .field("history", &self.history)
            .field("request_poll", &self.request_poll)
            .finish_non_exhaustive()
    }
}

fn replica(id: Option<String>) -> Result<Replica, Error> {
    let host = hostname();
    let pid = std::process::id();
    let id = id.unwrap_or_else(|| format!("{host}:{pid}"));
    crate::validate::replica_id(&id)?;
    Ok(Replica { id, host, pid })
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| {
            h.trim()
                .chars()
                .filter(|c| !c.is_control())
                .collect::<String>()
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".to_owned())
}

pub(crate) struct Inner {
    pub(crate) client: Client,
    pub(crate) replica: Arc<Replica>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) jobs: HashMap<Arc<str>, Arc<JobEntry>>,
    pub(crate) retention: Duration,
    pub(crate) history: usize,
    request_poll: Duration,
}

/// A replica's scheduler: every replica runs one with the same jobs; each occurrence of each
/// job runs on exactly one replica.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use dlock_scheduler::{Job, Scheduler};
///
/// let client = dlock_core::Client::open("redis://127.0.0.1:6379/")?;
/// let scheduler = Scheduler::builder(client)
///     .job(Job::new("lottery", "0 12 * * *", "Europe/Berlin", |ctx| async move {
///         println!("drawing winners for {}", ctx.occurrence());
///         Ok::<(), std::io::Error>(())
///     })?)
///     .build()?;
/// // Runs until Ctrl-C, then lets running jobs finish for up to 30 s.
/// scheduler
///     .run_until(async { let _ = tokio::signal::ctrl_c().await; }, Duration::from_secs(30))
///     .await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Scheduler {
    pub(crate) inner: Arc<Inner>,
}

/// How a [`Scheduler::run_until`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Runs that finished on their own after shutdown began.
    pub drained: usize,
    /// Runs still going at the drain deadline, which were cancelled (recorded as such) and
    /// released.
    pub cancelled: usize,
}

impl Scheduler {
    /// Starts configuring a scheduler that uses `client`.
    pub fn builder(client: Client) -> SchedulerBuilder {
        SchedulerBuilder {
            client,
            replica_id: None,
            clock: Arc::new(SystemClock),
            jobs: Vec::new(),
            retention: DEFAULT_CLAIM_RETENTION,
            history: DEFAULT_HISTORY,
            request_poll: DEFAULT_REQUEST_POLL,
        }
    }

    /// This replica.
    pub fn replica(&self) -> &Replica {
        &self.inner.replica
    }

    /// Runs the jobs until `shutdown` resolves; then stops claiming, lets running jobs finish
    /// for up to `drain`, cancels those still going (recorded as cancelled, locks released), and
    /// returns.
    ///
    /// # Cancel safety
    /// Not cancel safe in the sense of a graceful stop: dropping the future drops the job loops
    /// and running handlers at once (their leases are released in the background, the ledger
    /// shows them abandoned). Use `shutdown` to stop gracefully.
    pub async fn run_until(
        &self,
        shutdown: impl Future<Output = ()>,
        drain: Duration,
    ) -> ShutdownReport {
        let stop = CancellationToken::new();
        let cancel_runs = CancellationToken::new();
        let runs = TaskTracker::new();
        let loops = TaskTracker::new();
        for entry in self.inner.jobs.values() {
            let ctx = LoopCtx {
                inner: self.inner.clone(),
                entry: entry.clone(),
                stop: stop.clone(),
                runs: runs.clone(),
                cancel_runs: cancel_runs.clone(),
            };
            loops.spawn(job_loop(ctx));
        }
        loops.close();
        shutdown.await;
        tracing::info!(replica = %self.inner.replica.id, "dlock-scheduler: shutting down; draining running jobs");
        stop.cancel();
        loops.wait().await;
        runs.close();
        let running = runs.len();
        let cancelled = if tokio::time::timeout(drain, runs.wait()).await.is_ok() {
            0
        } else {
            let left = runs.len();
            cancel_runs.cancel();
            runs.wait().await;
            left
        };
        ShutdownReport {
            drained: running - cancelled,
            cancelled,
        }
    }
}

impl fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scheduler")
            .field("replica", &self.inner.replica.id)
            .field("jobs", &self.inner.jobs.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// What one job loop needs.
struct LoopCtx {
    inner: Arc<Inner>,
    entry: Arc<JobEntry>,
    stop: CancellationToken,
    runs: TaskTracker,
    cancel_runs: CancellationToken,
}

impl LoopCtx {
    fn start(&self, occurrence: DateTime<Utc>, manual: bool) {
        let delay = if manual {
            Duration::ZERO
        } else {
            jitter_for(&self.entry.job.name, occurrence, self.entry.job.jitter)
        };
        let fire_at = occurrence + chrono::TimeDelta::from_std(delay).unwrap_or_default();
        let attempt = Attempt {
            inner: self.inner.clone(),
            entry: self.entry.clone(),
            occurrence,
            fire_at,
            manual,
            stop: self.stop.clone(),
            cancel: self.cancel_runs.clone(),
        };
        let stop = self.stop.clone();
        let clock = self.inner.clock.clone();
        self.runs.spawn(async move {
            if !delay.is_zero() {
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(until(clock.as_ref(), fire_at)) => {}
                }
            }
            run::attempt(attempt).await;
        });
    }
}

/// One job's loop on this replica.
async fn job_loop(ctx: LoopCtx) {
    let job = &ctx.entry.job;
    let grace = DEFAULT_GRACE + job.jitter;
    let mut last_seen = run::latest_occurrence(&ctx.inner, &ctx.entry).await;
    let mut next_poll = tokio::time::Instant::now();
    loop {
        let now = ctx.inner.clock.now();
        let due = due_occurrences_with_grace(&job.schedule, last_seen, now, job.misfire, grace);
        for occurrence in &due {
            ctx.start(*occurrence, false);
        }
        let more = due.len() == MAX_DUE;
        last_seen = if more { due.last().copied() } else { Some(now) }.max(last_seen);
        if tokio::time::Instant::now() >= next_poll {
            for requested_ms in run::take_requests(&ctx.inner, &ctx.entry).await {
                if let Some(at) = Utc.timestamp_millis_opt(requested_ms).single() {
                    ctx.start(at, true);
                }
            }
            next_poll = tokio::time::Instant::now() + ctx.inner.request_poll;
        }
        if more {
            continue;
        }
        let next = job.schedule.next_after(now);
        let wake = next.map_or(ctx.inner.request_poll, |n| {
            until(ctx.inner.clock.as_ref(), n)
        });
        let wake = wake.min(next_poll.saturating_duration_since(tokio::time::Instant::now()));
        tokio::select! {
            () = ctx.stop.cancelled() => return,
            () = tokio::time::sleep(wake) => {}
        }
    }
}

/// The keys of job `name` under `client`'s prefix (also for jobs not registered here).
pub(crate) fn keys(client: &Client, name: &str) -> JobKeys {
    JobKeys::new(client.key_prefix(), name)
}
