//! The connection dlock talks through.
//!
//! A standalone server is reached through the `redis` crate's [`ConnectionManager`]: one
//! multiplexed RESP3 connection shared by every lock of a client, reconnecting by itself, and
//! carrying the pub/sub wake-ups as RESP3 push messages (so waiting costs no extra connection).
//! Lock algorithms are written once against [`redis::aio::ConnectionLike`], which this type
//! implements by delegation; only subscribing differs per backend.

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::{Cmd, Pipeline, RedisFuture, Value};

/// A cheap-to-clone handle on the client's connection.
#[derive(Clone)]
pub(crate) enum Conn {
    /// One standalone server (or a proxy that looks like one).
    Single(ConnectionManager),
}

impl Conn {
    /// The command the release script publishes hand-offs with. `SPUBLISH` keeps a message on
    /// the key's shard in a cluster; a standalone server uses classic pub/sub.
    pub(crate) fn publish_command(&self) -> &'static str {
        match self {
            Self::Single(_) => "PUBLISH",
        }
    }

    /// Subscribes the connection to `channel`; resolves once the server confirmed it.
    pub(crate) async fn subscribe(&self, channel: &str) -> redis::RedisResult<()> {
        match self {
            Self::Single(cm) => cm.clone().subscribe(channel).await,
        }
    }

    /// Unsubscribes the connection from `channel` (harmless when not subscribed).
    pub(crate) async fn unsubscribe(&self, channel: &str) -> redis::RedisResult<()> {
        match self {
            Self::Single(cm) => cm.clone().unsubscribe(channel).await,
        }
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(cm) => cm.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(cm) => cm.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(cm) => cm.get_db(),
        }
    }
}
