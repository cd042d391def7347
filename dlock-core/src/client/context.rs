//! What every lock handle and guard of one client shares: the transport, the client's identity,
//! its token source, the registry of held leases, the watchdog, and whether it was shut down.
//! [`crate::Client`] is a handle on it; the lock kinds are written against it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::error::{Error, ErrorKind};
use crate::fence_epoch::FenceEpochs;
use crate::lease::HeldLocks;
use crate::lease::watchdog::Watchdog;
use crate::token::TokenSource;
use crate::transport::Transport;
use crate::transport::durable::Acknowledger;

/// The settings a client was built with.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub(crate) key_prefix: String,
    pub(crate) default_ttl: Duration,
}

/// The shared state of one client.
pub(crate) struct Context {
    pub(crate) transport: Arc<Transport>,
    pub(crate) config: Config,
    /// Names this client's wake channels (and nothing else).
    pub(crate) client_id: String,
    pub(crate) tokens: TokenSource,
    pub(crate) held: Arc<HeldLocks>,
    pub(crate) watchdog: Watchdog,
    /// Replica acknowledgement of grants (`MutexOptions::durability`), on a connection of its
    /// own.
    pub(crate) acks: Acknowledger,
    /// Which fence counters the fenced fast path may take without checking the clock.
    pub(crate) fence_epochs: FenceEpochs,
    /// Set by [`crate::Client::shutdown`]: no new acquisitions.
    closed: AtomicBool,
}

impl Context {
    pub(crate) fn new(
        transport: Arc<Transport>,
        config: Config,
        client_id: String,
        tokens: TokenSource,
    ) -> Self {
        Self {
            watchdog: Watchdog::new(transport.clone()),
            acks: Acknowledger::new(transport.slot().clone(), transport.command_timeout()),
            // Not on a cluster nor on the application's connection: dlock sees neither
            // replaced, so a connection's name proves nothing there (`fence_epoch.rs`).
            fence_epochs: FenceEpochs::new(
                &client_id,
                transport.slot().is_cluster() || transport.slot().is_borrowed(),
            ),
            transport,
            config,
            client_id,
            tokens,
            held: Arc::default(),
            closed: AtomicBool::new(false),
        }
    }

    /// Refuses new acquisitions from now on (the first step of a shutdown).
    pub(crate) fn close(&self) {
        // SeqCst, paired with the load in `is_closed`: see `Mutex::hold`.
        self.closed.store(true, Ordering::SeqCst);
    }

    /// Whether [`crate::Client::shutdown`] was called.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// The error of an acquisition attempted after [`crate::Client::shutdown`].
    pub(crate) fn closed_error(&self, name: &str) -> Error {
        Error::new(
            ErrorKind::Shutdown,
            format!("lock `{name}`: the client was shut down; build a new client to lock again"),
        )
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self {
            transport,
            config,
            client_id,
            tokens: _,
            held: _,
            watchdog,
            acks,
            fence_epochs: _,
            closed,
        } = self;
        f.debug_struct("Client")
            .field("config", config)
            .field("command_timeout", &transport.command_timeout())
            .field("client_id", client_id)
            .field("holder", &transport.holder)
            .field("waiters", &transport.waiters)
            .field("watchdog", watchdog)
            .field("acks", acks)
            .field("shut_down", &closed.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}
