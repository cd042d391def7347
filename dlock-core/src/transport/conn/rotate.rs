//! A client's own connection that went silent is replaced, and kept for the cleanups of
//! what it carried.
//!
//! A request unanswered within the command timeout, on a connection that answered nothing since
//! the request was sent, says the connection is silent: a half-open link (packets dropped, no
//! reset), a paused server, a host gone. The `redis` crate's connection manager keeps such a
//! connection (it reconnects after errors, not after timeouts), and once the link heals, TCP's
//! retransmission back-off decides when it is heard again: the retransmission timer doubles from
//! 200 ms, so a link healed 2.6 s into a cut is heard only at the next retransmission, up to the
//! connection's `TCP_USER_TIMEOUT` later. So the slot replaces it: new requests go to a new
//! connection under a new generation (the failover hook subscribes the wake channels there, and
//! every waiter asks again), which connects as soon as the link is back.
//!
//! The old connection is not closed: what it carried may still run on the server — an abandoned
//! acquire's `SET` among it — and the cleanup of such a request (a background release,
//! owner-checked) must run after it. Only the same connection orders the two, so background
//! releases are also sent on the connections kept here, as `EVAL` (the server may not know the
//! script: the `NOSCRIPT` retry of an `EVALSHA` would come after its timeout, and never be sent).
//! A connection is kept while its kernel may still deliver what it holds (its
//! `TCP_USER_TIMEOUT`) and one command timeout more, then let go.
//!
//! A kept connection is still subscribed to the wake channels, so a grant may arrive twice: the
//! waiters' registry ignores a grant whose waiter already took it (`transport/wait.rs`), which
//! would otherwise be released as an orphan under its new holder.
//!
//! A Sentinel client's connection is replaced the same way, to the master in use (the timeout
//! also has it ask the sentinels, `follow.rs`, which move it to another master if they name
//! one). A cluster connection manages its nodes' connections itself, and the application's
//! connection is the application's: neither is replaced.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::silence::kept_for;
use super::{ConnSlot, Factory, Live};
use crate::runtime::lock;
use crate::transport::conn::Conn;

impl ConnSlot {
    /// A request on the connection of `generation` was answered (a reply, or the server's
    /// error): the connection is not silent.
    pub(crate) fn answered(&self, generation: u64) {
        let live = self.live.load();
        if live.generation == generation {
            live.life.answered();
        }
    }

    /// A request sent at `sent` on the connection of `generation` got no answer within
    /// `limit`: a standalone or Sentinel client's own connection that answered nothing since is
    /// replaced (see the module docs). Runs the failover hook for the new connection.
    pub(crate) fn timed_out(&self, generation: u64, sent: Instant, limit: Duration) {
        if matches!(self.factory, Factory::Cluster(..)) || self.borrowed.is_some() {
            return;
        }
        let Some((conn, generation)) = self.replace_silent(generation, sent, limit) else {
            return;
        };
        tracing::info!(
            generation,
            "dlock: no answer on the connection within the command timeout; new requests go \
             to a new one, the old one is kept for the cleanups of what it carried"
        );
        if let Some(hook) = self.on_failover.get() {
            hook(conn, generation);
        }
    }

    fn replace_silent(
        &self,
        generation: u64,
        sent: Instant,
        limit: Duration,
    ) -> Option<(Conn, u64)> {
        let _one_at_a_time = lock(&self.rebuilding);
        let live = self.live.load();
        if live.generation != generation
            || live.probe.is_finished()
            || !live.life.silent_since(sent)
        {
            return None;
        }
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let conn = self.factory.build().ok()?;
        let generation = self.generations.fetch_add(1, Ordering::Relaxed) + 1;
        let fresh = Live::new(
            conn.clone(),
            generation,
            runtime.spawn(std::future::pending()),
        );
        let old = self.live.swap(Arc::new(fresh));
        self.draining
            .keep(old.conn.clone(), Instant::now() + kept_for(limit));
        Some((conn, generation))
    }

    /// The replaced connections still kept, each with the instant it is let go.
    pub(crate) fn kept(&self) -> Vec<(Instant, Conn)> {
        self.draining.kept()
    }
}
