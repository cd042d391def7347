//! [`Client`]: one Redis connection shared by every lock of a process, and its configuration.

use std::fmt;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use redis::IntoConnectionInfo;

use crate::conn::{ConnSettings, ConnSlot, Connection, Factory};
use crate::context::{Config, Context};
use crate::election::Election;
use crate::error::{Error, Result};
use crate::key::{LockKeys, LockKind, validate_name, validate_prefix};
use crate::listen::Listeners;
use crate::multilock::MultiLock;
use crate::mutex::Mutex;
use crate::options::MutexOptions;
use crate::rwlock::RwLock;
use crate::semaphore::Semaphore;
use crate::timing::validate_ttl;
use crate::token::{TokenSource, client_id, host_name};
use crate::transport::Transport;
use crate::wait::Waiters;

/// Default key prefix: every key dlock writes starts with it.
pub const DEFAULT_KEY_PREFIX: &str = "dlock:";
/// Default lease of a lock when none is given: 30 s, like Redisson's watchdog default.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30);
/// Default bound on every Redis request.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(2);
/// Default bound on establishing a connection.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// A handle on one Redis deployment: cheap to clone, share it across tasks.
///
/// All locks of a client share one auto-reconnecting, multiplexed RESP3 connection, which also
/// carries the wake-up messages of waiting `acquire` calls.
///
/// ```no_run
/// # async fn demo() -> Result<(), dlock_core::Error> {
/// use std::time::Duration;
/// let client = dlock_core::Client::open("redis://127.0.0.1:6379/")?;
/// let lock = client.mutex("order:42")?;
/// let guard = lock.acquire_timeout(Duration::from_secs(5)).await?;
/// println!("fencing token {}", guard.fencing_token().await?);
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    pub(crate) ctx: Arc<Context>,
}

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
}

/// What a `rediss://` connection trusts and presents ([`ClientBuilder::tls_ca_pem`] …).
#[derive(Clone, Default)]
struct TlsSettings {
    /// PEM: the CA that signs the servers' certificates, instead of the system's roots.
    ca: Option<Vec<u8>>,
    /// PEM: the client certificate and its key (mutual TLS).
    identity: Option<(Vec<u8>, Vec<u8>)>,
    /// Accept any server certificate (development only).
    insecure: bool,
}

impl TlsSettings {
    fn is_set(&self) -> bool {
        self.ca.is_some() || self.identity.is_some() || self.insecure
    }

    /// The CA and client certificate, when either is given.
    fn certificates(&self) -> Option<redis::TlsCertificates> {
        if self.ca.is_none() && self.identity.is_none() {
            return None;
        }
        Some(redis::TlsCertificates {
            client_tls: self
                .identity
                .as_ref()
                .map(|(cert, key)| redis::ClientTlsConfig {
                    client_cert: cert.clone(),
                    client_key: key.clone(),
                }),
            root_cert: self.ca.clone(),
        })
    }

    /// `info` with these settings, when it is a `rediss://` address (the key and certificates
    /// go into the connection info, which the `redis` crate never prints).
    fn apply(&self, info: redis::ConnectionInfo) -> Result<redis::ConnectionInfo> {
        let tls = matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. });
        if !tls {
            if self.is_set() {
                return Err(Error::invalid(
                    "TLS settings (tls_ca_pem, tls_client_cert_pem, tls_insecure_dev_only) need \
                     a rediss:// URL",
                ));
            }
            return Ok(info);
        }
        install_crypto_provider();
        let info = if self.insecure {
            match info.addr().clone() {
                redis::ConnectionAddr::TcpTls { host, port, .. } => {
                    info.set_addr(redis::ConnectionAddr::TcpTls {
                        host,
                        port,
                        insecure: true,
                        tls_params: None,
                    })
                }
                _ => info,
            }
        } else {
            info
        };
        let Some(certs) = self.certificates() else {
            return Ok(info);
        };
        redis::Client::build_with_tls(info, certs)
            .map(|client| client.get_connection_info().clone())
            .map_err(|e| {
                Error::invalid(format!(
                    "cannot use these TLS certificates (PEM expected): {e}"
                ))
            })
    }
}

/// The `redis` crate turns rustls on without a crypto provider: dlock installs `ring`'s as the
/// process default before its first TLS connection, unless the application installed one.
fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Lost a race with another installer: theirs is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// A Sentinel client's credentials: the data nodes' (the master) and the sentinels' (which
/// override those in the sentinel URLs). Never printed.
#[derive(Default)]
struct SentinelAuth {
    node_username: Option<String>,
    node_password: Option<String>,
    node_db: Option<i64>,
    sentinel_username: Option<String>,
    sentinel_password: Option<String>,
}

impl SentinelAuth {
    /// The sentinels with their credentials (these override the URLs'), and the data nodes'
    /// login.
    fn apply(
        &self,
        sentinels: Vec<redis::ConnectionInfo>,
    ) -> (Vec<redis::ConnectionInfo>, redis::RedisConnectionInfo) {
        let sentinels = sentinels
            .into_iter()
            .map(|info| {
                let mut settings = info.redis_settings().clone();
                if let Some(user) = &self.sentinel_username {
                    settings = settings.set_username(user);
                }
                if let Some(password) = &self.sentinel_password {
                    settings = settings.set_password(password);
                }
                info.set_redis_settings(settings)
            })
            .collect();
        let mut node = redis::RedisConnectionInfo::default();
        if let Some(user) = &self.node_username {
            node = node.set_username(user);
        }
        if let Some(password) = &self.node_password {
            node = node.set_password(password);
        }
        if let Some(db) = self.node_db {
            node = node.set_db(db);
        }
        (sentinels, node)
    }

    /// The name of the first setting given, for the error of a non-Sentinel builder.
    fn first_set(&self) -> Option<&'static str> {
        let Self {
            node_username,
            node_password,
            node_db,
            sentinel_username,
            sentinel_password,
        } = self;
        [
            (node_username.is_some(), "node_username"),
            (node_password.is_some(), "node_password"),
            (node_db.is_some(), "node_db"),
            (sentinel_username.is_some(), "sentinel_username"),
            (sentinel_password.is_some(), "sentinel_password"),
        ]
        .into_iter()
        .find_map(|(set, name)| set.then_some(name))
    }
}

/// Where a client connects.
enum Target {
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
            .finish()
    }
}

impl ClientBuilder {
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

    /// Creates the client. The connection is opened lazily by the first request, so this
    /// succeeds while Redis is down; use [`ClientBuilder::connect`] to fail fast instead. A
    /// Sentinel client starts asking the sentinels for the master here, in the background.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidInput`] for a malformed URL, TLS settings without a
    /// `rediss://` URL (for a Sentinel client: without `rediss://` sentinel URLs), sentinel URLs
    /// that mix `redis://` and `rediss://`, or certificates that are not PEM, a key prefix with braces or a default TTL out of range, an
    /// empty Sentinel master name or no sentinel, or a Sentinel setting (`node_password` …) on
    /// a client that is not a Sentinel client; [`crate::ErrorKind::NoRuntime`] outside a Tokio
    /// runtime.
    pub fn build(self) -> Result<Client> {
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
        let client_id = client_id()?;
        crate::metrics::describe();
        // The fence counters' names, built once per process here rather than by a request.
        crate::key::slot_tag(0);
        let waiters = Arc::new(Waiters::new(&client_id));
        let listeners = Arc::new(Listeners::default());
        let (to_waiters, to_listeners) = (Arc::downgrade(&waiters), Arc::downgrade(&listeners));
        // A Sentinel client asks for the master again when its connection drops (first, so
        // that the waiters woken below find the re-resolution under way and wait for it).
        let follow: Arc<OnceLock<Weak<ConnSlot>>> = Arc::default();
        let to_slot = follow.clone();
        let push = move |info: redis::PushInfo| {
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
            Ok::<(), ()>(())
        };
        let settings = ConnSettings {
            command_timeout: self.command_timeout,
            connect_timeout: self.connect_timeout,
            nodelay: self.nodelay,
        };
        let tls = &self.tls;
        let factory = match self.target {
            Target::Single(info) => {
                Factory::single(tls.apply((*info).map_err(bad_url)?)?, settings, push)?
            }
            Target::Cluster(nodes) => {
                let nodes = nodes
                    .map_err(bad_url)?
                    .into_iter()
                    .map(|node| tls.apply(node))
                    .collect::<Result<Vec<_>>>()?;
                Factory::cluster(nodes, tls.certificates(), settings, push)?
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
                let (sentinels, node) = self.auth.apply(sentinels);
                Factory::sentinel(master_name, sentinels, node, settings, push)?
            }
        };
        let slot = Arc::new(ConnSlot::new(factory)?);
        slot.describe_client(&self.key_prefix, self.connect_timeout);
        let _ = follow.set(Arc::downgrade(&slot));
        let (to_waiters, to_listeners) = (Arc::downgrade(&waiters), Arc::downgrade(&listeners));
        slot.set_on_failover(Box::new(move |conn, generation| {
            if let Some(listeners) = to_listeners.upgrade() {
                listeners.resubscribe(conn.clone());
            }
            if let Some(waiters) = to_waiters.upgrade() {
                waiters.resubscribe(conn, generation);
            }
        }));
        let transport = Arc::new(Transport::new(
            slot,
            (waiters, listeners),
            self.command_timeout,
            holder_identity().into(),
        ));
        // Grants that reach this client after their waiter stopped waiting are released in the
        // background, which hands the lock on to the next waiter.
        let orphans = Arc::downgrade(&transport);
        transport.waiters.set_orphan_handler(Box::new(move |orphan| {
            if let Some(transport) = orphans.upgrade() {
                let keys = LockKeys::from_lock_key(&orphan.lock_key);
                tracing::debug!(lock = %keys.name(), "dlock: releasing a grant nobody waits for");
                transport.release_in_background(keys, orphan.token, None);
            }
        }));
        let config = Config {
            key_prefix: self.key_prefix,
            default_ttl,
        };
        let ctx = Context::new(transport, config, client_id, TokenSource::new()?);
        // After the context: its watchdog has set the connection's rebuild hook.
        ctx.transport.slot().start_following();
        Ok(Client { ctx: Arc::new(ctx) })
    }

    /// Creates the client and checks that Redis answers.
    ///
    /// # Errors
    /// As [`ClientBuilder::build`], plus [`crate::ErrorKind::Connection`] or
    /// [`crate::ErrorKind::Timeout`] when Redis does not answer a `PING` in time. A Sentinel
    /// client fails with the sentinels' answers when they name no reachable master (each
    /// sentinel and its reason, a TLS certificate problem included), or with
    /// [`crate::ErrorKind::InvalidInput`] when none of them knows the master name.
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
        Ok(client)
    }
}

impl Client {
    /// Starts configuring a client for the Redis at `url`
    /// (`redis://[user][:password@]host[:port][/db]`, or a [`redis::ConnectionInfo`]).
    pub fn builder(url: impl IntoConnectionInfo) -> ClientBuilder {
        Self::builder_for(Target::Single(Box::new(url.into_connection_info())))
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
        Self::builder_for(Target::Cluster(nodes))
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
        Self::builder_for(Target::Sentinel {
            master_name: master_name.into(),
            sentinels,
        })
    }

    fn builder_for(target: Target) -> ClientBuilder {
        ClientBuilder {
            target,
            key_prefix: DEFAULT_KEY_PREFIX.to_owned(),
            default_ttl: DEFAULT_TTL,
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            nodelay: false,
            tls: TlsSettings::default(),
            auth: SentinelAuth::default(),
        }
    }

    /// A client with default settings; the connection opens on first use.
    ///
    /// # Errors
    /// See [`ClientBuilder::build`].
    pub fn open(url: impl IntoConnectionInfo) -> Result<Client> {
        Self::builder(url).build()
    }

    /// Checks that Redis answers.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Connection`] or [`crate::ErrorKind::Timeout`] when it does not.
    ///
    /// # Cancel safety
    /// Cancel safe: `PING` changes nothing.
    pub async fn ping(&self) -> Result<()> {
        let _pong: String = self
            .ctx
            .transport
            .query(&redis::cmd("PING"), "PING")
            .await?;
        Ok(())
    }

    /// A handle on the mutex called `name`, with the client's default TTL.
    ///
    /// ```no_run
    /// # async fn demo(client: dlock_core::Client) -> Result<(), dlock_core::Error> {
    /// let lock = client.mutex("invoice:2026-11")?;
    /// if let Some(guard) = lock.try_acquire().await? {
    ///     // … exclusive work …
    ///     guard.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidInput`] for an empty name, one longer than
    /// [`crate::MAX_NAME_LEN`] bytes, or one containing braces or control characters.
    pub fn mutex(&self, name: &str) -> Result<Mutex> {
        self.mutex_with(name, MutexOptions::new())
    }

    /// A handle on the mutex called `name` with explicit options.
    ///
    /// ```no_run
    /// # async fn demo(client: dlock_core::Client) -> Result<(), dlock_core::Error> {
    /// use std::time::Duration;
    /// use dlock_core::MutexOptions;
    /// let lock = client.mutex_with(
    ///     "payment:9913",
    ///     MutexOptions::new().ttl(Duration::from_secs(10)).label("pay handler"),
    /// )?;
    /// # let _ = lock; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Client::mutex`], plus an out-of-range TTL ([`crate::MIN_TTL`] ..= [`crate::MAX_TTL`]),
    /// a watchdog lease below [`crate::MIN_WATCHDOG_TTL`] or with a renewal interval longer than
    /// half the TTL, a `max_hold` below the minimum watchdog lease, a label longer than
    /// [`crate::MAX_LABEL_LEN`] bytes or with control characters, or a [`crate::Durability`]
    /// with nothing to wait for, a timeout out of range, or on a Redis Cluster.
    pub fn mutex_with(&self, name: &str, options: MutexOptions) -> Result<Mutex> {
        validate_name(name)?;
        let cluster = self.ctx.transport.slot().is_cluster();
        let settings = options.mutex_settings(self.ctx.config.default_ttl, cluster)?;
        let keys = LockKeys::new(&self.ctx.config.key_prefix, name);
        Ok(Mutex::new(self.ctx.clone(), keys, settings))
    }

    /// A handle on the distributed semaphore called `name`, with `permits` permits (default
    /// options: each permit has the client's default TTL as a fixed lease); see [`Semaphore`].
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidInput`] for a bad name or `permits == 0`.
    pub fn semaphore(&self, name: &str, permits: u32) -> Result<Semaphore> {
        self.semaphore_with(name, permits, MutexOptions::new())
    }

    /// A handle on the semaphore called `name` with explicit options: the lease (`ttl`), the
    /// watchdog or a fixed lease (`renewal`; a fixed lease makes permits that expire), `max_hold`
    /// and the holder's `label` apply to each permit as to a mutex's hold; reentrancy and
    /// `fenced` do not (every permit is its own holder, and always fenced).
    ///
    /// # Errors
    /// As [`Client::semaphore`], and for invalid options.
    pub fn semaphore_with(
        &self,
        name: &str,
        permits: u32,
        options: MutexOptions,
    ) -> Result<Semaphore> {
        validate_name(name)?;
        if permits == 0 {
            return Err(Error::invalid(format!(
                "semaphore `{name}` needs at least 1 permit"
            )));
        }
        let settings = options.settings(self.ctx.config.default_ttl)?;
        let keys = LockKeys::of_kind(LockKind::Semaphore, &self.ctx.config.key_prefix, name);
        Ok(Semaphore::new(self.ctx.clone(), keys, permits, settings))
    }

    /// A handle on the distributed read-write lock called `name` (default options: each hold
    /// has the client's default TTL as a fixed lease); see [`RwLock`]. Its keys are its own: a
    /// mutex or semaphore of the same name is another lock.
    ///
    /// ```no_run
    /// # async fn demo(client: dlock_core::Client) -> Result<(), dlock_core::Error> {
    /// let catalog = client.rw_lock("catalog")?;
    /// let read = catalog.read().await?;
    /// # drop(read); Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidInput`] for a bad name (as [`Client::mutex`]).
    pub fn rw_lock(&self, name: &str) -> Result<RwLock> {
        self.rw_lock_with(name, MutexOptions::new())
    }

    /// A handle on the read-write lock called `name` with explicit options: the lease (`ttl`),
    /// the watchdog, `max_hold`, the holder's `label`, `reentrant` (nested calls inside
    /// [`RwLock::with_read`] / [`RwLock::with_write`] bodies) and `on_lost` apply to every hold
    /// as to a mutex's; `fenced` does not (every hold is fenced).
    ///
    /// # Errors
    /// As [`Client::rw_lock`], and for invalid options (as [`Client::mutex_with`]).
    pub fn rw_lock_with(&self, name: &str, options: MutexOptions) -> Result<RwLock> {
        validate_name(name)?;
        let settings = options.settings(self.ctx.config.default_ttl)?;
        let keys = LockKeys::of_kind(LockKind::RwLock, &self.ctx.config.key_prefix, name);
        Ok(RwLock::new(self.ctx.clone(), keys, settings))
    }

    /// A handle on the mutexes `names`, taken together — all or none — in one canonical order
    /// (by cluster slot, then key), so multi-locks never deadlock; see [`MultiLock`]. Each member
    /// is the mutex of that name (the same lock as [`Client::mutex`] gives) with default options.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidInput`] for no names or a bad one (as [`Client::mutex`]).
    pub fn multi_lock<I, S>(&self, names: I) -> Result<MultiLock>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.multi_lock_with(names, MutexOptions::new())
    }

    /// As [`Client::multi_lock`], with `options` for every member (the lease, the watchdog,
    /// `max_hold`, `fenced`, the label …).
    ///
    /// # Errors
    /// As [`Client::multi_lock`], and for invalid options (as [`Client::mutex_with`]).
    pub fn multi_lock_with<I, S>(&self, names: I, options: MutexOptions) -> Result<MultiLock>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let members = names
            .into_iter()
            .map(|name| self.mutex_with(name.as_ref(), options.clone()))
            .collect::<Result<Vec<_>>>()?;
        MultiLock::new(members)
    }

    /// A handle on the leader election called `name` (the client's default TTL as the
    /// leader's lease, renewed by the watchdog); see [`Election`].
    ///
    /// ```no_run
    /// # async fn demo(client: dlock_core::Client) -> Result<(), dlock_core::Error> {
    /// let leadership = client.election("scheduler")?.campaign("host-a").await?;
    /// # drop(leadership); Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidInput`] for a bad name (as [`Client::mutex`]; the election's
    /// mutex is named `election:<name>`, which must fit [`crate::MAX_NAME_LEN`] too).
    pub fn election(&self, name: &str) -> Result<Election> {
        self.election_with(name, MutexOptions::new())
    }

    /// A handle on the leader election called `name` with explicit options: the leader's lease
    /// (`ttl`), `renew_every`, `max_hold` (leadership ends after it) and `label` apply as to a
    /// mutex's hold; the watchdog is always on; `reentrant`, `on_lost` and `fenced` do not
    /// apply (every leadership is fenced).
    ///
    /// # Errors
    /// As [`Client::election`], and for invalid options (as [`Client::mutex_with`]).
    pub fn election_with(&self, name: &str, options: MutexOptions) -> Result<Election> {
        Election::new(self.ctx.clone(), name, options)
    }

    /// The client's Redis connection, for your own commands; see [`crate::Connection`].
    pub fn connection(&self) -> Connection {
        Connection::new(self.ctx.transport.slot().clone())
    }

    /// The prefix of every key this client writes.
    pub fn key_prefix(&self) -> &str {
        &self.ctx.config.key_prefix
    }

    /// The lease of locks that do not set their own.
    pub fn default_ttl(&self) -> Duration {
        self.ctx.config.default_ttl
    }

    /// The bound on every Redis request.
    pub fn command_timeout(&self) -> Duration {
        self.ctx.transport.command_timeout()
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.ctx, f)
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
