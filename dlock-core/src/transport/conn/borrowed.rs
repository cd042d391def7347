//! The application's own connection ([`AppConnection`]): a client built with
//! [`crate::ClientBuilder::app_connection`] sends its commands on it, and keeps one connection
//! of its own for what only a connection's owner can have.
//!
//! Why a second connection: the `redis` crate hands a connection's RESP3 push messages (the
//! wake-ups of waiting `acquire` calls, and a `Disconnection` notice that makes every waiter
//! ask again) to the push sender set when that connection was built, and the application
//! built its connection without dlock's. So subscriptions go to dlock's own connection (a
//! connection manager, or a cluster connection, to the address given to the builder), built
//! lazily like any client's; everything else — acquire, release, renewal, every kind's
//! scripts, [`crate::Connection`] — goes to the application's.
//!
//! What dlock cannot do on a connection it does not own: name it and see it replaced, so the
//! fenced fast path runs `fence.lua` in every fenced acquire, as on a cluster (see
//! `fence_epoch.rs`); rebuild it, so a Sentinel client (which moves to a new master by building
//! a new connection) refuses it when it is built.

use redis::aio::{ConnectionLike, ConnectionManager, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

/// An application's redis-rs connection that a [`crate::Client`] runs its commands on: a
/// [`ConnectionManager`], a [`MultiplexedConnection`] or a cluster's [`ClusterConnection`]
/// (each converts with `.into()`); see [`crate::ClientBuilder::app_connection`].
///
/// These are the types of the `redis` crate that dlock re-exports ([`crate::redis`], redis-rs
/// major version 1): the application must build its connection with that same major version
/// (depend on `redis = "1"`, or use `dlock_core::redis`), or the conversion does not compile.
#[derive(Clone)]
pub struct AppConnection(pub(crate) AppConn);

/// The connection inside an [`AppConnection`].
#[derive(Clone)]
pub(crate) enum AppConn {
    Manager(ConnectionManager),
    Multiplexed(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl AppConnection {
    /// Whether this is a cluster connection.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.0, AppConn::Cluster(_))
    }

    /// What kind of connection it is, for errors and `Debug`.
    pub(crate) fn kind(&self) -> &'static str {
        match self.0 {
            AppConn::Manager(_) => "ConnectionManager",
            AppConn::Multiplexed(_) => "MultiplexedConnection",
            AppConn::Cluster(_) => "ClusterConnection",
        }
    }
}

impl From<ConnectionManager> for AppConnection {
    fn from(conn: ConnectionManager) -> Self {
        Self(AppConn::Manager(conn))
    }
}

impl From<MultiplexedConnection> for AppConnection {
    fn from(conn: MultiplexedConnection) -> Self {
        Self(AppConn::Multiplexed(conn))
    }
}

impl From<ClusterConnection> for AppConnection {
    fn from(conn: ClusterConnection) -> Self {
        Self(AppConn::Cluster(conn))
    }
}

impl std::fmt::Debug for AppConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("AppConnection").field(&self.kind()).finish()
    }
}

impl ConnectionLike for AppConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Manager(c) => c.req_packed_command(cmd),
            Self::Multiplexed(c) => c.req_packed_command(cmd),
            Self::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Manager(c) => c.req_packed_commands(pipeline, offset, count),
            Self::Multiplexed(c) => c.req_packed_commands(pipeline, offset, count),
            Self::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Manager(c) => c.get_db(),
            Self::Multiplexed(c) => c.get_db(),
            Self::Cluster(c) => c.get_db(),
        }
    }
}

impl AppConn {
    /// One command on the connection. The future owns a clone of it (a cheap handle): the
    /// connection is shared with the application, so it is never lent mutably.
    pub(super) fn command<'a>(&self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let mut conn = self.clone();
        Box::pin(async move { conn.req_packed_command(cmd).await })
    }

    /// A pipeline on the connection (see [`AppConn::command`]).
    pub(super) fn commands<'a>(
        &self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let mut conn = self.clone();
        Box::pin(async move { conn.req_packed_commands(pipeline, offset, count).await })
    }

    /// The cluster connection, for requests routed to each master.
    pub(super) fn cluster(&self) -> Option<&ClusterConnection> {
        match self {
            Self::Cluster(cc) => Some(cc),
            Self::Manager(_) | Self::Multiplexed(_) => None,
        }
    }
}
