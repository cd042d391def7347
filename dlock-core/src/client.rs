//! [`Client`]: one Redis connection shared by every lock of a process, and its configuration.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use redis::aio::ConnectionManagerConfig;
use redis::{IntoConnectionInfo, ProtocolVersion, Value};

use crate::conn::{Conn, Factory, Transport};
use crate::error::{Error, ErrorKind, Result};
use crate::held::HeldLocks;
use crate::key::{LockKeys, validate_name, validate_prefix};
use crate::lease::validate_ttl;
use crate::mutex::Mutex;
use crate::options::MutexOptions;
use crate::runtime::spawn_detached;
use crate::scripts::{self, Call, ReleaseReply};
use crate::token::{TokenSource, client_id};
use crate::wait::Waiters;
use crate::watchdog::Watchdog;

/// Default key prefix: every key dlock writes starts with it.
pub const DEFAULT_KEY_PREFIX: &str = "dlock:";
/// Default lease of a lock when none is given: 30 s, like Redisson's watchdog default.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30);
/// Default bound on every Redis request.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(2);
/// Default bound on establishing a connection.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Longest accepted label, in bytes.
pub const MAX_LABEL_LEN: usize = 256;

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
/// println!("fencing token {}", guard.fencing_token());
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    pub(crate) shared: Arc<Shared>,
}

/// What every lock handle and guard of a client shares.
pub(crate) struct Shared {
    pub(crate) transport: Arc<Transport>,
    pub(crate) config: Config,
    pub(crate) client_id: String,
    /// `<host>\x1f<pid>`: who holds a lock, for introspection.
    pub(crate) holder: Arc<str>,
    pub(crate) tokens: TokenSource,
    pub(crate) waiters: Arc<Waiters>,
    pub(crate) held: HeldLocks,
    pub(crate) watchdog: Watchdog,
    /// Set by [`Client::shutdown`]: no new acquisitions.
    pub(crate) closed: AtomicBool,
    /// The connection generation the background tasks were last checked for.
    services_generation: AtomicU64,
}

#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub(crate) key_prefix: String,
    pub(crate) default_ttl: Duration,
    pub(crate) command_timeout: Duration,
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
}

/// Where a client connects.
enum Target {
    Single(redis::RedisResult<redis::ConnectionInfo>),
    Cluster(redis::RedisResult<Vec<redis::ConnectionInfo>>),
}

impl Target {
    /// The addresses, for `Debug` (connection infos may carry a password).
    fn addresses(&self) -> Vec<String> {
        match self {
            Self::Single(Ok(info)) => vec![info.addr().to_string()],
            Self::Cluster(Ok(nodes)) => nodes.iter().map(|i| i.addr().to_string()).collect(),
            Self::Single(Err(_)) | Self::Cluster(Err(_)) => Vec::new(),
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
        } = self;
        f.debug_struct("ClientBuilder")
            .field("addresses", &target.addresses())
            .field("key_prefix", key_prefix)
            .field("default_ttl", default_ttl)
            .field("command_timeout", command_timeout)
            .field("connect_timeout", connect_timeout)
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

    /// Creates the client. The connection is opened lazily by the first request, so this
    /// succeeds while Redis is down; use [`ClientBuilder::connect`] to fail fast instead.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidInput`] for a malformed URL, a `rediss://` URL (TLS is not
    /// compiled in), a key prefix with braces or a default TTL out of range;
    /// [`crate::ErrorKind::NoRuntime`] outside a Tokio runtime.
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
        let client_id = client_id()?;
        let waiters = Arc::new(Waiters::new(&client_id));
        let push_target = Arc::downgrade(&waiters);
        let push = move |info| {
            if let Some(waiters) = push_target.upgrade() {
                waiters.on_push(info);
            }
            Ok::<(), ()>(())
        };
        let timeouts = (self.command_timeout, self.connect_timeout);
        let factory = match self.target {
            Target::Single(info) => single(info.map_err(bad_url)?, timeouts, push)?,
            Target::Cluster(nodes) => cluster(nodes.map_err(bad_url)?, timeouts, push)?,
        };
        let transport = Arc::new(Transport::new(factory)?);

        let shared = Arc::new(Shared {
            transport,
            config: Config {
                key_prefix: self.key_prefix,
                default_ttl,
                command_timeout: self.command_timeout,
            },
            client_id,
            holder: holder_identity().into(),
            tokens: TokenSource::new()?,
            waiters,
            held: HeldLocks::default(),
            watchdog: Watchdog::default(),
            closed: AtomicBool::new(false),
            services_generation: AtomicU64::new(1),
        });
        // Grants that reach this client after their waiter stopped waiting are released in the
        // background, which hands the lock on to the next waiter.
        let orphans = Arc::downgrade(&shared);
        shared.waiters.set_orphan_handler(Box::new(move |orphan| {
            if let Some(shared) = orphans.upgrade() {
                let keys = LockKeys::from_lock_key(&orphan.lock_key);
                tracing::debug!(lock = %keys.name(), "dlock: releasing a grant nobody waits for");
                shared.release_in_background(keys, orphan.token, None);
            }
        }));
        Ok(Client { shared })
    }

    /// Creates the client and checks that Redis answers.
    ///
    /// # Errors
    /// As [`ClientBuilder::build`], plus [`crate::ErrorKind::Connection`] or
    /// [`crate::ErrorKind::Timeout`] when Redis does not answer a `PING` in time.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future drops the half-made client.
    pub async fn connect(self) -> Result<Client> {
        let client = self.build()?;
        client.ping().await?;
        Ok(client)
    }
}

impl Client {
    /// Starts configuring a client for the Redis at `url`
    /// (`redis://[user][:password@]host[:port][/db]`, or a [`redis::ConnectionInfo`]).
    pub fn builder(url: impl IntoConnectionInfo) -> ClientBuilder {
        Self::builder_for(Target::Single(url.into_connection_info()))
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

    fn builder_for(target: Target) -> ClientBuilder {
        ClientBuilder {
            target,
            key_prefix: DEFAULT_KEY_PREFIX.to_owned(),
            default_ttl: DEFAULT_TTL,
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
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
        let (mut conn, _) = self.shared.conn()?;
        let ping = redis::cmd("PING");
        let reply: redis::RedisResult<String> = tokio::time::timeout(
            self.shared.config.command_timeout,
            ping.query_async(&mut conn),
        )
        .await
        .map_err(|_| Error::timeout("PING", self.shared.config.command_timeout))?;
        reply.map_err(|e| Error::from_redis("PING", e))?;
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
    /// a watchdog interval longer than half the TTL, a `max_hold` below the minimum TTL, or a
    /// label longer than [`MAX_LABEL_LEN`] bytes or with control characters.
    pub fn mutex_with(&self, name: &str, options: MutexOptions) -> Result<Mutex> {
        validate_name(name)?;
        let ttl = validate_ttl(options.ttl.unwrap_or(self.shared.config.default_ttl))?;
        if let Some(label) = &options.label {
            validate_label(label)?;
        }
        let keys = LockKeys::new(&self.shared.config.key_prefix, name);
        Mutex::new(self.shared.clone(), keys, ttl, &options)
    }

    /// The client's Redis connection, for your own commands; see [`crate::Connection`].
    pub fn connection(&self) -> crate::Connection {
        crate::Connection::new(self.shared.transport.clone())
    }

    /// The prefix of every key this client writes.
    pub fn key_prefix(&self) -> &str {
        &self.shared.config.key_prefix
    }

    /// The lease of locks that do not set their own.
    pub fn default_ttl(&self) -> Duration {
        self.shared.config.default_ttl
    }

    /// The bound on every Redis request.
    pub fn command_timeout(&self) -> Duration {
        self.shared.config.command_timeout
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Shared {
            transport: _,
            config,
            client_id,
            holder,
            tokens: _,
            waiters,
            held: _,
            watchdog,
            closed,
            services_generation: _,
        } = &*self.shared;
        f.debug_struct("Client")
            .field("config", config)
            .field("client_id", client_id)
            .field("holder", holder)
            .field("waiters", waiters)
            .field("watchdog", watchdog)
            .field("shut_down", &closed.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// The connection to use now and its generation. When the runtime the connection ran in
    /// has ended, it is rebuilt in this one, and the watchdog restarted here if it has leases
    /// to keep.
    pub(crate) fn conn(self: &Arc<Self>) -> Result<(Conn, u64)> {
        let (conn, generation) = self.transport.conn()?;
        if self.services_generation.load(Ordering::Relaxed) != generation {
            self.services_generation
                .store(generation, Ordering::Relaxed);
            self.watchdog.ensure_running(self);
        }
        Ok((conn, generation))
    }

    /// Whether [`Client::shutdown`] was called.
    pub(crate) fn is_closed(&self) -> bool {
        // SeqCst, paired with the store in `Client::shutdown`: see `Mutex::hold`.
        self.closed.load(Ordering::SeqCst)
    }

    /// The error of an acquisition attempted after [`Client::shutdown`].
    pub(crate) fn closed_error(&self, name: &str) -> Error {
        Error::new(
            ErrorKind::Shutdown,
            format!("lock `{name}`: the client was shut down; build a new client to lock again"),
        )
    }

    /// Sends one script call under the command timeout, loading the script if the server does
    /// not know it.
    pub(crate) async fn run(self: &Arc<Self>, call: &Call, op: &str, name: &str) -> Result<Value> {
        let (mut conn, _) = self.conn()?;
        let timeout = self.config.command_timeout;
        let request = async {
            match call.cmd.query_async::<Value>(&mut conn).await {
                Err(e) if scripts::is_noscript(&e) => {
                    call.script.load_async(&mut conn).await?;
                    call.cmd.query_async::<Value>(&mut conn).await
                }
                reply => reply,
            }
        };
        // Boxed: the request's state (timer included) lives only while it is in flight, not
        // inline in every caller's future, so a task parked in a wait stays small.
        match Box::pin(tokio::time::timeout(timeout, request)).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(Error::from_redis(&format!("{op} `{name}`"), e)),
            Err(_) => Err(Error::timeout(&format!("{op} `{name}`"), timeout)),
        }
    }

    /// Best-effort release of `token`'s hold on `keys` (and of its queue entry), in the
    /// background: for dropped guards, abandoned acquires and orphan grants. Never blocks;
    /// without a runtime the lease simply expires.
    pub(crate) fn release_in_background(
        self: &Arc<Self>,
        keys: LockKeys,
        token: crate::token::OwnerToken,
        entry: Option<Arc<str>>,
    ) {
        let shared = self.clone();
        let spawned = spawn_detached(async move {
            let call = release_call(&keys, &token, entry.as_deref());
            match shared.run(&call, "background release", keys.name()).await {
                Ok(reply) => {
                    let outcome = shared.release_reply(&reply);
                    tracing::debug!(lock = %keys.name(), ?outcome, "dlock: background release");
                }
                Err(e) => {
                    tracing::warn!(lock = %keys.name(), error = %e, "dlock: background release failed; the lease will expire");
                }
            }
        });
        if !spawned {
            tracing::debug!(
                "dlock: no runtime for a background release; the lease will expire instead"
            );
        }
    }

    /// Reads `release.lua`'s answer; a hand-off to one of this client's own waiters wakes it
    /// right away (without waiting for the published message). `None` for an answer dlock does
    /// not know.
    pub(crate) fn release_reply(&self, reply: &Value) -> Option<ReleaseReply> {
        let reply = ReleaseReply::decode(reply)?;
        if let ReleaseReply::HandedOff { grant } = &reply {
            self.waiters.deliver_local(grant);
        }
        Some(reply)
    }
}

/// The error for a script reply dlock does not understand.
pub(crate) fn unexpected(op: &str, reply: &Value) -> Error {
    Error::protocol(format!(
        "{op}: unexpected script reply {reply:?}; is the server Redis 6.2 or newer and the key \
         written only by dlock?"
    ))
}

/// A call of `release.lua` for `token` (and its queue entry, if it was waiting).
pub(crate) fn release_call(
    keys: &LockKeys,
    token: &crate::token::OwnerToken,
    entry: Option<&str>,
) -> Call {
    let mut call = Call::new(&scripts::RELEASE, 1);
    call.arg(&*keys.lock).arg(token.as_bytes());
    if let Some(entry) = entry {
        call.arg(entry);
    }
    call
}

fn bad_url(e: redis::RedisError) -> Error {
    Error::invalid(format!(
        "cannot use this Redis URL: {e}; expected redis://[user][:password@]host[:port][/db]"
    ))
}

/// How to build a lazily connecting, auto-reconnecting connection to one server, with RESP3
/// push messages delivered to `push`.
fn single(
    info: redis::ConnectionInfo,
    (command_timeout, connect_timeout): (Duration, Duration),
    push: impl redis::aio::AsyncPushSender,
) -> Result<Factory> {
    let redis_settings = info
        .redis_settings()
        .clone()
        .set_protocol(ProtocolVersion::RESP3);
    let tcp = tcp_settings(info.tcp_settings().clone(), command_timeout);
    let info = info
        .set_redis_settings(redis_settings)
        .set_tcp_settings(tcp);
    let client = redis::Client::open(info)
        .map_err(|e| Error::invalid(format!("cannot use this Redis address: {e}")))?;
    let config = ConnectionManagerConfig::new()
        .set_push_sender(push)
        .set_automatic_resubscription()
        // The command timeout is applied by `Shared::run` around the whole request (waiting for
        // a reconnect included); a second per-response timer would only cost CPU.
        .set_response_timeout(None)
        .set_connection_timeout(Some(connect_timeout))
        .set_number_of_retries(1)
        .set_min_delay(Duration::from_millis(50))
        .set_max_delay(Duration::from_millis(500));
    Ok(Factory::Single(client, config))
}

/// How to build a lazily connecting cluster connection (one RESP3 connection per node).
fn cluster(
    nodes: Vec<redis::ConnectionInfo>,
    (command_timeout, connect_timeout): (Duration, Duration),
    push: impl redis::aio::AsyncPushSender,
) -> Result<Factory> {
    let first = nodes
        .first()
        .ok_or_else(|| Error::invalid("no cluster node given"))?;
    let tcp = tcp_settings(first.tcp_settings().clone(), command_timeout);
    let auth = first.redis_settings().clone();
    let mut builder = redis::cluster::ClusterClientBuilder::new(nodes.clone())
        .use_protocol(ProtocolVersion::RESP3)
        .push_sender(push)
        .tcp_settings(tcp)
        .response_timeout(command_timeout)
        .connection_timeout(connect_timeout)
        .retries(2);
    if let Some(user) = auth.username() {
        builder = builder.username(user);
    }
    if let Some(password) = auth.password() {
        builder = builder.password(password);
    }
    let client = builder
        .build()
        .map_err(|e| Error::invalid(format!("cannot use these cluster nodes: {e}")))?;
    Ok(Factory::Cluster(client))
}

fn validate_label(label: &str) -> Result<()> {
    if label.len() > MAX_LABEL_LEN {
        return Err(Error::invalid(format!(
            "lock label is {} bytes long; the limit is {MAX_LABEL_LEN} bytes",
            label.len()
        )));
    }
    if label.chars().any(char::is_control) {
        return Err(Error::invalid(format!(
            "lock label {label:?} contains control characters; use printable text"
        )));
    }
    Ok(())
}

/// Low latency (no Nagle delay) and dead-peer detection: keepalive probes on an idle
/// connection, and on Linux `TCP_USER_TIMEOUT`, which aborts a connection whose data stays
/// unacknowledged (a host that vanished without a reset) so that the manager reconnects instead
/// of timing out every request forever. A paused but live server still acknowledges, so it is
/// not mistaken for a dead one.
fn tcp_settings(
    base: redis::io::tcp::TcpSettings,
    command_timeout: Duration,
) -> redis::io::tcp::TcpSettings {
    let keepalive = redis::io::tcp::socket2::TcpKeepalive::new()
        .with_time(Duration::from_secs(5))
        .with_interval(Duration::from_secs(2));
    let tcp = base.set_nodelay(true).set_keepalive(keepalive);
    #[cfg(target_os = "linux")]
    let tcp = tcp.set_user_timeout((command_timeout * 3).max(Duration::from_secs(3)));
    #[cfg(not(target_os = "linux"))]
    let _ = command_timeout;
    tcp
}

/// `<host>\x1f<pid>` of this process.
fn holder_identity() -> String {
    let host = hostname::get()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "unknown-host".to_owned());
    let host: String = host.chars().filter(|c| !c.is_control()).collect();
    format!("{host}\x1f{}", std::process::id())
}
