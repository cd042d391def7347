//! The connection dlock talks through.
//!
//! * A standalone server is reached through the `redis` crate's [`ConnectionManager`]: one
//!   multiplexed RESP3 connection shared by every lock of a client, reconnecting by itself, and
//!   carrying the wake-up messages as RESP3 push messages (so waiting costs no extra connection).
//! * A Redis Cluster is reached through the crate's async [`ClusterConnection`]: one
//!   multiplexed RESP3 connection per node, commands routed by key slot, wake-ups on sharded
//!   pub/sub (`SSUBSCRIBE`/`SPUBLISH`, Redis 7), which keeps each message on its key's shard.
//!
//! Lock algorithms are written once against [`redis::aio::ConnectionLike`], which this type
//! implements by delegation; every script's keys share the lock's hash tag, so each call goes to
//! one slot. Only subscribing, the publish command and how renewals are batched differ.

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::Slot;
use redis::{Cmd, Pipeline, RedisFuture, Value};

/// A cheap-to-clone handle on the client's connection.
#[derive(Clone)]
pub(crate) enum Conn {
    /// One standalone server (or a proxy that looks like one).
    Single(ConnectionManager),
    /// A Redis Cluster.
    Cluster(ClusterConnection),
}

impl Conn {
    /// How the release script publishes hand-offs to this client's waiters, as written in
    /// their queue entries: `P` for `PUBLISH`, `S` for `SPUBLISH` (a cluster: the message stays
    /// on the key's shard).
    pub(crate) fn publish_mode(&self) -> char {
        match self {
            Self::Single(_) => 'P',
            Self::Cluster(_) => 'S',
        }
    }

    /// Which script call a lock's renewal may share: any on a standalone server, only locks of
    /// the same slot on a cluster (a script may not touch keys of several slots).
    pub(crate) fn batch_group(&self, lock_key: &str) -> Option<Slot> {
        match self {
            Self::Single(_) => None,
            Self::Cluster(_) => Some(Slot::for_key(lock_key)),
        }
    }

    /// Subscribes the connection to `channel`; resolves once the server confirmed it. (Boxed:
    /// a rare request whose state should not sit inline in every waiter's future.)
    pub(crate) async fn subscribe(&self, channel: &str) -> redis::RedisResult<()> {
        match self {
            Self::Single(cm) => Box::pin(cm.clone().subscribe(channel)).await,
            Self::Cluster(cc) => Box::pin(cc.clone().ssubscribe(channel)).await,
        }
    }

    /// Unsubscribes the connection from `channel` (harmless when not subscribed).
    pub(crate) async fn unsubscribe(&self, channel: &str) -> redis::RedisResult<()> {
        match self {
            Self::Single(cm) => cm.clone().unsubscribe(channel).await,
            Self::Cluster(cc) => cc.clone().sunsubscribe(channel).await,
        }
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(cm) => cm.req_packed_command(cmd),
            Self::Cluster(cc) => cc.req_packed_command(cmd),
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
            Self::Cluster(cc) => cc.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(cm) => cm.get_db(),
            Self::Cluster(cc) => cc.get_db(),
        }
    }
}

/// The Redis connection of a [`crate::Client`], for your own commands next to the locks: a
/// fenced write to the storage you protect, a counter, the scheduler's bookkeeping.
///
/// It is the same auto-reconnecting connection (or cluster connection) the locks use, shared
/// and cheap to clone; use it with any `redis` API that takes a
/// [`redis::aio::ConnectionLike`]. dlock's command timeout is not applied to your commands:
/// wrap them in `tokio::time::timeout` where it matters. Avoid blocking commands (`BLPOP` …):
/// they would hold up every lock of the client.
///
/// ```no_run
/// # async fn demo(client: dlock_core::Client) -> redis::RedisResult<()> {
/// use redis::AsyncCommands;
/// let mut con = client.connection();
/// let visits: u64 = con.incr("visits", 1).await?;
/// # let _ = visits; Ok(()) }
/// ```
#[derive(Clone)]
pub struct Connection(pub(crate) Conn);

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.0 {
            Conn::Single(_) => "single",
            Conn::Cluster(_) => "cluster",
        };
        f.debug_tuple("Connection").field(&kind).finish()
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.0.req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.0.req_packed_commands(pipeline, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.0.get_db()
    }
}
