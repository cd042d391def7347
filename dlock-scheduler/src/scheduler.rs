//! [`Scheduler`]: runs the jobs of one replica until shutdown, claiming each occurrence in Redis
//! so that it runs on exactly one replica, and on the way out drains running jobs and gives the
//! client back (`dlock_core::Client::shutdown`).
//!
//! Per job, one loop ([`crate::job_loop`]) and one listener that wakes it when `run_now` queues
//! a request ([`crate::wake`], on the client's connection); per scheduler, one heartbeat task
//! (the replica's liveness for the jobs' turns, [`crate::liveness`], given only for the jobs
//! whose loop runs). Configured by
//! [`crate::SchedulerBuilder`] (`builder.rs`); operated by the calls of `control.rs`.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::context::Replica;
use crate::job_loop::LoopCtx;
use crate::replica_state::Shared;

/// A replica's scheduler: every replica runs one with the same jobs; each occurrence of each
/// job runs on exactly one replica, and the live replicas take turns.
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
    pub(crate) shared: Arc<Shared>,
}

/// How a [`Scheduler::run_until`] ended.
#[derive(Debug)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Runs that finished on their own after shutdown began.
    pub drained: usize,
    /// Runs still going at the drain deadline, which were cancelled (recorded as such) and
    /// released.
    pub cancelled: usize,
    /// What the client's shutdown did and could not do ([`dlock_core::Client::shutdown`]);
    /// `None` when the scheduler leaves the client open
    /// ([`crate::SchedulerBuilder::shutdown_client`]).
    pub client: Option<dlock_core::ShutdownReport>,
}

impl Scheduler {
    /// This replica.
    pub fn replica(&self) -> &Replica {
        &self.shared.replica
    }

    /// Runs the jobs until `shutdown` resolves; then stops claiming, tells the other replicas
    /// it is gone, lets running jobs finish for up to `drain`, cancels those still going
    /// (recorded as cancelled, locks released), shuts the client down (by default, see below),
    /// and returns. Call it once per scheduler.
    ///
    /// # The client is shut down
    /// By default `run_until` ends with [`dlock_core::Client::shutdown`], given what is left of
    /// `drain` (at least the client's command timeout, since the drain may have used it all):
    /// every lock the client still holds is released, its waiting acquire calls leave their
    /// queues, its watchdog stops. So a replica's graceful exit leaves nothing in Redis for the
    /// other replicas to wait out — not the run's lock, nor a lock that other work of the
    /// process holds on the same client, nor a queue entry — and they take the job's next
    /// occurrence at once instead of after a lease. [`ShutdownReport::client`] says what could
    /// not be done.
    ///
    /// Why the default: `run_until` is how a replica exits, and most processes give the
    /// scheduler a client of its own or stop everything with it. A replica that exits leaving
    /// leases behind fails silently (the others stall for up to a lease, and nobody sees why),
    /// while a client shut down too early fails loudly: every later lock call on it is an
    /// [`dlock_core::ErrorKind::Shutdown`] error. The shutdown reaches *every clone* of the
    /// client, though: if the rest of the application shares it and goes on after the
    /// scheduler has stopped (a web server still draining requests that take locks), build the
    /// scheduler with [`crate::SchedulerBuilder::shutdown_client`]`(false)` and call
    /// `client.shutdown(..)` yourself once everything has stopped.
    ///
    /// # Cancel safety
    /// Not cancel safe in the sense of a graceful stop: dropping the future stops the job loops
    /// and cancels the running handlers at once, without a drain — in the background, each run
    /// is recorded cancelled and its lease released, and the replica leaves the jobs' turns —
    /// but does not shut the client down (or leaves its shutdown half done). Resolve the
    /// `shutdown` future instead to stop gracefully.
    pub async fn run_until(
        &self,
        shutdown: impl Future<Output = ()>,
        drain: Duration,
    ) -> ShutdownReport {
        let stop = CancellationToken::new();
        let cancel_runs = CancellationToken::new();
        // The loops and the runs are tasks of their own: were this future dropped before its
        // end, they would go on claiming and running without anyone to stop them. Dropping it
        // stops them as a shutdown whose drain deadline has passed (at the normal end both
        // tokens are spent already, or their tasks are done).
        let _stop_when_dropped = stop.clone().drop_guard();
        let _cancel_when_dropped = cancel_runs.clone().drop_guard();
        let runs = TaskTracker::new();
        let loops = TaskTracker::new();
        loops.spawn(crate::liveness::heartbeat(
            self.shared.clone(),
            stop.clone(),
        ));
        for entry in self.shared.jobs.all() {
            let ctx = LoopCtx {
                shared: self.shared.clone(),
                entry,
                stop: stop.clone(),
                runs: runs.clone(),
                cancel_runs: cancel_runs.clone(),
                start_after: None,
            };
            crate::job_loop::spawn(&loops, ctx);
        }
        // Run-time schedules: their loops start and stop as they are added and removed.
        loops.spawn(crate::follow::follow(
            self.shared.clone(),
            stop.clone(),
            runs.clone(),
            cancel_runs.clone(),
        ));
        for entry in self.shared.once.values() {
            loops.spawn(crate::wake::listen(
                self.shared.clone(),
                entry.clone(),
                stop.clone(),
            ));
            loops.spawn(crate::once_loop::once_loop(LoopCtx {
                shared: self.shared.clone(),
                entry: entry.clone(),
                stop: stop.clone(),
                runs: runs.clone(),
                cancel_runs: cancel_runs.clone(),
                start_after: None,
            }));
        }
        loops.close();
        shutdown.await;
        tracing::info!(replica = %self.shared.replica.id, "dlock-scheduler: shutting down; draining running jobs");
        stop.cancel();
        loops.wait().await;
        runs.close();
        let running = runs.len();
        let deadline = Instant::now() + drain;
        let cancelled = if tokio::time::timeout_at(deadline, runs.wait()).await.is_ok() {
            0
        } else {
            let left = runs.len();
            cancel_runs.cancel();
            runs.wait().await;
            left
        };
        let client = if self.shared.shutdown_client {
            Some(self.shut_the_client_down(deadline).await)
        } else {
            None
        };
        ShutdownReport {
            drained: running - cancelled,
            cancelled,
            client,
        }
    }

    /// Shuts the client down with what is left until `deadline`, but at least one command
    /// timeout (its clean-up is one round of requests).
    async fn shut_the_client_down(&self, deadline: Instant) -> dlock_core::ShutdownReport {
        let client = &self.shared.client;
        let left = deadline.saturating_duration_since(Instant::now());
        let report = client.shutdown(left.max(client.command_timeout())).await;
        if !report.is_complete() {
            tracing::warn!(replica = %self.shared.replica.id, %report, "dlock-scheduler: the client's shutdown left locks or queue entries behind; they expire with their leases");
        }
        report
    }
}

impl fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scheduler")
            .field("replica", &self.shared.replica.id)
            .field("jobs", &self.shared.jobs.names())
            .finish_non_exhaustive()
    }
}
