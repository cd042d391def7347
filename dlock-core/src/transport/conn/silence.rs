//! What tells a silent connection (`rotate.rs`): when a connection was made and last answered,
//! and the replaced connections kept for the cleanups of what they carried, with how long.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::runtime::lock;

/// How many replaced connections are kept at most (each stays a few seconds).
const KEPT_AT_MOST: usize = 4;

/// When a connection was made, and when a request on it was last answered.
pub(crate) struct Life {
    born: Instant,
    /// Nanoseconds after `born` of the last answer, plus one (0: none yet).
    answered: AtomicU64,
}

impl Default for Life {
    fn default() -> Self {
        Self {
            born: Instant::now(),
            answered: AtomicU64::new(0),
        }
    }
}

impl Life {
    pub(super) fn answered(&self) {
        let after = u64::try_from(self.born.elapsed().as_nanos()).unwrap_or(u64::MAX - 1);
        self.answered.fetch_max(after + 1, Ordering::Relaxed);
    }

    /// Whether nothing was answered on the connection since `sent`.
    pub(super) fn silent_since(&self, sent: Instant) -> bool {
        match self.answered.load(Ordering::Relaxed) {
            0 => true,
            after => self.born + Duration::from_nanos(after - 1) < sent,
        }
    }
}

/// The replaced connections still kept, each with the instant it is let go.
pub(crate) struct Draining<C>(Mutex<Vec<(Instant, C)>>);

impl<C> Default for Draining<C> {
    fn default() -> Self {
        Self(Mutex::default())
    }
}

impl<C: Clone> Draining<C> {
    /// Keeps `conn` until `until` (the oldest goes when [`KEPT_AT_MOST`] are kept).
    pub(super) fn keep(&self, conn: C, until: Instant) {
        let mut kept = lock(&self.0);
        let now = Instant::now();
        kept.retain(|(until, _)| *until > now);
        if kept.len() >= KEPT_AT_MOST {
            kept.remove(0);
        }
        kept.push((until, conn));
    }

    /// The connections still kept, each with the instant it is let go.
    pub(super) fn kept(&self) -> Vec<(Instant, C)> {
        let mut kept = lock(&self.0);
        let now = Instant::now();
        kept.retain(|(until, _)| *until > now);
        kept.clone()
    }
}

/// The `TCP_USER_TIMEOUT` of a connection with this command timeout: data left unacknowledged
/// that long aborts the connection (`factory.rs`).
pub(crate) fn user_timeout(command_timeout: Duration) -> Duration {
    (command_timeout * 3).max(Duration::from_secs(3))
}

/// How long a replaced connection is kept, for a client with this command timeout.
pub(crate) fn kept_for(command_timeout: Duration) -> Duration {
    user_timeout(command_timeout) + command_timeout
}
