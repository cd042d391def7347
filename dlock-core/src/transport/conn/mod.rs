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
//!
//! * A master watched by Redis Sentinel is reached like a standalone server, at the address
//!   the sentinels name (see `transport/sentinel.rs`). [`ConnSlot`] follows a failover (`transport/conn/follow.rs`):
//!   on a dropped connection, a `READONLY` reply, a timed-out request or a sentinel's
//!   `+switch-master` it asks the sentinels again, and when they name another master it builds a connection to it under a new
//!   generation, exactly as it does when a runtime ended, then runs the failover hook (the
//!   client re-subscribes wake channels there and nudges every waiter to ask again).
//!
//! * The application's own connection ([`AppConnection`], `transport/conn/borrowed.rs`): its
//!   commands go there, its subscriptions to a connection of its own (one of the above, built
//!   by the same factory), which alone carries the wake-ups.
//!
//! Both run their I/O on tasks of the runtime that created them, so [`ConnSlot`] rebuilds the
//! connection in the current runtime when that one has ended (dlock's own connection only: the
//! application's stays the application's).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};
use tokio::task::JoinHandle;

use crate::error::{Error, ErrorKind, Result};
use crate::runtime::lock;
use crate::transport::sentinel::{Resolved, SentinelSpec};

mod borrowed;
mod explain;
mod factory;
mod follow;
mod rotate;
pub(crate) mod silence;

use borrowed::AppConn;
pub use borrowed::AppConnection;

/// A cheap-to-clone handle on the client's connection.
#[derive(Clone)]
pub(crate) enum Conn {
    /// One standalone server (or a proxy that looks like one).
    Single(ConnectionManager),
    /// A Redis Cluster.
    Cluster(ClusterConnection),
    /// A Sentinel client whose master is not known yet: every request fails at once, saying
    /// why (the last resolution's error).
    Unresolved(Arc<str>),
    /// The application's connection for commands, with dlock's own for subscriptions.
    Borrowed(Arc<Borrowed>),
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Single(_) => "Conn::Single",
            Self::Cluster(_) => "Conn::Cluster",
            Self::Unresolved(_) => "Conn::Unresolved",
            Self::Borrowed(_) => "Conn::Borrowed",
        })
    }
}

/// A client's two connections when it runs on the application's: commands on `commands`,
/// subscriptions on `pushes` (dlock's own, never [`Conn::Borrowed`] itself).
pub(crate) struct Borrowed {
    commands: AppConn,
    pushes: Conn,
}

impl Borrowed {
    /// The pair, behind the `Arc` that keeps [`Conn`] as small as its other variants (a
    /// multiplexed connection is ten words).
    fn wrap(commands: &AppConnection, pushes: Conn) -> Conn {
        Conn::Borrowed(Arc::new(Self {
            commands: commands.0.clone(),
            pushes,
        }))
    }
}

/// The error of a request on a Sentinel client that knows no master (an I/O error to the
/// `redis` crate, so that it is classified as a connection error).
fn unresolved(why: &str) -> redis::RedisError {
    (
        redis::ErrorKind::Io,
        "no master known",
        format!("the master is not known: {why}"),
    )
        .into()
}

impl Conn {
    /// Subscribes the connection to `channel`; resolves once the server confirmed it. (Boxed:
    /// a rare request whose state should not sit inline in every waiter's future.)
    pub(crate) async fn subscribe(&self, channel: &str) -> redis::RedisResult<()> {
        match self {
            Self::Single(cm) => Box::pin(cm.clone().subscribe(channel)).await,
            Self::Cluster(cc) => Box::pin(cc.clone().ssubscribe(channel)).await,
            Self::Unresolved(why) => Err(unresolved(why)),
            // Boxed: the recursion needs it.
            Self::Borrowed(pair) => Box::pin(pair.pushes.subscribe(channel)).await,
        }
    }

    /// Unsubscribes the connection from `channel` (harmless when not subscribed).
    pub(crate) async fn unsubscribe(&self, channel: &str) -> redis::RedisResult<()> {
        match self {
            Self::Single(cm) => cm.clone().unsubscribe(channel).await,
            Self::Cluster(cc) => cc.clone().sunsubscribe(channel).await,
            Self::Unresolved(_) => Ok(()),
            Self::Borrowed(pair) => Box::pin(pair.pushes.unsubscribe(channel)).await,
        }
    }

    /// The cluster connection that commands go to, for requests routed to each master.
    pub(crate) fn cluster(&self) -> Option<&ClusterConnection> {
        match self {
            Self::Cluster(cc) => Some(cc),
            Self::Borrowed(pair) => pair.commands.cluster(),
            Self::Single(_) | Self::Unresolved(_) => None,
        }
    }
}

/// How the client's TCP connections are set up.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConnSettings {
    pub(crate) command_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) nodelay: bool,
}

/// How to (re)build the connection: everything but the runtime it runs in.
pub(crate) enum Factory {
    Single(redis::Client, ConnectionManagerConfig),
    /// The cluster client, and its seed nodes (with the client's credentials and TCP settings)
    /// for [`ConnSlot::explain`].
    Cluster(redis::cluster::ClusterClient, Vec<redis::ConnectionInfo>),
    /// A master found through Redis Sentinel: how to ask for it, the master in use (none before
    /// the first resolution) and the last resolution's error.
    Sentinel(Box<SentinelFactory>),
}

/// How to (re)build the connection to a master watched by sentinels.
pub(crate) struct SentinelFactory {
    spec: Arc<SentinelSpec>,
    config: ConnectionManagerConfig,
    current: Mutex<Option<Resolved>>,
    last_error: Mutex<Option<(ErrorKind, Arc<str>)>>,
}

/// The connection of the runtime it was built in, and a probe that tells whether that runtime
/// still runs.
struct Live {
    conn: Conn,
    generation: u64,
    /// A task that never ends by itself: finished means its runtime has shut down, and with it
    /// the connection's own tasks (its reader, its reconnection, its push forwarding).
    probe: JoinHandle<()>,
    /// When it was made, and when a request on it was last answered (`transport/conn/rotate.rs`).
    life: silence::Life,
}

impl Live {
    fn new(conn: Conn, generation: u64, probe: JoinHandle<()>) -> Self {
        Self {
            conn,
            generation,
            probe,
            life: silence::Life::default(),
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.probe.abort();
    }
}

/// The client's connection, rebuilt in the current runtime when the runtime it was built in has
/// ended (a client kept across `#[tokio::test]`s, or in a static). The `redis` crate's
/// connections run their I/O on tasks of the runtime that created them; a connection whose
/// runtime is gone would fail every request (the first with "broken pipe") and never deliver a
/// wake-up again.
pub(crate) struct ConnSlot {
    factory: Factory,
    /// The application's connection, which commands go to (the factory's connection then
    /// carries only subscriptions).
    borrowed: Option<AppConnection>,
    live: ArcSwap<Live>,
    generations: AtomicU64,
    rebuilding: Mutex<()>,
    single: bool,
    /// Run after a rebuild: background tasks that died with the old runtime start again here.
    on_rebuild: OnceLock<Box<dyn Fn() + Send + Sync>>,
    /// The last explanation of a cluster connection that could not be made, and when it was
    /// found (reused for [`EXPLANATION_REUSE`], so that an outage does not double every
    /// failing request's connection attempts).
    explained: Mutex<Option<(Instant, Explanation)>>,
    /// Run after a Sentinel client moved to another master, with the new connection and its
    /// generation: wake channels are subscribed there and every waiter asks again.
    on_failover: OnceLock<FailoverHook>,
    /// A Sentinel client's following of its master (idle for other clients).
    follower: Follower,
    /// Connections replaced after they went silent, kept for the cleanups of what they carried
    /// (`transport/conn/rotate.rs`).
    draining: silence::Draining<Conn>,
    /// What explains a failed request (`transport/conn/explain.rs`).
    diagnosis: crate::transport::tls_probe::Diagnosis,
}

/// What runs after a Sentinel client moved to another master.
pub(crate) type FailoverHook = Box<dyn Fn(Conn, u64) + Send + Sync>;

/// A Sentinel client's following of its master: one re-resolution at a time, and a listener of
/// the sentinels' `+switch-master`. Both are aborted with the slot.
struct Follower {
    /// The re-resolution in flight, if any.
    task: Mutex<Option<JoinHandle<()>>>,
    /// The `+switch-master` listener.
    watcher: Mutex<Option<JoinHandle<()>>>,
    /// Cuts short the pause of a re-resolution between two attempts.
    nudge: Arc<tokio::sync::Notify>,
    /// Re-resolutions asked for; one that finds a request newer than its attempt asks again.
    requests: AtomicU64,
    /// Whether a re-resolution runs, and how many attempts ended: requests wait (bounded by
    /// their timeout) for the master before they are sent.
    state: tokio::sync::watch::Sender<(bool, u64)>,
}

impl Default for Follower {
    fn default() -> Self {
        Self {
            task: Mutex::default(),
            watcher: Mutex::default(),
            nudge: Arc::default(),
            requests: AtomicU64::new(0),
            state: tokio::sync::watch::Sender::new((false, 0)),
        }
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        for task in [&self.task, &self.watcher] {
            if let Some(task) = lock(task).take() {
                task.abort();
            }
        }
    }
}

/// What asking the seed nodes found: a better error (its kind and text), or nothing to add.
pub(super) type Explanation = Option<(ErrorKind, String)>;

/// How long an explanation of a missing cluster connection is reused.
pub(super) const EXPLANATION_REUSE: Duration = Duration::from_secs(2);

impl ConnSlot {
    /// Builds the first connection (lazily connecting) in the current runtime; with
    /// `borrowed`, commands go to the application's connection instead (the factory's then
    /// carries subscriptions only).
    pub(crate) fn new(factory: Factory, borrowed: Option<AppConnection>) -> Result<Self> {
        let conn = factory.build()?;
        let live = Live::new(
            match &borrowed {
                Some(app) => Borrowed::wrap(app, conn),
                None => conn,
            },
            1,
            tokio::spawn(std::future::pending()),
        );
        Ok(Self {
            single: !matches!(factory, Factory::Cluster(..)),
            factory,
            borrowed,
            live: ArcSwap::from_pointee(live),
            generations: AtomicU64::new(1),
            rebuilding: Mutex::new(()),
            on_rebuild: OnceLock::new(),
            explained: Mutex::new(None),
            on_failover: OnceLock::new(),
            follower: Follower::default(),
            draining: silence::Draining::default(),
            diagnosis: crate::transport::tls_probe::Diagnosis::default(),
        })
    }

    /// Sets what runs after a Sentinel client moved to another master (once, when the client
    /// is built).
    pub(crate) fn set_on_failover(&self, hook: FailoverHook) {
        let _ = self.on_failover.set(hook);
    }

    /// Sets what runs after each rebuild (once, when the client is built).
    pub(crate) fn set_on_rebuild(&self, hook: Box<dyn Fn() + Send + Sync>) {
        let _ = self.on_rebuild.set(hook);
    }

    /// The connection to use now and its generation (which changes with every rebuild, so that
    /// subscriptions made on an older connection are known to be gone).
    ///
    /// # Errors
    /// Only when the connection must be rebuilt and cannot be (outside a runtime, or the
    /// `redis` crate refuses the configuration it accepted before).
    pub(crate) fn conn(&self) -> Result<(Conn, u64)> {
        {
            let live = self.live.load();
            if !live.probe.is_finished() {
                return Ok((live.conn.clone(), live.generation));
            }
        }
        self.rebuild()
    }

    fn rebuild(&self) -> Result<(Conn, u64)> {
        let rebuilt = self.rebuild_locked()?;
        // Outside the lock: the hook may start tasks that make requests.
        if let (true, Some(hook)) = (rebuilt.2, self.on_rebuild.get()) {
            hook();
        }
        Ok((rebuilt.0, rebuilt.1))
    }

    /// The rebuild itself; `true` when this call made the new connection.
    fn rebuild_locked(&self) -> Result<(Conn, u64, bool)> {
        let _one_at_a_time = lock(&self.rebuilding);
        let live = self.live.load();
        if !live.probe.is_finished() {
            return Ok((live.conn.clone(), live.generation, false));
        }
        let probe = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::no_runtime("a dlock request"))?
            .spawn(std::future::pending());
        let generation = self.generations.fetch_add(1, Ordering::Relaxed) + 1;
        let conn = self.factory.build()?;
        let fresh = Live::new(
            match &self.borrowed {
                Some(app) => Borrowed::wrap(app, conn),
                None => conn,
            },
            generation,
            probe,
        );
        let conn = fresh.conn.clone();
        self.live.store(std::sync::Arc::new(fresh));
        tracing::debug!(
            generation,
            "dlock: the connection's runtime ended; reconnecting in this one"
        );
        Ok((conn, generation, true))
    }

    /// How to open a connection of its own to the server the client's connection reaches, for
    /// a request that blocks its connection (`WAIT`, see `transport/durable.rs`); `None` on a cluster.
    pub(crate) fn dedicated_client(&self) -> Option<redis::Client> {
        match &self.factory {
            Factory::Single(client, _) => Some(client.clone()),
            // The master in use now (a failover changes it; a round that ran into one is
            // retried on a new connection by `transport/durable.rs`).
            Factory::Sentinel(sentinel) => lock(&sentinel.current)
                .clone()
                .and_then(|master| redis::Client::open(master.info).ok()),
            Factory::Cluster(..) => None,
        }
    }

    /// Whether this is a Redis Cluster connection.
    pub(crate) fn is_cluster(&self) -> bool {
        !self.single
    }

    /// Whether commands go to the application's connection ([`AppConnection`]), which dlock
    /// neither names nor sees replaced.
    pub(crate) fn is_borrowed(&self) -> bool {
        self.borrowed.is_some()
    }

    /// How the release script publishes hand-offs to this client's waiters, as written in
    /// their queue entries: `P` for `PUBLISH`, `S` for `SPUBLISH` (a cluster: the message stays
    /// on the key's shard).
    pub(crate) fn publish_mode(&self) -> char {
        if self.single { 'P' } else { 'S' }
    }

    /// The command that reaches subscribers on this connection's kind of deployment (see
    /// [`Conn::subscribe`]): `PUBLISH`, or `SPUBLISH` on a cluster.
    pub(crate) fn publish_command(&self) -> &'static str {
        if self.single { "PUBLISH" } else { "SPUBLISH" }
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(cm) => cm.req_packed_command(cmd),
            Self::Cluster(cc) => cc.req_packed_command(cmd),
            Self::Borrowed(pair) => pair.commands.command(cmd),
            Self::Unresolved(why) => {
                let error = unresolved(why);
                Box::pin(async move { Err(error) })
            }
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
            Self::Borrowed(pair) => pair.commands.commands(pipeline, offset, count),
            Self::Unresolved(why) => {
                let error = unresolved(why);
                Box::pin(async move { Err(error) })
            }
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(cm) => cm.get_db(),
            Self::Cluster(cc) => cc.get_db(),
            Self::Borrowed(pair) => pair.commands.get_db(),
            Self::Unresolved(_) => 0,
        }
    }
}

/// The Redis connection of a [`crate::Client`], for your own commands next to the locks: a
/// fenced write to the storage you protect, a counter, the scheduler's bookkeeping.
///
/// It is the same auto-reconnecting connection (or cluster connection) the locks use — on a
/// client built with [`crate::ClientBuilder::app_connection`], the application's — shared
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
pub struct Connection {
    slot: std::sync::Arc<ConnSlot>,
    conn: Conn,
}

impl Connection {
    pub(crate) fn new(slot: std::sync::Arc<ConnSlot>) -> Self {
        let conn = slot.live.load().conn.clone();
        Self { slot, conn }
    }

    /// Follows the client to a new connection when the runtime of the old one has ended.
    fn refresh(&mut self) {
        if let Ok((conn, _)) = self.slot.conn() {
            self.conn = conn;
        }
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.conn {
            Conn::Single(_) => "single",
            Conn::Cluster(_) => "cluster",
            Conn::Unresolved(_) => "sentinel, no master known",
            Conn::Borrowed(_) => "the application's",
        };
        f.debug_tuple("Connection").field(&kind).finish()
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.refresh();
        self.conn.req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.refresh();
        self.conn.req_packed_commands(pipeline, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.conn.get_db()
    }
}
