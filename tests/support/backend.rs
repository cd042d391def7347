//! The backends a behaviour runs on — one `redis-server`, or a 3-master Redis Cluster — and
//! [`backend_tests!`], which runs a test written once on both.
//!
//! What differs between the two is kept here, so that a test states its behaviour once: where
//! a key lives (the one server, or the node of its slot: that is where faults are injected),
//! how dlock publishes wake-ups (`PUBLISH`, or `SPUBLISH` on the key's shard), and how the
//! server-side counters of every node add up. Every key of one lock shares the hash tag
//! `{name}`, so a test's raw commands on `dlock:{name}…` work on both as written.

use std::time::Duration;

use dlock_core::{Client, ClientBuilder};
use dlock_testkit::{RedisCluster, RedisServer};
use futures_util::StreamExt;
use redis::{PushKind, Value};

use super::target::{Plain, Target};

/// Declares tests once and runs each on both backends, as `<name>::single` and
/// `<name>::cluster`, each on its own new servers (a test owns its backend, nothing is shared).
///
/// ```ignore
/// backend_tests!(
///     /// What it checks.
///     async fn release_frees_the_lock(backend: Backend) { … }
///
///     /// Logs are captured per thread: a current-thread runtime sees all of dlock's.
///     #[flavor = "current_thread"]
///     async fn a_self_wait_is_reported(backend: Backend) { … }
///
///     /// Builds (and ends) its own runtimes.
///     fn a_client_outlives_its_runtime(backend: Backend) { … }
///
///     /// Known to fail on one backend: the reason names the bug (`cargo test -- --ignored`).
///     #[ignore_cluster = "dlock bug: …"]
///     async fn … (backend: Backend) { … }
/// );
/// ```
///
/// `async fn`s run on `#[tokio::test(flavor = "multi_thread", worker_threads = 2)]` unless
/// they ask for a current-thread runtime; `#[ignore = "…"]` ignores both variants. The
/// definitions are parenthesised items, which rustfmt formats (it leaves `{ }` macro bodies
/// alone); the test function itself sits next to a module of the same name, which holds the
/// two `#[test]`s calling it.
macro_rules! backend_tests {
    // One generated test: `$backend` is `single` or `cluster`, the brackets hold the flavor and
    // the reason to ignore it, if any.
    (@async $name:ident $backend:ident [] [$($why:tt)?]) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        $(#[ignore = $why])?
        async fn $backend() {
            super::$name($crate::support::Backend::$backend()).await;
        }
    };
    (@async $name:ident $backend:ident ["current_thread"] [$($why:tt)?]) => {
        #[tokio::test]
        $(#[ignore = $why])?
        async fn $backend() {
            super::$name($crate::support::Backend::$backend()).await;
        }
    };
    (@sync $name:ident $backend:ident [$($why:tt)?]) => {
        #[test]
        $(#[ignore = $why])?
        fn $backend() {
            super::$name($crate::support::Backend::$backend());
        }
    };
    () => {};
    (
        $(#[doc = $doc:literal])*
        $(#[flavor = $flavor:tt])?
        $(#[ignore = $both:tt])?
        $(#[ignore_cluster = $cluster:tt])?
        async fn $name:ident($($param:tt)*) $body:block
        $($rest:tt)*
    ) => {
        $(#[doc = $doc])*
        async fn $name($($param)*) $body

        mod $name {
            $crate::support::backend_tests!(@async $name single [$($flavor)?] [$($both)?]);
            $crate::support::backend_tests!(
                @async $name cluster [$($flavor)?] [$($both)? $($cluster)?]
            );
        }

        $crate::support::backend_tests!($($rest)*);
    };
    (
        $(#[doc = $doc:literal])*
        $(#[ignore = $both:tt])?
        $(#[ignore_cluster = $cluster:tt])?
        fn $name:ident($($param:tt)*) $body:block
        $($rest:tt)*
    ) => {
        $(#[doc = $doc])*
        fn $name($($param)*) $body

        mod $name {
            $crate::support::backend_tests!(@sync $name single [$($both)?]);
            $crate::support::backend_tests!(@sync $name cluster [$($both)? $($cluster)?]);
        }

        $crate::support::backend_tests!($($rest)*);
    };
}
pub(crate) use backend_tests;

/// One test's Redis: a standalone server, or a Redis Cluster of 3 masters.
pub(crate) enum Backend {
    Single(RedisServer),
    Cluster(RedisCluster),
}

impl Backend {
    /// A new standalone server.
    pub(crate) fn single() -> Backend {
        Backend::Single(
            RedisServer::start().unwrap_or_else(|e| panic!("could not start redis-server: {e}")),
        )
    }

    /// A new cluster of 3 masters, every slot served.
    pub(crate) fn cluster() -> Backend {
        Backend::Cluster(
            RedisCluster::start().unwrap_or_else(|e| panic!("could not start a cluster: {e}")),
        )
    }

    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Backend::Cluster(_))
    }

    /// Where a process finds this backend.
    pub(crate) fn target(&self) -> Target {
        match self {
            Backend::Single(server) => Target::Single(server.url()),
            Backend::Cluster(cluster) => Target::Cluster(cluster.urls()),
        }
    }

    /// The `dlock-test-worker` argument naming this backend: `url=…` or `cluster=…,…,…`.
    pub(crate) fn worker_arg(&self) -> String {
        match self.target() {
            Target::Single(url) => format!("url={url}"),
            Target::Cluster(urls) => format!("cluster={}", urls.join(",")),
        }
    }

    /// A client builder for this backend with dlock's defaults (for tests that set their own
    /// timeouts).
    pub(crate) fn builder(&self) -> ClientBuilder {
        self.target().builder()
    }

    /// A client with a short command timeout, so failures show quickly.
    pub(crate) fn client(&self) -> Client {
        self.builder()
            .command_timeout(Duration::from_secs(2))
            .build()
            .expect("client")
    }

    /// A plain connection for assertions on the raw Redis state.
    pub(crate) async fn raw(&self) -> Plain {
        self.target().plain().await.expect("raw connection")
    }

    /// Every server of the backend: the one, or each node of the cluster.
    pub(crate) fn servers(&self) -> &[RedisServer] {
        match self {
            Backend::Single(server) => std::slice::from_ref(server),
            Backend::Cluster(cluster) => cluster.nodes(),
        }
    }

    /// The server that holds `key`: the one, or the node serving the key's slot. Faults
    /// injected there (pause) hit the lock whose key it is.
    pub(crate) fn server_of(&self, key: &str) -> &RedisServer {
        match self {
            Backend::Single(server) => server,
            Backend::Cluster(cluster) => &cluster.nodes()[node_of(cluster, key)],
        }
    }

    /// Kills (SIGKILL) the server that holds `key`; on a cluster, only that node: the locks of
    /// other slots live on.
    pub(crate) fn kill(&mut self, key: &str) {
        match self {
            Backend::Single(server) => server.kill(),
            Backend::Cluster(cluster) => {
                let node = node_of(cluster, key);
                cluster.nodes_mut()[node].kill();
            }
        }
    }

    /// Restarts the server that holds `key` with empty data, as after a crash without
    /// persistence; a cluster node comes back as itself, serving its slots (empty), and the
    /// cluster is whole again when this returns.
    pub(crate) fn restart(&mut self, key: &str) {
        match self {
            Backend::Single(server) => server.restart(),
            Backend::Cluster(cluster) => {
                let node = node_of(cluster, key);
                cluster.restart_node(node)
            }
        }
        .unwrap_or_else(|e| panic!("restart: {e}"));
    }

    /// The publish mode a client of this backend writes into its queue entries: `P`
    /// (`PUBLISH`) or `S` (`SPUBLISH`, which keeps a cluster's wake-up on the key's shard).
    pub(crate) fn publish_mode(&self) -> &'static str {
        if self.is_cluster() { "S" } else { "P" }
    }

    /// A subscription to `channel` as a client of this backend listens for its wake-ups:
    /// `SUBSCRIBE`, or `SSUBSCRIBE` on a cluster. Subscribed when this returns.
    pub(crate) async fn subscribe(&self, channel: &str) -> Subscription {
        match self.target() {
            Target::Single(url) => {
                let mut pubsub = redis::Client::open(url)
                    .unwrap()
                    .get_async_pubsub()
                    .await
                    .unwrap();
                pubsub.subscribe(channel).await.unwrap();
                Subscription::Single(pubsub.into_on_message())
            }
            Target::Cluster(urls) => {
                let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
                let mut con = redis::cluster::ClusterClientBuilder::new(urls)
                    .use_protocol(redis::ProtocolVersion::RESP3)
                    .push_sender(tx)
                    .build()
                    .unwrap()
                    .get_async_connection()
                    .await
                    .unwrap();
                con.ssubscribe(channel).await.unwrap();
                Subscription::Cluster(con, rx)
            }
        }
    }

    /// The wake channels matching `pattern` that some client is subscribed to (`PUBSUB
    /// CHANNELS`, or `PUBSUB SHARDCHANNELS` on every node of a cluster).
    pub(crate) async fn wake_channels(&self, con: &mut Plain, pattern: &str) -> Vec<String> {
        redis::cmd("PUBSUB")
            .arg(self.pubsub_kind("CHANNELS"))
            .arg(pattern)
            .query_async(con)
            .await
            .unwrap()
    }

    /// How many connections are subscribed to `channel` (`PUBSUB NUMSUB`, or `SHARDNUMSUB`
    /// summed over the nodes of a cluster).
    pub(crate) async fn subscribers(&self, con: &mut Plain, channel: &str) -> u64 {
        let counts: Vec<(String, u64)> = redis::cmd("PUBSUB")
            .arg(self.pubsub_kind("NUMSUB"))
            .arg(channel)
            .query_async(con)
            .await
            .unwrap();
        counts.iter().map(|(_, n)| n).sum()
    }

    fn pubsub_kind(&self, what: &str) -> String {
        if self.is_cluster() {
            format!("SHARD{what}")
        } else {
            what.to_owned()
        }
    }

    /// How many `EVALSHA` calls the servers have run, summed over every node.
    pub(crate) async fn evalsha_calls(&self) -> u64 {
        self.calls("evalsha").await
    }

    /// How many times the servers ran `command` (lower case; commands run by scripts
    /// included), summed over every node, from `INFO commandstats`.
    pub(crate) async fn calls(&self, command: &str) -> u64 {
        let prefix = format!("cmdstat_{command}:calls=");
        let mut total = 0;
        for server in self.servers() {
            let mut con = redis::Client::open(server.url())
                .unwrap()
                .get_multiplexed_async_connection()
                .await
                .unwrap();
            let info: String = redis::cmd("INFO")
                .arg("commandstats")
                .query_async(&mut con)
                .await
                .unwrap();
            total += info
                .lines()
                .find_map(|l| l.strip_prefix(prefix.as_str()))
                .and_then(|rest| rest.split(',').next())
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0);
        }
        total
    }
}

/// A subscription from [`Backend::subscribe`].
pub(crate) enum Subscription {
    Single(redis::aio::PubSubStream),
    Cluster(
        redis::cluster_async::ClusterConnection,
        tokio::sync::mpsc::UnboundedReceiver<redis::PushInfo>,
    ),
}

impl Subscription {
    /// The payload of the next message published on the channel.
    pub(crate) async fn next_message(&mut self) -> String {
        match self {
            Subscription::Single(messages) => {
                let message = messages.next().await.expect("subscribed");
                message.get_payload().unwrap()
            }
            Subscription::Cluster(_con, pushes) => loop {
                let push = pushes.recv().await.expect("subscribed");
                // Confirmations (`ssubscribe`) come through here too: skip them.
                if push.kind == PushKind::SMessage {
                    let [_channel, payload]: [Value; 2] = push.data.try_into().unwrap();
                    break redis::from_redis_value(payload).unwrap();
                }
            },
        }
    }
}

/// The index of the node of `cluster` that serves the slot of `key`, as the cluster sees it.
fn node_of(cluster: &RedisCluster, key: &str) -> usize {
    let nodes = cluster.nodes();
    // Any live node answers (one may have been killed or paused already).
    let mut con = nodes
        .iter()
        .filter(|node| node.pid().is_some())
        .find_map(|node| node.connection().ok())
        .expect("a live node");
    let slot: u16 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(&mut con)
        .unwrap();
    let table: String = redis::cmd("CLUSTER").arg("NODES").query(&mut con).unwrap();
    // `<id> <ip:port@bus> <flags> <master> <ping> <pong> <epoch> <state> <slot ranges…>`
    let port = table
        .lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let serves = fields.get(8..)?.iter().any(|range| {
                let (first, last) = range.split_once('-').unwrap_or((range, range));
                match (first.parse::<u16>(), last.parse::<u16>()) {
                    (Ok(first), Ok(last)) => (first..=last).contains(&slot),
                    _ => false, // a slot in migration: `[…]`
                }
            });
            let address = fields.get(1)?.split('@').next()?;
            serves.then(|| address.rsplit(':').next()?.parse::<u16>().ok())?
        })
        .unwrap_or_else(|| panic!("no node serves slot {slot}:\n{table}"));
    nodes
        .iter()
        .position(|node| node.port() == port)
        .expect("a node of this cluster")
}
