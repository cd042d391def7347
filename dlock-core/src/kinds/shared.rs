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
//! grants on the mutex's wake channels). This module is the client side of that: one attempt
//! of `shared_acquire.lua`, the shared kinds' part of the wait loop they share with the mutex
//! (`kinds/queue.rs`, waking through `transport/wait.rs`), and the lease a grant becomes.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::context::Context;
use crate::error::Result;
use crate::key::LockKeys;
use crate::kinds::queue::{self, Answer, Granted, Mode, Queued};
use crate::lease::{LeaseCore, LostReason, NewLease};
use crate::metrics::{self, Outcome};
use crate::options::LockSettings;
use crate::scripts::wire;
use crate::scripts::{self, Call, SharedReply, unexpected};
use crate::timing;
use crate::token::OwnerToken;
use crate::transport::wait::Registration;

/// One shared lock as a kind's handle sees it: its keys, the limit its requests are weighed
/// against, and the settings of every holder's lease. Cheap to clone.
#[derive(Clone)]
pub(crate) struct SharedLock {
    pub(crate) ctx: Arc<Context>,
    pub(crate) keys: LockKeys,
    pub(crate) limit: u32,
    pub(crate) settings: LockSettings,
}

/// A request just admitted in Redis, before it becomes a lease.
pub(crate) type Admitted = Granted<u64>;

/// One request of `weight` on `lock`: what the wait loop ([`queue::wait_in_line`]) asks of
/// the shared kinds.
struct Request<'a> {
    lock: &'a SharedLock,
    weight: u32,
}

impl Queued for Request<'_> {
    type Fence = u64;
    type Watch = ();

    fn ctx(&self) -> &Arc<Context> {
        &self.lock.ctx
    }

    fn keys(&self) -> &LockKeys {
        &self.lock.keys
    }

    fn settings(&self) -> &LockSettings {
        &self.lock.settings
    }

    async fn try_once(&self, token: OwnerToken) -> Result<Option<(u64, Duration)>> {
        let reply = self
            .lock
            .attempt(token, self.weight, Mode::Once, "")
            .await?;
        Ok(match reply {
            SharedReply::Held { fence, pttl } => Some((fence, pttl)),
            SharedReply::Wait { .. } => None,
        })
    }

    fn queue_entry(&self, token: OwnerToken) -> Arc<str> {
        let lock = self.lock;
        wire::shared_queue_entry(
            &token,
            &lock.ctx.client_id,
            timing::millis(lock.settings.ttl),
            lock.ctx.transport.slot().publish_mode(),
            self.weight,
            &lock.ctx.transport.holder,
            lock.settings.label.as_deref().unwrap_or_default(),
        )
        .into()
    }

    async fn ask(&self, token: OwnerToken, mode: Mode, entry: &str) -> Result<Answer<u64>> {
        let reply = self.lock.attempt(token, self.weight, mode, entry).await?;
        Ok(match reply {
            SharedReply::Held { fence, pttl } => Answer::Granted { fence, pttl },
            SharedReply::Wait { wait, server_ms } => Answer::Queued {
                until_free: wait,
                server_ms,
            },
        })
    }

    fn still_waiting(&self, (): &mut ()) {}
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

    /// The wait itself, in the one wait loop of the kinds that queue (`kinds/queue.rs`).
    fn admit_inner(
        &self,
        weight: u32,
        wait: Option<Duration>,
    ) -> impl Future<Output = Result<Option<Admitted>>> + Send + '_ {
        let deadline = wait.and_then(|w| Instant::now().checked_add(w));
        queue::wait_in_line(Request { lock: self, weight }, deadline, ())
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
        Granted::new(token, fence, sent, pttl, self.settings.ttl, registration)
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
