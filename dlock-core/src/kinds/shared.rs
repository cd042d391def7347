//! The admission shared by the lock kinds that let several holders in at once ([`crate::Semaphore`],
//! [`crate::RwLock`]): a weighted, strict-FIFO queue of requests over one leased hash
//! (`scripts/shared.lua`, `shared_acquire.lua`, `shared_release.lua`).
//!
//! A request weighs some of the lock's `limit`: a semaphore's caller asks for `n` permits, a
//! read-write lock's reader weighs 1 and its writer the whole limit. A request is admitted when
//! it fits beside the holders and nobody queued ahead of it; the queue is served from its head
//! while each request fits and stops at the first that does not. Every holder is its own
//! acquisition: its own token, lease and fence, renewed by the watchdog in its batches and
//! released with `shared_release.lua` (which admits the requests that now fit and pushes their
//! grants on the mutex's wake channels). This module is the client side of that: one attempt,
//! the wait for a grant (`transport/wait.rs`, shared with the mutex), and the lease a grant becomes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::context::Context;
use crate::error::Result;
use crate::key::LockKeys;
use crate::lease::{LeaseCore, LostReason, NewLease};
use crate::metrics::{self, Outcome};
use crate::options::LockSettings;
use crate::scripts::wire;
use crate::scripts::{self, Call, SharedReply, unexpected};
use crate::timing;
use crate::token::OwnerToken;
use crate::transport::ReleaseOnDrop;
use crate::transport::wait::{self, Registration, Seen};

/// One shared lock as a kind's handle sees it: its keys, the limit its requests are weighed
/// against, and the settings of every holder's lease. Cheap to clone.
#[derive(Clone)]
pub(crate) struct SharedLock {
    pub(crate) ctx: Arc<Context>,
    pub(crate) keys: LockKeys,
    pub(crate) limit: u32,
    pub(crate) settings: LockSettings,
}

/// How an attempt treats the queue (`shared_acquire.lua`'s mode).
#[derive(Clone, Copy)]
enum Mode {
    Once,
    Wait,
    /// The re-ask after the fallback timer that follows a `Wait` or `Join` which found the
    /// caller queued, nothing heard since: no scan of the queue (see `shared_acquire.lua`).
    Again,
    /// The first attempt of a waiting request: its entry is new, so it queues without a scan;
    /// a resend of it finds the mark of its first run and scans instead, so the request is
    /// never queued twice (see `shared_acquire.lua`, issue #44).
    Join,
    Last,
}

impl Mode {
    fn as_str(self) -> &'static str {
        match self {
            Self::Once => "",
            Self::Wait => "wait",
            Self::Again => "again",
            Self::Join => "join",
            Self::Last => "last",
        }
    }
}

/// A request just admitted in Redis, before it becomes a lease.
pub(crate) struct Admitted {
    pub(crate) token: OwnerToken,
    pub(crate) fence: u64,
    pub(crate) safe_until: Instant,
    registration: Option<Registration>,
}

impl SharedLock {
    /// Admits a request of `weight`, waiting in FIFO order up to `wait` (`None`: without limit;
    /// zero: one attempt that does not queue). `Ok(None)` when the wait ended first: nothing is
    /// held or queued then.
    ///
    /// # Cancel safety
    /// Dropping the future leaves the queue and gives back a grant that came meanwhile, in the
    /// background.
    pub(crate) async fn admit(
        &self,
        weight: u32,
        wait: Option<Duration>,
    ) -> Result<Option<Admitted>> {
        let started = metrics::ENABLED.then(Instant::now);
        let result = self.admit_inner(weight, wait).await;
        if let Some(started) = started {
            let (outcome, contended) = match &result {
                Ok(Some(admitted)) => (Outcome::Acquired, admitted.registration.is_some()),
                Ok(None) => (Outcome::refused(None, wait), wait != Some(Duration::ZERO)),
                Err(e) => (Outcome::refused(Some(e), wait), false),
            };
            metrics::acquire(
                self.keys.kind().metric_name(),
                self.settings.label.as_deref().unwrap_or_default(),
                outcome,
                contended,
                started.elapsed(),
            );
        }
        result
    }

    async fn admit_inner(&self, weight: u32, wait: Option<Duration>) -> Result<Option<Admitted>> {
        let deadline = wait.and_then(|w| Instant::now().checked_add(w));
        let token = self.ctx.tokens.next();
        // The connection first: without one nothing is sent, and nothing needs cleaning up.
        let (conn, generation) = self.ctx.transport.conn()?;
        let mut cleanup = ReleaseOnDrop::new(&self.ctx.transport, &self.keys, token);
        let waiters = &self.ctx.transport.waiters;
        // One attempt that does not queue, skipped when this client is subscribed already
        // (other local requests wait, so this one most likely waits too): the queued attempt
        // below admits at once all the same when the request fits and nobody is ahead.
        if !waiters.is_subscribed(&self.keys.lock, generation) {
            let sent = Instant::now();
            // Boxed, as every request below: a waiting task keeps this future for as long as
            // it waits, and would otherwise carry the largest request inline.
            let reply = Box::pin(self.attempt(token, weight, Mode::Once, "")).await?;
            cleanup.disarm();
            match reply {
                SharedReply::Held { fence, pttl } => {
                    return Ok(Some(self.admitted(token, fence, sent, pttl, None)));
                }
                SharedReply::Wait { .. } if deadline.is_some_and(|d| Instant::now() >= d) => {
                    return Ok(None);
                }
                SharedReply::Wait { .. } => {}
            }
        }

        // Subscribe first, then queue: a grant can never be published before we listen.
        let entry: Arc<str> = wire::shared_queue_entry(
            &token,
            &self.ctx.client_id,
            timing::millis(self.settings.ttl),
            self.ctx.transport.slot().publish_mode(),
            weight,
            &self.ctx.transport.holder,
            self.settings.label.as_deref().unwrap_or_default(),
        )
        .into();
        let registration = waiters.register(token, &self.keys.lock, entry);
        let _membership = match Box::pin(waiters.join((&conn, generation), &self.keys.lock)).await {
            Ok(membership) => membership,
            Err(e) => {
                let again = self.ctx.transport.join_again(e, &self.keys.lock, deadline);
                Box::pin(again).await?
            }
        };
        drop(conn);
        cleanup.arm(registration.entry().clone());
        let label = self.settings.label.as_deref().unwrap_or_default();
        let _waiting = metrics::Waiting::start(self.keys.kind().metric_name(), label);
        // Since when the attempts fail (a Sentinel client rides out a failover).
        let mut failing = None;
        // The mode of the next attempt unless the wait is over: `Join` first (the entry is
        // new: no scan); `Again` (no scan) once after an attempt that found this request queued
        // with nothing heard since; `Wait` (a scan) otherwise.
        let mut next = Mode::Join;
        loop {
            if self.ctx.is_closed() {
                return Err(self.ctx.closed_error(self.keys.name()));
            }
            let last = deadline.is_some_and(|d| Instant::now() >= d);
            let mode = if last { Mode::Last } else { next };
            next = Mode::Wait;
            let sent = Instant::now();
            let reply = Box::pin(self.attempt(token, weight, mode, registration.entry()));
            let reply = match reply.await {
                Ok(reply) => reply,
                Err(e) => {
                    let since = *failing.get_or_insert_with(Instant::now);
                    if self.ctx.transport.rides_out(&e, deadline, since) {
                        Box::pin(self.ctx.transport.ride_out(deadline)).await;
                        continue;
                    }
                    return Err(e);
                }
            };
            failing = None;
            let (seen, until_free) = match reply {
                SharedReply::Held { fence, pttl } => {
                    cleanup.disarm();
                    let registration = Some(registration);
                    return Ok(Some(self.admitted(token, fence, sent, pttl, registration)));
                }
                SharedReply::Wait { .. } if last => {
                    cleanup.disarm();
                    return Ok(None);
                }
                SharedReply::Wait {
                    wait: until_free,
                    server_ms,
                } => {
                    if matches!(mode, Mode::Wait | Mode::Join) {
                        next = Mode::Again;
                    }
                    (Seen { sent, server_ms }, until_free)
                }
            };
            // Without a trusted grant (the nap is over, a nudge, a grant that came too late):
            // ask the server again.
            tokio::select! {
                () = registration.notified() => {
                    // A grant that came too late, a nudge, a disconnection: the entry may be
                    // gone.
                    next = Mode::Wait;
                    if let Some((grant, safe_until)) = registration.trusted_grant(seen) {
                        cleanup.disarm();
                        return Ok(Some(Admitted {
                            token,
                            fence: grant.fence,
                            safe_until,
                            registration: Some(registration),
                        }));
                    }
                }
                () = tokio::time::sleep(wait::nap(until_free, deadline)) => {
                    metrics::fallback_wake(self.keys.kind().metric_name(), label);
                }
            }
        }
    }

    /// A request admitted by a reply sent at `sent` that gave `pttl` of lease.
    pub(crate) fn admitted(
        &self,
        token: OwnerToken,
        fence: u64,
        sent: Instant,
        pttl: Duration,
        registration: Option<Registration>,
    ) -> Admitted {
        Admitted {
            token,
            fence,
            safe_until: timing::safe_until(sent, pttl, self.settings.ttl),
            registration,
        }
    }

    /// Runs `shared_acquire.lua` once.
    async fn attempt(
        &self,
        token: OwnerToken,
        weight: u32,
        mode: Mode,
        entry: &str,
    ) -> Result<SharedReply> {
        let mut call = Call::new(&scripts::SHARED_ACQUIRE, 1);
        call.arg(&*self.keys.lock)
            .arg(token)
            .arg(weight)
            .arg(self.limit)
            .arg("keep")
            .arg(timing::millis(self.settings.ttl))
            .arg(mode.as_str())
            .arg(entry)
            .arg(self.keys.counter())
            .arg(self.meta());
        let reply = self
            .ctx
            .transport
            .run(&call, "acquire", self.keys.name())
            .await?;
        SharedReply::decode(&reply).ok_or_else(|| unexpected("acquire", &reply))
    }

    /// `<host>\x1f<pid>\x1f<label>`: who holds, as the scripts record it.
    pub(crate) fn meta(&self) -> String {
        let label = self.settings.label.as_deref().unwrap_or_default();
        format!("{}\x1f{label}", self.ctx.transport.holder)
    }

    /// Turns an admitted request into a lease (renewed by the watchdog if the settings say so).
    /// `exclusive`: whether the holder excludes every other (a writer), which decides what an
    /// acquisition nested in its body may take.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Shutdown`] when the client was shut down meanwhile; the hold is then
    /// given back in the background.
    pub(crate) fn lease(&self, admitted: Admitted, exclusive: bool) -> Result<Arc<LeaseCore>> {
        let Admitted {
            token,
            fence,
            safe_until,
            registration,
        } = admitted;
        let lease = LeaseCore::new(NewLease {
            transport: self.ctx.transport.clone(),
            held: self.ctx.held.clone(),
            keys: self.keys.clone(),
            token,
            fence: Some(fence),
            ttl: self.settings.ttl,
            safe_until,
            renewal: self.settings.renewal,
            registration,
            label: self.settings.label.clone(),
            exclusive,
        });
        if self.ctx.is_closed() {
            // Shut down while this request was under way (the lease is in the client's registry
            // now, so a shutdown after this check finds it): give it back.
            lease.mark_released_by(LostReason::Shutdown);
            self.ctx
                .transport
                .release_in_background(self.keys.clone(), token, None);
            return Err(self.ctx.closed_error(self.keys.name()));
        }
        self.ctx.watchdog.register(&lease);
        Ok(lease)
    }
}
