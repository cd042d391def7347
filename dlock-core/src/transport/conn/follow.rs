//! A Sentinel client's following of its master: the re-resolution that runs after a dropped
//! connection, a `READONLY` reply, a timed-out request or a `+switch-master`, the wait of the
//! requests made meanwhile, and the move to a new master under a new generation (see the
//! parent module's docs and ARCHITECTURE.md, "Following a Sentinel failover").

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::{Conn, ConnSlot, Factory, Live};
use crate::error::{Error, ErrorKind, Result};
use crate::runtime::lock;
use crate::transport::sentinel::Resolved;

/// A Sentinel client's following of its master.
impl ConnSlot {
    /// Whether this client finds its master through sentinels.
    pub(crate) fn is_sentinel(&self) -> bool {
        matches!(self.factory, Factory::Sentinel(_))
    }

    /// Starts following the master (a Sentinel client; nothing for others): the first
    /// resolution and the `+switch-master` listener, in the current runtime.
    pub(crate) fn start_following(self: &Arc<Self>) {
        if self.is_sentinel() {
            self.follow();
        }
    }

    /// Asks the sentinels for the master again, in the background (one re-resolution at a
    /// time; a request made while one runs makes it ask once more). Called on a dropped
    /// connection, a `READONLY` reply, a request that timed out and a `+switch-master`. When
    /// they name another master, the connection is rebuilt to it (see [`ConnSlot::adopt`]).
    /// Nothing for other clients, or outside a runtime.
    pub(crate) fn follow(self: &Arc<Self>) {
        if !self.is_sentinel() {
            return;
        }
        self.ensure_watching();
        let follower = &self.follower;
        let mut task = lock(&follower.task);
        follower.requests.fetch_add(1, Ordering::AcqRel);
        let running = follower.state.borrow().0 && task.as_ref().is_some_and(|t| !t.is_finished());
        if running {
            follower.nudge.notify_one();
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        follower
            .state
            .send_modify(|(following, _)| *following = true);
        *task = Some(runtime.spawn(follow_master(Arc::downgrade(self), follower.nudge.clone())));
    }

    /// Stops the `+switch-master` listener and a re-resolution in flight (client shutdown: no
    /// background connection to a sentinel outlives it). Both start again if the client is
    /// used and its connection drops.
    pub(crate) fn stop_following(&self) {
        for task in [&self.follower.task, &self.follower.watcher] {
            if let Some(task) = lock(task).take() {
                task.abort();
            }
        }
        self.follower
            .state
            .send_modify(|(following, _)| *following = false);
    }

    /// Starts the `+switch-master` listener unless it runs (it dies with its runtime).
    fn ensure_watching(self: &Arc<Self>) {
        let Factory::Sentinel(sentinel) = &self.factory else {
            return;
        };
        let mut watcher = lock(&self.follower.watcher);
        if watcher.as_ref().is_some_and(|w| !w.is_finished()) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let slot = Arc::downgrade(self);
        let on_switch = move || slot.upgrade().map(|slot| slot.follow()).is_some();
        *watcher = Some(runtime.spawn(sentinel.spec.clone().watch_switches(on_switch)));
    }

    /// Whether a request should wait for [`ConnSlot::settled`] first: a Sentinel client looks
    /// for its master (the one in use is suspected gone).
    pub(crate) fn is_following(&self) -> bool {
        self.is_sentinel() && self.follower.state.borrow().0
    }

    /// Waits, at most `limit`, until the master is found again — or, while no master is known
    /// at all, until the next attempt ended (so that a request fails with its reason rather
    /// than after the whole `limit`). A re-resolution that died with its runtime is started
    /// again here.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits.
    pub(crate) async fn settled(self: &Arc<Self>, limit: Duration) {
        let task_gone = lock(&self.follower.task)
            .as_ref()
            .is_none_or(|t| t.is_finished());
        if task_gone && self.follower.state.borrow().0 {
            self.follow();
        }
        let mut state = self.follower.state.subscribe();
        let (following, attempts) = *state.borrow_and_update();
        if !following {
            return;
        }
        let ready = |&(following, ended): &(bool, u64)| {
            !following || (ended > attempts && matches!(self.live.load().conn, Conn::Unresolved(_)))
        };
        let _ = tokio::time::timeout(limit, state.wait_for(ready)).await;
    }

    /// The error of a request that waited `waited` for a Sentinel client's master in vain.
    pub(crate) fn no_master_error(&self, waited: Duration) -> Error {
        let Factory::Sentinel(sentinel) = &self.factory else {
            return Error::timeout("waiting for the master", waited);
        };
        let why = lock(&sentinel.last_error)
            .as_ref()
            .map_or_else(|| "no answer yet".to_owned(), |(_, why)| why.to_string());
        Error::new(
            ErrorKind::Connection,
            format!(
                "the master `{}` stopped answering and the sentinels named no other within \
                 {waited:?} (a failover takes the sentinels' down-after-milliseconds and an \
                 election; retry): {why}",
                sentinel.spec.master_name
            ),
        )
    }

    /// Why no master is known, as the last resolution said (kind and text); `None` when the
    /// client has a master (or is no Sentinel client).
    pub(crate) fn resolution_error(&self) -> Option<Error> {
        let Factory::Sentinel(sentinel) = &self.factory else {
            return None;
        };
        if !matches!(self.live.load().conn, Conn::Unresolved(_)) {
            return None;
        }
        lock(&sentinel.last_error).as_ref().map(|(kind, why)| {
            Error::new(
                *kind,
                format!("{why}; the client asks the sentinels again on the next request"),
            )
        })
    }

    /// Uses `master` from now on: unless it is the master in use already, builds a connection
    /// to it under a new generation and runs the hooks (the watchdog's, then the failover's).
    fn adopt(&self, master: Resolved) -> Result<()> {
        let Factory::Sentinel(sentinel) = &self.factory else {
            return Ok(());
        };
        let (conn, generation) = {
            let _one_at_a_time = lock(&self.rebuilding);
            let live = self.live.load();
            let same = lock(&sentinel.current)
                .as_ref()
                .is_some_and(|c| c.addr == master.addr);
            if same && !matches!(live.conn, Conn::Unresolved(_)) && !live.probe.is_finished() {
                return Ok(());
            }
            let probe = tokio::runtime::Handle::try_current()
                .map_err(|_| Error::no_runtime("following a failover"))?
                .spawn(std::future::pending());
            let addr = master.addr.clone();
            let previous = lock(&sentinel.current).replace(master);
            let conn = match self.factory.build() {
                Ok(conn) => conn,
                Err(e) => {
                    *lock(&sentinel.current) = previous;
                    return Err(e);
                }
            };
            let generation = self.generations.fetch_add(1, Ordering::Relaxed) + 1;
            self.live
                .store(Arc::new(Live::new(conn.clone(), generation, probe)));
            let from = previous.map_or_else(|| "none".to_owned(), |p| p.addr);
            tracing::info!(
                master = %addr,
                previous = %from,
                generation,
                "dlock: using the master the sentinels name"
            );
            (conn, generation)
        };
        if let Some(hook) = self.on_rebuild.get() {
            hook();
        }
        if let Some(hook) = self.on_failover.get() {
            hook(conn, generation);
        }
        Ok(())
    }
}

/// The longest pause between two attempts of a re-resolution. Sentinels other than the one
/// that led the failover publish `+switch-master` only when they hear of it (up to 2 s later),
/// so the pause, not the announcement, often decides how soon the new master is used.
const MAX_FOLLOW_PAUSE: Duration = Duration::from_millis(250);

/// A re-resolution: asks the sentinels until they name a master (adopted), or until the master
/// in use proves to be one still (the sentinels are unreachable, it is not); pauses between
/// attempts (50 ms doubling to [`MAX_FOLLOW_PAUSE`], cut short by a `+switch-master`). Holds the slot only while
/// asking, so a dropped client ends it.
async fn follow_master(slot: Weak<ConnSlot>, nudge: Arc<tokio::sync::Notify>) {
    let mut pause = Duration::from_millis(50);
    loop {
        let Some(slot) = slot.upgrade() else {
            return;
        };
        let Factory::Sentinel(sentinel) = &slot.factory else {
            return;
        };
        let seen = slot.follower.requests.load(Ordering::Acquire);
        let found = match sentinel.spec.resolve().await {
            Ok(master) => {
                *lock(&sentinel.last_error) = None;
                slot.adopt(master)
                    .inspect_err(|e| tracing::warn!(error = %e, "dlock: cannot use the new master"))
                    .is_ok()
            }
            Err((kind, why)) => {
                tracing::debug!(error = %why, "dlock: the sentinels named no usable master yet");
                *lock(&sentinel.last_error) = Some((kind, why.into()));
                let current = lock(&sentinel.current).clone();
                match current {
                    Some(master) => sentinel.spec.still_master(&master).await,
                    None => false,
                }
            }
        };
        slot.follower
            .state
            .send_modify(|(_, attempts)| *attempts = attempts.wrapping_add(1));
        if found {
            let _task = lock(&slot.follower.task);
            if slot.follower.requests.load(Ordering::Acquire) == seen {
                slot.follower
                    .state
                    .send_modify(|(following, _)| *following = false);
                return;
            }
            // Asked again while this attempt ran (a switch announced meanwhile): once more.
            continue;
        }
        drop(slot);
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = nudge.notified() => {}
        }
        pause = (pause * 2).min(MAX_FOLLOW_PAUSE);
    }
}
