//! [`ClientBuilder`]: the target (one server, a cluster, the master that sentinels name), TLS,
//! credentials and timeouts, and the connection and shared state a [`Client`] is built on.

use std::fmt;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use super::Client;
use super::context::{Config, Context};
use super::credentials::{SentinelAuth, TlsSettings};
use crate::error::{Error, Result};
use crate::key::{LockKeys, validate_prefix};
use redis::IntoConnectionInfo;

use crate::timing::validate_ttl;
use crate::token::{TokenSource, client_id, host_name};
use crate::transport::Transport;
use crate::transport::conn::{AppConnection, ConnSettings, ConnSlot, Factory};
use crate::transport::listen::{Heard, Listeners};
use crate::transport::wait::Waiters;

/// Default key prefix: every key dlock writes starts with it.
pub const DEFAULT_KEY_PREFIX: &str = "dlock:";
/// Default lease of a lock when none is given: 30 s, like Redisson's watchdog default.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30);
/// Default bound on every Redis request.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(2);
/// Default bound on establishing a connection.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Builds a [`Client`]; start with [`Client::builder`].
///
/// ```no_run
/// # fn demo() -> Result<(), dlock_core::Error> {
/// use std::time::Duration;
/// # let _rt = tokio::runtime::Runtime::new().unwrap(); let _g = _rt.enter();
/// let client = dlock_core::Client::builder("redis://:secret@127.0.0.1:6379/0")
///     .key_prefix("billing:locks:")
///     .default_ttl(Duration::from_secs(10))
///     .command_timeout(Duration::from_millis(500))
///     .build()?;
/// # let _ = client; Ok(()) }
/// ```
pub struct ClientBuilder {
    target: Target,
    key_prefix: String,
    default_ttl: Duration,
    command_timeout: Duration,
    connect_timeout: Duration,
    nodelay: bool,
    tls: TlsSettings,
    /// Sentinel clients only: how to log into the data nodes and into the sentinels.
    auth: SentinelAuth,
    /// The application's connection, which commands go to (see
    /// [`ClientBuilder::app_connection`]).
    app: Option<AppConnection>,
}

/// Where a client connects.
pub(super) enum Target {
    /// Boxed: a connection info is large (with TLS compiled into `redis`, ~240 bytes).
    Single(Box<redis::RedisResult<redis::ConnectionInfo>>),
    Cluster(redis::RedisResult<Vec<redis::ConnectionInfo>>),
    /// The master monitored as `master_name` by these sentinels.
    Sentinel {
        master_name: String,
        sentinels: redis::RedisResult<Vec<redis::ConnectionInfo>>,
    },
}

impl Target {
    /// The addresses, for `Debug` (connection infos may carry a password).
    fn addresses(&self) -> Vec<String> {
        match self {
            Self::Single(info) => info
                .as_ref()
                .as_ref()
                .map(|info| vec![info.addr().to_string()])
                .unwrap_or_default(),
            Self::Cluster(Ok(nodes))
            | Self::Sentinel {
                sentinels: Ok(nodes),
                ..
            } => nodes.iter().map(|i| i.addr().to_string()).collect(),
            Self::Cluster(Err(_)) | Self::Sentinel { .. } => Vec::new(),
        }
    }
}

impl fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            target,
            key_prefix,
            default_ttl,
            command_timeout,
            connect_timeout,
            nodelay,
            tls,
            auth,
            app,
        } = self;
        let mut f = f.debug_struct("ClientBuilder");
        if let Target::Sentinel { master_name, .. } = target {
            f.field("sentinel_master", master_name)
                .field("node_username", &auth.node_username)
                .field(
                    "node_password",
                    &auth.node_password.as_ref().map(|_| "<redacted>"),
                )
                .field("sentinel_username", &auth.sentinel_username)
                .field(
                    "sentinel_password",
                    &auth.sentinel_password.as_ref().map(|_| "<redacted>"),
                );
        }
        f.field("addresses", &target.addresses())
            .field("key_prefix", key_prefix)
            .field("default_ttl", default_ttl)
            .field("command_timeout", command_timeout)
            .field("connect_timeout", connect_timeout)
            .field("tcp_nodelay", nodelay)
            .field("tls_ca", &tls.ca.as_ref().map(|_| "<set>"))
            .field(
                "tls_client_cert",
                &tls.identity.as_ref().map(|_| "<redacted>"),
            )
            .field("tls_insecure", &tls.insecure)
            .field("app_connection", app)
            .finish()
    }
}

impl ClientBuilder {
    pub(super) fn new(target: Target) -> Self {
        Self {
            target,
            key_prefix: DEFAULT_KEY_PREFIX.to_owned(),
            default_ttl: DEFAULT_TTL,
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            nodelay: false,
            tls: TlsSettings::default(),
            auth: SentinelAuth::default(),
            app: None,
        }
    }

    /// Every key dlock writes starts with this prefix (default [`DEFAULT_KEY_PREFIX`]). It may
    /// not contain `{` or `}`.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// Lease of locks that do not set their own (default [`DEFAULT_TTL`]).
    pub fn default_ttl(mut self, ttl: Duration) -> Self {
        self.default_ttl = ttl;
        self
    }

    /// Bound on every request to Redis (default [`DEFAULT_COMMAND_TIMEOUT`]). A request that
    /// does not answer in time fails with [`crate::ErrorKind::Timeout`].
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// Bound on each attempt to (re)connect (default [`DEFAULT_CONNECT_TIMEOUT`]).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Whether the connection sets `TCP_NODELAY` (default `false`: Nagle on, as the `redis`
    /// crate's own default). Without it, the kernel holds a small request back while an
    /// earlier one on the connection is unacknowledged, which batches the requests of many
    /// concurrent tasks into fewer packets; a lone request is still sent at once, and the reply
    /// to the earlier request carries the acknowledgement, so the wait is at most one round
    /// trip. Measured on this project's benchmark (docs/benchmarks/2026-11-23-run-a.md, both
    /// settings in the same run): 64 tasks on one client (W2) do 1.1–1.3× the pairs per second
    /// with Nagle on, while one task at a time (W1) and the contended hand-off (W3 gap, p50 and
    /// p99) are as fast or faster. Turn it on for a
    /// connection that mostly carries requests whose replies come late (none of dlock's do).
    pub fn tcp_nodelay(mut self, nodelay: bool) -> Self {
        self.nodelay = nodelay;
        self
    }

    /// For a `rediss://` URL: verify the server's certificate against this CA (PEM) instead of
    /// the system's trusted roots. The host name of the URL must match the certificate
    /// (verified by default).
    pub fn tls_ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls.ca = Some(pem.into());
        self
    }

    /// For a `rediss://` URL: present this client certificate and private key (PEM) — mutual
    /// TLS, for a server started with `tls-auth-clients yes`. The key is never printed.
    pub fn tls_client_cert_pem(
        mut self,
        cert: impl Into<Vec<u8>>,
        key: impl Into<Vec<u8>>,
    ) -> Self {
        self.tls.identity = Some((cert.into(), key.into()));
        self
    }

    /// **Development only**: accept any server certificate on a `rediss://` URL, unverified —
    /// anyone between the client and Redis can then read and forge every request, lock values
    /// and passwords included. (The `redis` crate's URL fragment `#insecure` does the same.)
    pub fn tls_insecure_dev_only(mut self) -> Self {
        self.tls.insecure = true;
        self
    }

    /// Sentinel clients ([`Client::sentinel_builder`]): the ACL user to log into the data nodes
    /// (the master) as. The sentinels' own user goes into their URLs or
    /// [`ClientBuilder::sentinel_username`].
    pub fn node_username(mut self, username: impl Into<String>) -> Self {
        self.auth.node_username = Some(username.into());
        self
    }

    /// Sentinel clients: the password of the data nodes (`requirepass`, or the ACL user's).
    /// It is never printed (`Debug` shows `<redacted>`).
    pub fn node_password(mut self, password: impl Into<String>) -> Self {
        self.auth.node_password = Some(password.into());
        self
    }

    /// Sentinel clients: the database of the data nodes (default 0).
    pub fn node_db(mut self, db: i64) -> Self {
        self.auth.node_db = Some(db);
        self
    }

    /// Sentinel clients: the ACL user of the sentinels (overrides any user in their URLs).
    pub fn sentinel_username(mut self, username: impl Into<String>) -> Self {
        self.auth.sentinel_username = Some(username.into());
        self
    }

    /// Sentinel clients: the password of the sentinels (`requirepass` in sentinel.conf;
    /// overrides any password in their URLs). Never printed.
    pub fn sentinel_password(mut self, password: impl Into<String>) -> Self {
        self.auth.sentinel_password = Some(password.into());
        self
    }

    /// Runs the client's commands on the application's own redis-rs connection (a
    /// [`redis::aio::ConnectionManager`], a [`redis::aio::MultiplexedConnection`], or with
    /// [`Client::cluster_builder`] a [`redis::cluster_async::ClusterConnection`]) instead of a
    /// connection of the client's own. The builder's address (the URL or cluster nodes, with
    /// its TLS settings) must reach the same server or cluster: dlock still opens one
    /// connection there, lazily, for the wake-ups of waiting `acquire` calls alone — the
    /// `redis` crate delivers a connection's push messages only to the handler set when it
    /// was built, which is the application's. [`ClientBuilder::connect`] checks that a message
    /// published on the application's connection is heard there.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use dlock_core::redis;
    /// let url = "redis://127.0.0.1:6379/";
    /// let app = redis::Client::open(url)?.get_connection_manager().await?;
    /// let locks = dlock_core::Client::builder(url).app_connection(app.clone()).connect().await?;
    /// # let _ = locks; Ok(()) }
    /// ```
    ///
    /// Everything else runs on the application's connection: every lock kind's requests, the
    /// watchdog's renewals, [`Client::connection`]. Errors and timeouts are the same as on a
    /// client's own connection (every request is bounded by
    /// [`ClientBuilder::command_timeout`], and a server that is down gives an `Err` within
    /// it), with these differences:
    /// * Reconnecting is the application's connection's own behaviour: a
    ///   `ConnectionManager` reconnects (with its own retry settings; a RESP2 one behind the
    ///   first request that fails), a `MultiplexedConnection` does not — once dropped, every
    ///   request fails until the application replaces it, and then the client must be built
    ///   again with the new one. A waiting acquire rides out connection errors for one command
    ///   timeout (so it goes on across a reconnect): when Redis is down, its `Err` comes within
    ///   two command timeouts instead of one. A response timeout of the application's
    ///   connection, when shorter than the command timeout, also ends dlock's requests.
    /// * A fenced acquire ([`crate::MutexOptions::fenced`]) runs `fence.lua` every time
    ///   (about twice a plain `INCR` on the server): its plain-`INCR` fast path needs a
    ///   connection that dlock names (`CLIENT SETNAME`) and sees replaced.
    /// * When the runtime that built the application's connection ends, dlock cannot build
    ///   that connection again (it does its own).
    ///
    /// The connection's types are those of the `redis` crate that dlock re-exports
    /// ([`crate::redis`], redis-rs major version 1): build it with that major version.
    ///
    /// # Errors
    /// [`ClientBuilder::build`] then fails with [`crate::ErrorKind::InvalidInput`] when the
    /// builder is a Sentinel client's ([`Client::sentinel_builder`]: following a failover
    /// means building a connection to the new master, which dlock cannot do with yours; let
    /// the client connect by itself instead), or when the connection's kind does not match
    /// the builder's (a cluster connection needs [`Client::cluster_builder`], a standalone
    /// one [`Client::builder`]).
    pub fn app_connection(mut self, connection: impl Into<AppConnection>) -> Self {
        self.app = Some(connection.into());
        self
    }

    /// Creates the client. The connection is opened lazily by the first request, so this
    /// succeeds while Redis is down; use [`ClientBuilder::connect`] to fail fast instead. A
    /// Sentinel client starts asking the sentinels for the master here, in the background.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidInput`] for a malformed URL, TLS settings without a
    /// `rediss://` URL (for a Sentinel client: without `rediss://` sentinel URLs), sentinel URLs
    /// that mix `redis://` and `rediss://`, or certificates that are not PEM, a key prefix with braces or a default TTL out of range, an
    /// empty Sentinel master name or no sentinel, or a Sentinel setting (`node_password` …) on
    /// a client that is not a Sentinel client, or an [`ClientBuilder::app_connection`] that the
    /// client cannot use (on a Sentinel client, or of the other kind than the builder's: one
    /// server or a cluster); [`crate::ErrorKind::NoRuntime`] outside a Tokio runtime.
    pub fn build(self) -> Result<Client> {
        let default_ttl = self.check()?;
        let client_id = client_id()?;
        crate::metrics::describe();
        // The fence counters' names, built once per process here rather than by a request.
        crate::key::slot_tag(0);
        let waiters = Arc::new(Waiters::new(&client_id));
        let listeners = Arc::new(Listeners::default());
        // A Sentinel client asks for the master again when its connection drops (first, so
        // that the waiters woken below find the re-resolution under way and wait for it).
        let follow: Arc<OnceLock<Weak<ConnSlot>>> = Arc::default();
        let push = push_handler(&follow, &waiters, &listeners);
        let settings = ConnSettings {
            command_timeout: self.command_timeout,
            connect_timeout: self.connect_timeout,
            nodelay: self.nodelay,
        };
        let factory = factory(self.target, (&self.tls, &self.auth), settings, push)?;
        let slot = Arc::new(ConnSlot::new(factory, self.app)?);
        slot.describe_client(&self.key_prefix, self.connect_timeout);
        let _ = follow.set(Arc::downgrade(&slot));
        let transport = wire(slot, (waiters, listeners), self.command_timeout);
        let config = Config {
            key_prefix: self.key_prefix,
            default_ttl,
        };
        let ctx = Context::new(transport, config, client_id, TokenSource::new()?);
        // After the context: its watchdog has set the connection's rebuild hook.
        ctx.transport.slot().start_following();
        Ok(Client { ctx: Arc::new(ctx) })
    }

    /// The settings checked before anything is built; the default TTL.
    fn check(&self) -> Result<Duration> {
        tokio::runtime::Handle::try_current()
            .map_err(|_| Error::no_runtime("dlock_core::ClientBuilder::build"))?;
        validate_prefix(&self.key_prefix)?;
        let default_ttl = validate_ttl(self.default_ttl)?;
        if self.command_timeout.is_zero() || self.connect_timeout.is_zero() {
            return Err(Error::invalid(
                "command and connect timeouts must be greater than zero",
            ));
        }
        if let (false, Some(setting)) = (
            matches!(self.target, Target::Sentinel { .. }),
            self.auth.first_set(),
        ) {
            return Err(Error::invalid(format!(
                "`{setting}` applies to Sentinel clients (Client::sentinel_builder) only; for \
                 one server or a cluster, put the credentials and database into the URL"
            )));
        }
        if let Some(app) = &self.app {
            check_app_connection(app, &self.target)?;
        }
        Ok(default_ttl)
    }

    /// Creates the client and checks that Redis answers.
    ///
    /// # Errors
    /// As [`ClientBuilder::build`], plus [`crate::ErrorKind::Connection`] or
    /// [`crate::ErrorKind::Timeout`] when Redis does not answer a `PING` in time;
    /// [`crate::ErrorKind::Protocol`] when the server is one dlock cannot run on (Dragonfly,
    /// KeyDB, Redis before 7.0; read from `INFO server`), naming it and why. A Sentinel
    /// client fails with the sentinels' answers when they name no reachable master (each
    /// sentinel and its reason, a TLS certificate problem included), or with
    /// [`crate::ErrorKind::InvalidInput`] when none of them knows the master name. With
    /// [`ClientBuilder::app_connection`]: [`crate::ErrorKind::InvalidInput`] when a message
    /// published on the application's connection is not heard on the client's own at the
    /// builder's address (they reach different servers, so no wake-up would arrive).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future drops the half-made client.
    pub async fn connect(self) -> Result<Client> {
        let client = self.build()?;
        if let Err(e) = client.ping().await {
            // The ping's error names the server and what its port speaks (`conn/explain.rs`),
            // as every request's does.
            return Err(client.ctx.transport.slot().resolution_error().unwrap_or(e));
        }
        super::unsupported::refuse_unsupported(&client.ctx.transport).await?;
        if client.ctx.transport.slot().is_borrowed() {
            Box::pin(hears_the_app_connection(&client)).await?;
        }
        Ok(client)
    }
}

impl Client {
    /// Starts configuring a client for the Redis at `url`
    /// (`redis://[user][:password@]host[:port][/db]`, or a [`redis::ConnectionInfo`]).
    pub fn builder(url: impl IntoConnectionInfo) -> ClientBuilder {
        ClientBuilder::new(Target::Single(Box::new(url.into_connection_info())))
    }

    /// Starts configuring a client for a Redis Cluster (Redis 7 or newer), given some of its
    /// nodes (the others are discovered).
    ///
    /// Every key of one lock shares the hash tag `{name}`, so each script runs on one slot;
    /// wake-ups use sharded pub/sub so that they stay on the lock's shard; the watchdog renews
    /// locks of the same slot together.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), dlock_core::Error> {
    /// let client = dlock_core::Client::cluster_builder([
    ///     "redis://10.0.0.1:6379/",
    ///     "redis://10.0.0.2:6379/",
    /// ])
    /// .connect()
    /// .await?;
    /// # let _ = client; Ok(()) }
    /// ```
    pub fn cluster_builder<T: IntoConnectionInfo>(
        nodes: impl IntoIterator<Item = T>,
    ) -> ClientBuilder {
        let nodes = nodes
            .into_iter()
            .map(IntoConnectionInfo::into_connection_info)
            .collect::<redis::RedisResult<Vec<_>>>()
            .and_then(|nodes| {
                if nodes.is_empty() {
                    Err((
                        redis::ErrorKind::InvalidClientConfig,
                        "no cluster node given",
                    )
                        .into())
                } else {
                    Ok(nodes)
                }
            });
        ClientBuilder::new(Target::Cluster(nodes))
    }

    /// Starts configuring a client for the master that Redis Sentinel monitors as
    /// `master_name`, given the sentinels' addresses (`redis://[user:password@]host:26379`).
    ///
    /// The client asks every sentinel for the master (`SENTINEL GET-MASTER-ADDR-BY-NAME`) and
    /// uses the first node that confirms with `ROLE` that it is a master (a sentinel may name
    /// a stale one during a failover). It follows a failover: when its connection drops, a
    /// write is refused with `READONLY`, a request times out or a sentinel announces
    /// `+switch-master`, it asks again and, when they name another master, reconnects there,
    /// subscribes its waiters' wake channels on it and wakes every waiter to ask the new
    /// master. Requests made meanwhile wait for the new master up to the command timeout.
    /// What a failover can lose (a grant not yet replicated) is in the crate docs.
    ///
    /// The data nodes' credentials are set with [`ClientBuilder::node_username`] /
    /// [`ClientBuilder::node_password`] (and [`ClientBuilder::node_db`]); the sentinels' go
    /// into their URLs or [`ClientBuilder::sentinel_password`].
    ///
    /// TLS: give the sentinels as `rediss://host:<tls-port>` URLs (all of them; mixing
    /// `redis://` and `rediss://` is refused). The data nodes are then reached over TLS too, at
    /// the address the sentinels name, with the same settings: [`ClientBuilder::tls_ca_pem`],
    /// [`ClientBuilder::tls_client_cert_pem`] and hostname verification (or
    /// [`ClientBuilder::tls_insecure_dev_only`]) apply to sentinels and nodes alike, so a node's
    /// certificate must name the host the sentinels announce (often an IP address). This is the
    /// deployment where sentinels listen on `tls-port` and every sentinel and data node runs with
    /// `tls-replication yes` (sentinels then announce the nodes' TLS ports). Plain sentinels in
    /// front of TLS data nodes, or the reverse, are not supported.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), dlock_core::Error> {
    /// let client = dlock_core::Client::sentinel_builder(
    ///     "mymaster",
    ///     ["redis://10.0.0.1:26379", "redis://10.0.0.2:26379", "redis://10.0.0.3:26379"],
    /// )
    /// .node_password("data-secret")
    /// .key_prefix("billing:locks:")
    /// .connect()
    /// .await?;
    /// # let _ = client; Ok(()) }
    /// ```
    pub fn sentinel_builder<T: IntoConnectionInfo>(
        master_name: impl Into<String>,
        sentinels: impl IntoIterator<Item = T>,
    ) -> ClientBuilder {
        let sentinels = sentinels
            .into_iter()
            .map(IntoConnectionInfo::into_connection_info)
            .collect::<redis::RedisResult<Vec<_>>>();
        ClientBuilder::new(Target::Sentinel {
            master_name: master_name.into(),
            sentinels,
        })
    }

    /// A client with default settings; the connection opens on first use.
    ///
    /// # Errors
    /// See [`ClientBuilder::build`].
    pub fn open(url: impl IntoConnectionInfo) -> Result<Client> {
        Self::builder(url).build()
    }
}

/// Checks that wake-ups published on the application's connection reach the client's own
/// connection (the builder's address): one message on a channel of the client's key prefix
/// and id, published by `PUBLISH` (`SPUBLISH` on a cluster) on the application's connection,
/// must be heard within the command timeout.
async fn hears_the_app_connection(client: &Client) -> Result<()> {
    let transport = &client.ctx.transport;
    let channel = format!(
        "{}probe:{}",
        client.ctx.config.key_prefix, client.ctx.client_id
    );
    let mut heard = transport.subscribe(&channel).await?;
    let publish = redis::cmd(transport.slot().publish_command())
        .arg(&channel)
        .arg("dlock: the same server?")
        .clone();
    let _receivers: u64 = transport
        .query(&publish, "connect: publish a probe")
        .await?;
    let limit = transport.command_timeout();
    // A gap (the connection dropped meanwhile) is not an answer: the message may still come.
    let message = async {
        loop {
            match heard.next().await {
                Some(Heard::Message(_)) => return true,
                Some(_) => {}
                None => return false,
            }
        }
    };
    match tokio::time::timeout(limit, message).await {
        Ok(true) => Ok(()),
        _ => Err(Error::invalid(format!(
            "a message published on the application's connection was not heard within {limit:?} \
             on the client's own connection to the builder's address: they reach different \
             servers (or clusters), and waiting acquires would never be woken; give the builder \
             the address the application's connection uses"
        ))),
    }
}

/// Where the connection's push messages go: a disconnection has a Sentinel client ask for its
/// master again; messages go to the listeners, then to the waiters.
fn push_handler(
    follow: &Arc<OnceLock<Weak<ConnSlot>>>,
    waiters: &Arc<Waiters>,
    listeners: &Arc<Listeners>,
) -> impl Fn(redis::PushInfo) -> std::result::Result<(), ()> + Send + Sync + 'static {
    let (to_slot, to_waiters, to_listeners) = (
        follow.clone(),
        Arc::downgrade(waiters),
        Arc::downgrade(listeners),
    );
    move |info: redis::PushInfo| {
        if info.kind == redis::PushKind::Disconnection
            && let Some(slot) = to_slot.get().and_then(Weak::upgrade)
        {
            slot.follow();
        }
        if to_listeners.upgrade().is_some_and(|l| l.on_push(&info)) {
            return Ok(());
        }
        if let Some(waiters) = to_waiters.upgrade() {
            waiters.on_push(info);
        }
        Ok(())
    }
}

/// How to (re)build the connection to `target`, with TLS and a Sentinel client's credentials
/// applied to each address.
fn factory(
    target: Target,
    (tls, auth): (&TlsSettings, &SentinelAuth),
    settings: ConnSettings,
    push: impl redis::aio::AsyncPushSender,
) -> Result<Factory> {
    match target {
        Target::Single(info) => {
            Factory::single(tls.apply((*info).map_err(bad_url)?)?, settings, push)
        }
        Target::Cluster(nodes) => {
            let nodes = nodes
                .map_err(bad_url)?
                .into_iter()
                .map(|node| tls.apply(node))
                .collect::<Result<Vec<_>>>()?;
            Factory::cluster(nodes, tls.certificates(), settings, push)
        }
        Target::Sentinel {
            master_name,
            sentinels,
        } => {
            // TLS settings go to every sentinel (they need rediss:// URLs), and through
            // them to the data nodes (`sentinel.rs`).
            let sentinels = sentinels
                .map_err(bad_url)?
                .into_iter()
                .map(|sentinel| tls.apply(sentinel))
                .collect::<Result<Vec<_>>>()?;
            let (sentinels, node) = auth.apply(sentinels);
            Factory::sentinel(master_name, sentinels, node, settings, push)
        }
    }
}

/// The transport on `slot`, with its hooks: after a failover or a replaced connection, wake
/// channels are subscribed again and waiters ask again; grants nobody waits for any more are
/// released in the background (which hands the lock on to the next waiter).
fn wire(
    slot: Arc<ConnSlot>,
    (waiters, listeners): (Arc<Waiters>, Arc<Listeners>),
    command_timeout: Duration,
) -> Arc<Transport> {
    let (to_waiters, to_listeners) = (Arc::downgrade(&waiters), Arc::downgrade(&listeners));
    // Grants may come twice while the old connection is kept (`transport/conn/rotate.rs`).
    let watch = crate::transport::conn::silence::kept_for(command_timeout);
    slot.set_on_failover(Box::new(move |conn, generation| {
        if let Some(listeners) = to_listeners.upgrade() {
            listeners.resubscribe(conn.clone());
        }
        if let Some(waiters) = to_waiters.upgrade() {
            waiters.resubscribe(conn, generation, watch);
        }
    }));
    let transport = Arc::new(Transport::new(
        slot,
        (waiters, listeners),
        command_timeout,
        holder_identity().into(),
    ));
    let orphans = Arc::downgrade(&transport);
    transport
        .waiters
        .set_orphan_handler(Box::new(move |orphan| {
            if let Some(transport) = orphans.upgrade() {
                let keys = LockKeys::from_lock_key(&orphan.lock_key);
                tracing::debug!(lock = %keys.name(), "dlock: releasing a grant nobody waits for");
                transport.release_in_background(keys, orphan.token, None);
            }
        }));
    transport
}

/// Refuses an application's connection that the client cannot use with `target`.
fn check_app_connection(app: &AppConnection, target: &Target) -> Result<()> {
    match target {
        Target::Sentinel { .. } => Err(Error::invalid(format!(
            "a Sentinel client cannot run on the application's connection ({}): it follows a \
             failover by connecting to the master the sentinels name next, which it cannot do \
             with a connection it did not build; leave out app_connection and let the client \
             connect by itself (it opens one multiplexed connection for all of its locks)",
            app.kind()
        ))),
        Target::Single(_) if app.is_cluster() => Err(Error::invalid(
            "the application's connection is a cluster connection (ClusterConnection): build \
             the client with Client::cluster_builder and the cluster's nodes",
        )),
        Target::Cluster(_) if !app.is_cluster() => Err(Error::invalid(format!(
            "the application's connection is a standalone one ({}): a cluster client needs a \
             ClusterConnection; for one server, build the client with Client::builder",
            app.kind()
        ))),
        Target::Single(_) | Target::Cluster(_) => Ok(()),
    }
}

fn bad_url(e: redis::RedisError) -> Error {
    Error::invalid(format!(
        "cannot use this Redis URL: {e}; expected redis://[user][:password@]host[:port][/db]"
    ))
}

/// `<host>\x1f<pid>` of this process.
fn holder_identity() -> String {
    format!("{}\x1f{}", host_name(), std::process::id())
}
