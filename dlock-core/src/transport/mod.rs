//! The transport: how every request of a client reaches Redis, and the work it leaves to the
//! background.
//!
//! * [`Transport::run`]: one script call under the command timeout, loading the script when the
//!   server does not know it (`NOSCRIPT`: first use, a restart), the error classified (a dlock
//!   [`Error`] with the `redis` error as its source). [`Transport::query`] does the same for any
//!   command or pipeline.
//! * Releases in the background ([`Transport::release_in_background`]), for dropped guards,
//!   abandoned acquires and orphan grants; [`ReleaseOnDrop`] is the one guard that arms it.
//! * Release replies: a hand-off to one of this client's own waiters wakes it directly.
//!
//! Everything above this floor — leases, the watchdog, the lock kinds — talks to Redis only
//! through it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{FromRedisValue, ToRedisArgs, Value};
use tokio_util::task::TaskTracker;

pub(crate) mod conn;
pub(crate) mod durable;
pub(crate) mod listen;
pub(crate) mod native;
pub(crate) mod sentinel;
pub(crate) mod shards;
pub(crate) mod tls_probe;
pub(crate) mod wait;

use crate::error::{Error, ErrorKind, Result};
use crate::key::LockKeys;
use crate::runtime::spawn_detached;
use crate::scripts::wire::LockValue;
use crate::scripts::{self, Call, ReleaseReply};
use crate::token::OwnerToken;
use crate::transport::conn::{Conn, ConnSlot};
use crate::transport::listen::{Listeners, Subscription};
use crate::transport::wait::{Membership, Waiters};

/// A client's way to Redis: its connection, the registry of its waiting acquire calls and its
/// other listeners (which the connection's push messages reach), and its command timeout.
pub(crate) struct Transport {
    slot: Arc<ConnSlot>,
    pub(crate) waiters: Arc<Waiters>,
    pub(crate) listeners: Arc<Listeners>,
    command_timeout: Duration,
    /// Background releases in flight, which [`crate::Client::shutdown`] waits for.
    pub(crate) background: TaskTracker,
    /// `<host>\x1f<pid>`: who holds a lock, written into lock values and queue entries.
    pub(crate) holder: Arc<str>,
    /// Whether the server has `DELIFEQ`, once asked (`transport/native.rs`).
    native: native::NativeRelease,
}

impl Transport {
    pub(crate) fn new(
        slot: Arc<ConnSlot>,
        (waiters, listeners): (Arc<Waiters>, Arc<Listeners>),
        command_timeout: Duration,
        holder: Arc<str>,
    ) -> Self {
        Self {
            slot,
            waiters,
            listeners,
            command_timeout,
            background: TaskTracker::new(),
            holder,
            native: native::NativeRelease::default(),
        }
    }

    /// Listens on `channel` over the client's connection (see `transport/listen.rs`).
    pub(crate) async fn subscribe(&self, channel: &str) -> Result<Subscription> {
        let limit = self.settle().await?;
        let (conn, _) = self.conn()?;
        let subscribe = self.listeners.subscribe(&conn, channel);
        match Box::pin(tokio::time::timeout(limit, subscribe)).await {
            Ok(subscription) => subscription,
            Err(_) => Err(Error::timeout("subscribe", limit)),
        }
    }

    /// The time a request may take: the command timeout, less what it waited here for a
    /// Sentinel client's new master. A Sentinel client that is looking for its master (the one
    /// in use is suspected gone) waits for it first, so that the request goes to the new one;
    /// the wait counts against the same bound. Nothing to wait for other clients.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Connection`] when the sentinels named no master answering within
    /// the command timeout (the reason is the last one they gave).
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits.
    async fn settle(&self) -> Result<Duration> {
        if !self.slot.is_following() {
            return Ok(self.command_timeout);
        }
        let started = std::time::Instant::now();
        // Boxed: the wait stays out of every request's future.
        Box::pin(self.slot.settled(self.command_timeout)).await;
        let limit = self.command_timeout.saturating_sub(started.elapsed());
        if limit.is_zero() && self.slot.is_following() {
            return Err(self.slot.no_master_error(self.command_timeout));
        }
        Ok(limit.max(MIN_LIMIT_AFTER_SETTLE))
    }

    /// After a failed request of a Sentinel client: the master may be gone or demoted (a
    /// dropped connection, a `READONLY` reply, no answer in time), so ask the sentinels again.
    fn suspect(&self, error: &redis::RedisError) {
        if self.slot.is_sentinel()
            && (error.is_io_error()
                || error.is_connection_dropped()
                || error.is_connection_refusal()
                || error.is_timeout()
                || is_readonly(error))
        {
            self.slot.follow();
        }
    }

    /// Whether a waiting acquire whose request failed with `error` should ride it out rather
    /// than fail: a Sentinel client's connection or timeout error (the master may be changing),
    /// while the wait's `deadline` is ahead and the failures began (`streak`) less than
    /// [`FAILOVER_PATIENCE`] ago; on the application's connection, a connection error for one
    /// command timeout (a RESP2 `ConnectionManager` learns of a drop from the request that
    /// fails, and reconnects behind it; a waiter woken by the drop asks on it first). Other
    /// clients fail as before: a standalone server or a cluster that does not answer is
    /// reported within the command timeout.
    pub(crate) fn rides_out(
        &self,
        error: &Error,
        deadline: Option<Instant>,
        streak: Instant,
    ) -> bool {
        let patience = if self.slot.is_sentinel() {
            FAILOVER_PATIENCE
        } else if self.slot.is_borrowed() && error.kind() == ErrorKind::Connection {
            self.command_timeout
        } else {
            return false;
        };
        matches!(error.kind(), ErrorKind::Connection | ErrorKind::Timeout)
            && deadline.is_none_or(|d| Instant::now() < d)
            && streak.elapsed() < patience
    }

    /// After a waiting acquire's request failed and [`Transport::rides_out`] said so: asks the
    /// sentinels for the master again and waits until they named one (at most the command
    /// timeout, and no later than `deadline`), then a moment, so that a master that is still
    /// unreachable is not asked in a tight loop (on the application's connection: the moment
    /// alone, while it reconnects).
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits.
    pub(crate) async fn ride_out(&self, deadline: Option<Instant>) {
        self.slot.follow();
        let limit = deadline.map_or(self.command_timeout, |d| {
            self.command_timeout
                .min(d.saturating_duration_since(Instant::now()))
        });
        let pause = async {
            Box::pin(self.slot.settled(limit)).await;
            tokio::time::sleep(RIDE_OUT_PAUSE).await;
        };
        let _ = tokio::time::timeout(limit.max(RIDE_OUT_PAUSE), pause).await;
    }

    /// Joins `lock_key`'s wake channel again after the first join failed with `first`, for as
    /// long as [`Transport::rides_out`] allows (a Sentinel client's failover), on the connection
    /// of the master the sentinels name next.
    ///
    /// # Errors
    /// The last join's error when the failures are not to be ridden out (any other client, the
    /// deadline, [`FAILOVER_PATIENCE`]).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Waiters::join`].
    pub(crate) async fn join_again(
        &self,
        first: Error,
        lock_key: &Arc<str>,
        deadline: Option<Instant>,
    ) -> Result<Membership> {
        let streak = Instant::now();
        let mut error = first;
        while self.rides_out(&error, deadline, streak) {
            self.ride_out(deadline).await;
            let (conn, generation) = self.conn()?;
            match Box::pin(self.waiters.join((&conn, generation), lock_key)).await {
                Ok(membership) => return Ok(membership),
                Err(e) => error = e,
            }
        }
        Err(error)
    }

    /// The connection slot (shared with [`crate::Connection`]).
    pub(crate) fn slot(&self) -> &Arc<ConnSlot> {
        &self.slot
    }

    /// The connection to use now and its generation; see [`ConnSlot::conn`].
    pub(crate) fn conn(&self) -> Result<(Conn, u64)> {
        self.slot.conn()
    }

    /// The bound on every request.
    pub(crate) fn command_timeout(&self) -> Duration {
        self.command_timeout
    }

    /// The one shape of every request: wait out a Sentinel client's switch to a new master
    /// (part of the command timeout), take the connection, and send what `make` builds on it
    /// under what is left of the timeout ([`Transport::timed`]); `op` and `name` say what it
    /// was in errors.
    async fn request<'a, F>(
        &'a self,
        op: &'a str,
        name: &'a str,
        make: impl FnOnce(Conn) -> F,
    ) -> Result<Value>
    where
        F: Future<Output = redis::RedisResult<Value>> + 'a,
    {
        let limit = self.settle().await?;
        let (conn, generation) = self.conn()?;
        let sent = (generation, Instant::now());
        self.timed(make(conn), limit, (op, name), sent).await
    }

    /// Sends one script call under the command timeout, loading the script if the server does
    /// not know it.
    pub(crate) async fn run(&self, call: &Call, op: &str, name: &str) -> Result<Value> {
        self.request(op, name, |mut conn| async move {
            match call.cmd.query_async::<Value>(&mut conn).await {
                Err(e) if scripts::is_noscript(&e) => {
                    call.script.load_async(&mut conn).await?;
                    call.cmd.query_async::<Value>(&mut conn).await
                }
                reply => reply,
            }
        })
        .await
    }

    /// Sends one plain command of `op` on the lock `name` under the command timeout. A server
    /// error is explained as a failed request's is (a `WRONGTYPE` is `ErrorKind::WrongType`).
    pub(crate) async fn command(&self, cmd: &redis::Cmd, op: &str, name: &str) -> Result<Value> {
        self.request(op, name, |mut conn| async move {
            cmd.query_async(&mut conn).await
        })
        .await
    }

    /// Sends one command under the command timeout and converts its reply.
    pub(crate) async fn query<T: FromRedisValue>(&self, cmd: &redis::Cmd, what: &str) -> Result<T> {
        let value = self.command(cmd, what, "").await?;
        convert(value, what)
    }

    /// Sends a pipeline under the command timeout and converts its replies.
    pub(crate) async fn query_pipe<T: FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
        what: &str,
    ) -> Result<T> {
        let value = self
            .request(what, "", |mut conn| async move {
                pipe.query_async(&mut conn).await
            })
            .await?;
        convert(value, what)
    }

    /// Sends `pipe` (built with `ignore_errors`, so that each command's server error comes back
    /// as its own reply) under the command timeout.
    pub(crate) async fn pipeline(
        &self,
        pipe: &redis::Pipeline,
        op: &str,
        name: &str,
    ) -> Result<Vec<Value>> {
        let value = self
            .request(op, name, |mut conn| async move {
                pipe.query_async(&mut conn).await
            })
            .await?;
        match value {
            Value::Array(replies) => {
                // Each command's error is its own reply here: a demoted master says READONLY.
                if self.slot.is_sentinel()
                    && let Some(Value::ServerError(e)) =
                        replies.iter().find(|r| matches!(r, Value::ServerError(_)))
                {
                    self.suspect(&e.clone().into());
                }
                Ok(replies)
            }
            other => Err(scripts::unexpected(op, &other)),
        }
    }

    /// Runs a script invocation (loading the script when the server does not know it) under
    /// the command timeout and converts its reply.
    pub(crate) async fn invoke<T: FromRedisValue>(
        &self,
        invocation: &redis::ScriptInvocation<'_>,
        what: &str,
    ) -> Result<T> {
        let value = self
            .request(what, "", |mut conn| async move {
                invocation.invoke_async(&mut conn).await
            })
            .await?;
        convert(value, what)
    }

    /// Bounds `request` by `limit` (the command timeout, less a wait for a Sentinel client's
    /// new master: see [`Transport::settle`]); `op` and `name` say what it was in errors.
    ///
    /// Not an `async fn`: the request (and its timer) is boxed here, at the call, so its state
    /// lives only while it is in flight and never inline in the caller's future — an `async
    /// fn` would keep the unboxed argument in its own state, and every acquire future would
    /// carry the largest request it can make, also while it only waits for its turn.
    ///
    /// `sent` is the connection's generation and when the request went out: a standalone or
    /// Sentinel client's own connection that stays silent past the timeout is replaced
    /// (`transport/conn/rotate.rs`).
    fn timed<'a>(
        &'a self,
        request: impl Future<Output = redis::RedisResult<Value>> + 'a,
        limit: Duration,
        (op, name): (&'a str, &'a str),
        (generation, sent): (u64, Instant),
    ) -> impl Future<Output = Result<Value>> + 'a {
        let request = Box::pin(self.slot.within(limit, request));
        // The error's explanation fits in the same budget (`transport/conn/explain.rs`).
        let by = Instant::now() + limit;
        async move {
            let context = || {
                if name.is_empty() {
                    op.to_owned()
                } else {
                    format!("{op} `{name}`")
                }
            };
            match request.await {
                Ok(Ok(value)) => {
                    self.slot.succeeded();
                    self.slot.answered(generation);
                    Ok(value)
                }
                // Boxed: the error path's state (it may ask the seed nodes) stays out of line.
                Ok(Err(e)) => {
                    if !(e.is_io_error() || e.is_connection_dropped() || e.is_timeout()) {
                        self.slot.answered(generation);
                    }
                    self.suspect(&e);
                    let context = context();
                    let explained = self.slot.explain(&context, name, e, by);
                    Err(Box::pin(explained).await)
                }
                Err(_) => {
                    self.slot.timed_out(generation, sent, limit);
                    self.slot.follow();
                    let timeout = Error::timeout(&context(), limit);
                    Err(Box::pin(self.slot.explain_timeout(timeout)).await)
                }
            }
        }
    }

    /// `error`, a command's own error inside a reply that arrived (a pipeline's), explained as
    /// a failed request's is (`ConnSlot::explain`): `op` on the lock `name`.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub(crate) async fn explain(&self, op: &str, name: &str, error: redis::RedisError) -> Error {
        let context = format!("{op} `{name}`");
        let by = Instant::now() + self.command_timeout;
        Box::pin(self.slot.explain(&context, name, error, by)).await
    }

    /// The native release (`transport/native.rs`) of the hold of `keys` whose lock holds
    /// `value`, the whole value its `SET` wrote: `Ok(true)` when `DELIFEQ` deleted it
    /// (released; nobody waited); `Ok(false)` when the caller runs release.lua with the same
    /// arguments (no `DELIFEQ` on this server, or it answered 0 or refused). The first call
    /// asks the server whether it has the command (`COMMAND INFO DELIFEQ`); concurrent first
    /// calls may each ask.
    ///
    /// # Errors
    /// [`ErrorKind::Connection`] / [`ErrorKind::Timeout`]: `DELIFEQ` may or may not have run
    /// (the caller's pending release, owner-checked, settles it).
    ///
    /// # Cancel safety
    /// As any release: dropped mid-way, the lock may be deleted already (the caller's
    /// `ReleaseOnDrop` then runs release.lua, which answers "expired").
    pub(crate) async fn release_native(
        &self,
        keys: &LockKeys,
        value: &LockValue<'_>,
    ) -> Result<bool> {
        let available = match self.native.known() {
            Some(known) => known,
            None => {
                let mut ask = redis::cmd("COMMAND");
                ask.arg("INFO").arg("DELIFEQ");
                let asked = self.command(&ask, "COMMAND INFO DELIFEQ", "").await;
                let available = self.native.learn(asked)?;
                if available {
                    // release.lua still serves every other release (a 0, a waited lock, the
                    // background ones): loaded now, as a release through it would have. A
                    // background release whose EVALSHA met NOSCRIPT and then timed out (the
                    // server paused) would leave the lock to its lease.
                    self.request("release", keys.name(), |mut conn| async move {
                        scripts::RELEASE
                            .load_async(&mut conn)
                            .await
                            .map(|_| Value::Okay)
                    })
                    .await?;
                }
                available
            }
        };
        if !available {
            return Ok(false);
        }
        let cmd = native::delifeq(&keys.lock, value);
        let reply = self.command(&cmd, "release", keys.name()).await;
        self.native.answered(reply, keys.name())
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

    /// Best-effort release of `token`'s hold on `keys` (and of its queue entry), in the
    /// background: for dropped guards, abandoned acquires and orphan grants. Never blocks;
    /// without a runtime the lease simply expires.
    ///
    /// A Sentinel client retries a release that met a failover (no connection, no answer) on
    /// the master it finds next, up to [`FAILOVER_RELEASE_ATTEMPTS`] times: a lock that
    /// survived the failover on the promoted replica would otherwise keep every waiter out
    /// until its lease ran out. The release is owner-checked, so a retry is harmless.
    pub(crate) fn release_in_background(
        self: &Arc<Self>,
        keys: LockKeys,
        token: OwnerToken,
        entry: Option<Arc<str>>,
    ) {
        let call = release_call(&keys, token, entry.as_deref());
        self.release_on_kept(&keys, &call);
        let transport = self.clone();
        let spawned = spawn_detached(self.background.track_future(async move {
            let mut attempts = 1;
            let released = loop {
                let released = transport
                    .run(&call, "background release", keys.name())
                    .await;
                match &released {
                    Err(e)
                        if transport.slot.is_sentinel()
                            && (e.is_connection() || e.is_timeout())
                            && attempts < FAILOVER_RELEASE_ATTEMPTS =>
                    {
                        tracing::debug!(lock = %keys.name(), error = %e, "dlock: background release met a failover; retrying on the next master");
                        attempts += 1;
                        // The next `run` waits for the re-resolution; this pause only keeps a
                        // master that refuses connections from being asked in a tight loop.
                        tokio::time::sleep(FAILOVER_RELEASE_PAUSE).await;
                    }
                    _ => break released,
                }
            };
            match released {
                Ok(reply) => {
                    let outcome = transport.release_reply(&reply);
                    tracing::debug!(lock = %keys.name(), ?outcome, "dlock: background release");
                }
                Err(e) => {
                    tracing::warn!(lock = %keys.name(), error = %e, "dlock: background release failed; the lease will expire");
                }
            }
        }));
        if !spawned {
            tracing::debug!(
                "dlock: no runtime for a background release; the lease will expire instead"
            );
        }
    }
}

impl Transport {
    /// Sends `call` (a background release) also on each connection the slot replaced and still
    /// keeps, as `EVAL`, so that it runs after whatever that connection carried — an abandoned
    /// acquire's `SET` among it (`transport/conn/rotate.rs`). Owner-checked, so it is harmless
    /// where nothing was left; bounded by the time each connection is kept.
    fn release_on_kept(self: &Arc<Self>, keys: &LockKeys, call: &Call) {
        let kept = self.slot.kept();
        if kept.is_empty() {
            return;
        }
        let Some(eval) = call.eval() else {
            return;
        };
        for (until, mut conn) in kept {
            let transport = self.clone();
            let (eval, name) = (eval.clone(), keys.name().to_owned());
            spawn_detached(self.background.track_future(async move {
                let limit = until.saturating_duration_since(Instant::now());
                let sent = tokio::time::timeout(limit, eval.query_async::<Value>(&mut conn));
                match sent.await {
                    Ok(Ok(reply)) => {
                        let outcome = transport.release_reply(&reply);
                        tracing::debug!(lock = %name, ?outcome, "dlock: background release on a replaced connection");
                    }
                    Ok(Err(e)) => {
                        tracing::debug!(lock = %name, error = %e, "dlock: background release on a replaced connection failed");
                    }
                    Err(_) => {
                        tracing::debug!(lock = %name, "dlock: a replaced connection stayed silent; its background release was not answered");
                    }
                }
            }));
        }
    }
}

/// How long a waiting acquire of a Sentinel client rides out a streak of connection failures at
/// most (a wait whose deadline comes sooner ends then): longer than a failover takes with the
/// sentinels' default `down-after-milliseconds` (30 s), short enough that a master gone for good
/// is reported.
const FAILOVER_PATIENCE: Duration = Duration::from_secs(60);

/// The pause after a ridden-out failure before the next request (see [`Transport::ride_out`]).
const RIDE_OUT_PAUSE: Duration = Duration::from_millis(50);

/// The least time a request is given after it waited for a Sentinel client's new master that
/// was found just at the end of the command timeout (a request given no time would fail for
/// nothing).
const MIN_LIMIT_AFTER_SETTLE: Duration = Duration::from_millis(100);

/// How many times a Sentinel client's background release is sent when it meets a failover
/// (each attempt waits up to the command timeout for the new master).
const FAILOVER_RELEASE_ATTEMPTS: u32 = 10;

/// The pause between two such attempts.
const FAILOVER_RELEASE_PAUSE: Duration = Duration::from_millis(200);

/// Whether `error` is a write refused by a replica (also when raised inside a script).
fn is_readonly(error: &redis::RedisError) -> bool {
    error.code() == Some("READONLY")
        || error
            .detail()
            .is_some_and(|d| d.contains("READONLY") || d.contains("read only replica"))
}

/// A reply as `T`, or the error that says what did not fit.
fn convert<T: FromRedisValue>(value: Value, what: &str) -> Result<T> {
    T::from_redis_value(value).map_err(|e| Error::from_redis(what, e.into()))
}

/// A call of `release.lua` for `owner` — the owner's token, or the whole lock value it wrote
/// (see `release.lua`) — and its queue entry, if it was waiting.
pub(crate) fn release_call(keys: &LockKeys, owner: impl ToRedisArgs, entry: Option<&str>) -> Call {
    let script = if keys.kind().is_shared() {
        &scripts::SHARED_RELEASE
    } else {
        &scripts::RELEASE
    };
    let mut call = Call::new(script, 1);
    call.arg(&*keys.lock).arg(owner).arg(keys.counter());
    if let Some(entry) = entry {
        call.arg(entry);
    }
    call
}

/// Releases, in the background, whatever an unfinished request may have left on the server —
/// a lock taken by a request whose reply never arrived, a queue entry, a guard's lock whose
/// release did not get its answer — unless disarmed. Owner-checked, so it is harmless when
/// nothing was left.
pub(crate) struct ReleaseOnDrop<'a> {
    transport: &'a Arc<Transport>,
    keys: &'a LockKeys,
    token: OwnerToken,
    entry: Option<Arc<str>>,
    armed: bool,
}

impl<'a> ReleaseOnDrop<'a> {
    /// Armed from the start: a request is about to be sent.
    pub(crate) fn new(
        transport: &'a Arc<Transport>,
        keys: &'a LockKeys,
        token: OwnerToken,
    ) -> Self {
        Self {
            transport,
            keys,
            token,
            entry: None,
            armed: true,
        }
    }

    /// Armed again, now also for the queue entry `entry`.
    pub(crate) fn arm(&mut self, entry: Arc<str>) {
        self.entry = Some(entry);
        self.armed = true;
    }

    /// The request got its answer: nothing to release.
    pub(crate) fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for ReleaseOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.transport
                .release_in_background(self.keys.clone(), self.token, self.entry.take());
        }
    }
}
