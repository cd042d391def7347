//! Shutting a client down: [`Client::shutdown`] releases what the client holds and leaves
//! nothing behind in Redis, so that the next replica does not wait for leases to run out.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::stream;

use crate::client::Client;
use crate::error::{Error, ErrorKind, Result};
use crate::key::LockKeys;
use crate::lease::LostReason;
use crate::scripts::{Call, unexpected};
use crate::transport::{Transport, release_call};

/// What [`Client::shutdown`] did, and what it could not do.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Locks this client held that were released (each handed to its next waiter, if any).
    pub released: usize,
    /// Waiting acquire calls whose queue entries were removed.
    pub dequeued: usize,
    /// Wake-channel subscriptions dropped.
    pub unsubscribed: usize,
    /// Background releases (of guards dropped, or acquire calls abandoned, just before the
    /// shutdown) that were still running and were waited for.
    pub background: usize,
    /// What failed or did not finish by the deadline: the lock name and why. Such a lock or
    /// queue entry stays until its lease runs out.
    pub failures: Vec<(String, Error)>,
}

impl ShutdownReport {
    /// Whether everything was released and removed.
    pub fn is_complete(&self) -> bool {
        self.failures.is_empty()
    }
}

impl fmt::Display for ShutdownReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "released {} lock(s), removed {} queued waiter(s), dropped {} subscription(s), \
             finished {} background release(s)",
            self.released, self.dequeued, self.unsubscribed, self.background
        )?;
        for (name, error) in &self.failures {
            write!(f, "; `{name}` not cleaned up: {error}")?;
        }
        Ok(())
    }
}

/// One clean-up step and what it counts as.
enum Step {
    Release,
    Dequeue,
    Unsubscribe,
}

type StepFuture = Pin<Box<dyn Future<Output = Result<()>> + Send>>;

impl Client {
    /// Shuts the client down, for a graceful process exit: releases every lock it holds (the
    /// next waiter gets each at once), removes its waiting acquire calls from their queues,
    /// drops its wake-channel subscriptions, waits for the background releases of guards
    /// dropped just before, and stops the watchdog. Everything runs
    /// concurrently and ends by `deadline`; the report says what could not be done (those
    /// leases and entries then expire by themselves).
    ///
    /// Afterwards every clone of this client refuses to acquire ([`ErrorKind::Shutdown`]);
    /// guards still alive learn through their lease ([`crate::LostReason::Shutdown`]), and
    /// waiting acquire calls end with [`ErrorKind::Shutdown`]. Calling it again does nothing
    /// more.
    ///
    /// ```no_run
    /// # async fn demo(client: dlock_core::Client) {
    /// use std::time::Duration;
    /// // … at the end of main, after the work has stopped:
    /// let report = client.shutdown(Duration::from_secs(5)).await;
    /// if !report.is_complete() {
    ///     eprintln!("dlock shutdown: {report}");
    /// }
    /// # }
    /// ```
    ///
    /// # Cancel safety
    /// Not cancel safe in the sense that dropping it mid-way leaves the rest undone (the client
    /// is shut down already; what was not released expires with its lease). Bound it with
    /// `deadline` instead of dropping it.
    pub async fn shutdown(&self, deadline: Duration) -> ShutdownReport {
        let ctx = &self.ctx;
        let transport = &ctx.transport;
        let until = Instant::now() + deadline;
        // First refuse new acquisitions, then collect what is held: an acquisition racing with
        // this either is collected below or sees the flag and releases itself (mutex.rs).
        ctx.close();
        ctx.watchdog.stop();
        let mut steps: Vec<(String, Step, StepFuture)> = Vec::new();
        for lease in ctx.held.take_all() {
            lease.mark_released_by(LostReason::Shutdown);
            let call = release_call(&lease.keys, lease.token, None);
            steps.push((
                lease.keys.name().to_owned(),
                Step::Release,
                release_step(
                    transport.clone(),
                    call,
                    lease.keys.clone(),
                    "shutdown release",
                ),
            ));
        }
        for queued in transport.waiters.queued() {
            let keys = LockKeys::from_lock_key(&queued.lock_key);
            let call = release_call(&keys, queued.token, Some(&queued.entry));
            steps.push((
                keys.name().to_owned(),
                Step::Dequeue,
                release_step(transport.clone(), call, keys, "shutdown dequeue"),
            ));
        }
        // Take the channels before waking the waiting calls: a woken call that drops the last
        // membership would otherwise unsubscribe by itself, uncounted and unbounded by `until`.
        let channels = transport.waiters.take_channels();
        // Waiting calls see the flag and end.
        transport.waiters.wake_all();
        for channel in channels {
            let transport = transport.clone();
            let name = channel.to_string();
            let future = Box::pin(async move { unsubscribe(&transport, &channel).await });
            steps.push((name, Step::Unsubscribe, future));
        }
        // Releases of guards dropped just before run in the background: a process that exits
        // right after this call would lose them, so they are waited for as well.
        let background = &transport.background;
        let in_flight = background.len();
        background.close();
        let (mut report, finished) = tokio::join!(
            run_steps(steps, until),
            tokio::time::timeout_at(until.into(), background.wait())
        );
        background.reopen();
        if finished.is_ok() {
            report.background = in_flight;
        } else {
            report.failures.push((
                format!("{} background release(s)", background.len()),
                Error::new(
                    ErrorKind::Timeout,
                    "not done before the shutdown deadline; they expire with their leases",
                ),
            ));
        }
        transport.slot().stop_following();
        tracing::info!(%report, "dlock: client shut down");
        report
    }
}

/// One release (of a lock, or of a queue entry) as a shutdown step.
fn release_step(
    transport: Arc<Transport>,
    call: Call,
    keys: LockKeys,
    op: &'static str,
) -> StepFuture {
    Box::pin(async move {
        let reply = transport.run(&call, op, keys.name()).await?;
        transport
            .release_reply(&reply)
            .map(drop)
            .ok_or_else(|| unexpected(op, &reply))
    })
}

async fn unsubscribe(transport: &Transport, channel: &str) -> Result<()> {
    let (conn, _) = transport.conn()?;
    let timeout = transport.command_timeout();
    match tokio::time::timeout(timeout, conn.unsubscribe(channel)).await {
        Ok(reply) => reply.map_err(|e| Error::from_redis("unsubscribe", e)),
        Err(_) => Err(Error::timeout("unsubscribe", timeout)),
    }
}

/// Steps in flight at once. Each is one command, timed from when it is sent: 100,000 sent at
/// once queue behind each other on the one connection, and half of them outlived the command
/// timeout (issue 29, W6 at 100,000 held locks). 256 keep Redis busy (one release costs it a few
/// µs) while none waits for more than a millisecond or two.
const STEPS_IN_FLIGHT: usize = 256;

/// Runs the steps, [`STEPS_IN_FLIGHT`] at a time, until `until`, counting what succeeded.
async fn run_steps(steps: Vec<(String, Step, StepFuture)>, until: Instant) -> ShutdownReport {
    let mut report = ShutdownReport::default();
    let mut names: Vec<Option<(String, Step)>> = Vec::with_capacity(steps.len());
    let mut futures = Vec::with_capacity(steps.len());
    for (index, (name, step, future)) in steps.into_iter().enumerate() {
        names.push(Some((name, step)));
        futures.push(async move { (index, future.await) });
    }
    let mut running = stream::iter(futures).buffer_unordered(STEPS_IN_FLIGHT);
    let deadline = tokio::time::sleep_until(until.into());
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            next = running.next() => match next {
                Some((index, result)) => {
                    let Some((name, step)) = names.get_mut(index).and_then(Option::take) else {
                        continue;
                    };
                    match result {
                        Ok(()) => match step {
                            Step::Release => report.released += 1,
                            Step::Dequeue => report.dequeued += 1,
                            Step::Unsubscribe => report.unsubscribed += 1,
                        },
                        Err(error) => report.failures.push((name, error)),
                    }
                }
                None => break,
            },
            () = &mut deadline => break,
        }
    }
    for (name, _) in names.into_iter().flatten() {
        report.failures.push((
            name,
            Error::new(
                ErrorKind::Timeout,
                "not done before the shutdown deadline; it expires with its lease",
            ),
        ));
    }
    report
}
