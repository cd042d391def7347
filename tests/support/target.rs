//! Where a process finds Redis — one server, or the nodes of a cluster — and a plain connection
//! to it for the test's own commands. Shared, through `#[path]`, by the tests
//! (`support::Backend`) and the worker process (`worker/main.rs`), which take part in the same
//! tests and must reach Redis the same way.

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

/// One standalone server, or some nodes of a Redis Cluster (the client discovers the others).
#[derive(Clone, Debug)]
pub(crate) enum Target {
    Single(String),
    Cluster(Vec<String>),
}

impl Target {
    /// A dlock client builder for this target, with dlock's defaults.
    pub(crate) fn builder(&self) -> dlock_core::ClientBuilder {
        match self {
            Self::Single(url) => dlock_core::Client::builder(url.as_str()),
            Self::Cluster(urls) => {
                dlock_core::Client::cluster_builder(urls.iter().map(String::as_str))
            }
        }
    }

    /// A new plain connection (not dlock's): for the test's own commands and assertions.
    pub(crate) async fn plain(&self) -> redis::RedisResult<Plain> {
        Ok(match self {
            Self::Single(url) => Plain::Single(
                redis::Client::open(url.as_str())?
                    .get_multiplexed_async_connection()
                    .await?,
            ),
            Self::Cluster(urls) => Plain::Cluster(
                redis::cluster::ClusterClient::new(urls.clone())?
                    .get_async_connection()
                    .await?,
            ),
        })
    }
}

/// A plain connection to either target: single-key commands and scripts go to the server (or
/// the node of the key's slot); multi-node commands (`KEYS`, `PUBSUB …`) are sent to every
/// master of a cluster and their answers combined, as the `redis` crate does.
#[derive(Clone)]
pub(crate) enum Plain {
    Single(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Plain {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(con) => con.req_packed_command(cmd),
            Self::Cluster(con) => con.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(con) => con.req_packed_commands(pipeline, offset, count),
            Self::Cluster(con) => con.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(con) => con.get_db(),
            Self::Cluster(con) => con.get_db(),
        }
    }
}
