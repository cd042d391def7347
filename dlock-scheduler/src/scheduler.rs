//! [`Scheduler`]: runs the jobs of one replica until shutdown, claiming each occurrence in Redis
//! so that it runs on exactly one replica, and drains running jobs on the way out.
//!
//! Per job, one loop ([`crate::job_loop`]) and one listener that wakes it when `run_now` queues
//! a request ([`crate::wake`], on the client's connection); per scheduler, one heartbeat task
//! (the replica's liveness for the jobs' turns, [`crate::liveness`]). Configured by
//! [`crate::SchedulerBuilder`] (`builder.rs`); operated by the calls of `control.rs`.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::context::Replica;
use crate::job_loop::{LoopCtx, job_loop};
use crate::shared::Shared;

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
    /// This replica.
    pub fn replica(&self) -> &Replica {
        &self.shared.replica
    }

    /// Runs the jobs until `shutdown` resolves; then stops claiming, tells the other replicas
    /// it is gone, lets running jobs finish for up to `drain`, cancels those still going
    /// (recorded as cancelled, locks released), and returns.
    ///
    /// # Cancel safety
    /// Not cancel safe in the sense of a graceful stop: dropping the future drops the job loops
    /// and running handlers at once (their leases are released in the background, the ledger
    /// shows them abandoned, and the replica keeps its turns until its liveness runs out). Use
    /// `shutdown` to stop gracefully.
    pub async fn run_until(
        &self,
        shutdown: impl Future<Output = ()>,
        drain: Duration,
    ) -> ShutdownReport {
        let stop = CancellationToken::new();
        let cancel_runs = CancellationToken::new();
        let runs = TaskTracker::new();
        let loops = TaskTracker::new();
        loops.spawn(crate::liveness::heartbeat(
            self.shared.clone(),
            stop.clone(),
        ));
        for entry in self.shared.jobs.values() {
            loops.spawn(crate::wake::listen(
                self.shared.clone(),
                entry.clone(),
                stop.clone(),
            ));
            let ctx = LoopCtx {
                shared: self.shared.clone(),
                entry: entry.clone(),
                stop: stop.clone(),
                runs: runs.clone(),
                cancel_runs: cancel_runs.clone(),
            };
            loops.spawn(job_loop(ctx));
        }
        loops.close();
        shutdown.await;
        tracing::info!(replica = %self.shared.replica.id, "dlock-scheduler: shutting down; draining running jobs");
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
            .field("replica", &self.shared.replica.id)
            .field("jobs", &self.shared.jobs.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}
