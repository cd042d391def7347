//! [`RedisServer`]: one `redis-server` child process in its own temp dir, with fault injection.
//!
//! Invariants: while `child` is `Some`, a process we spawned serves `port` (it was checked by pid
//! at startup); the temp dir outlives every process that writes into it (fields drop in
//! declaration order, and `Drop` kills the process first anyway).

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::launch::{LaunchError, launch, server_url, wipe_data};
use crate::lock_keys::{DEFAULT_KEY_PREFIX, HolderKeys};
use crate::options::LOG_FILE;
use crate::port::free_port;
use crate::tls::TlsMaterial;
use crate::{ChildGuard, HarnessError, ServerOptions, redis_server_binary};

/// How many fresh ports [`RedisServer::start_with`] tries when it keeps losing the port race.
const START_ATTEMPTS: usize = 10;
/// How long [`RedisServer::restart`] waits for its port to become free again.
const RESTART_WINDOW: Duration = Duration::from_secs(5);
/// Pause between restart attempts while the port is taken.
const RESTART_RETRY_INTERVAL: Duration = Duration::from_millis(100);
/// Timeout of [`RedisServer::connection`] (connect and connection setup).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// One `redis-server` child process on 127.0.0.1, in its own temp dir, with no persistence.
///
/// Dropping it kills (SIGKILL, after SIGCONT if paused) and reaps the process, then removes the
/// directory. If the test process itself is killed, the server outlives it: a parent's death
/// cannot be tied to the child's without `unsafe` (`prctl` in `pre_exec`).
///
/// # Example
///
/// ```no_run
/// use dlock_testkit::RedisServer;
///
/// let mut server = RedisServer::start()?;
/// let mut con = server.connection()?;
/// let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut con)?;
///
/// server.restart()?; // same port, empty data
/// let mut con = server.connection()?;
/// let v: Option<String> = redis::cmd("GET").arg("k").query(&mut con)?;
/// assert_eq!(v, None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RedisServer {
    child: Option<ChildGuard>,
    paused: AtomicBool,
    port: u16,
    binary: PathBuf,
    options: ServerOptions,
    dir: TempDir,
    /// The TLS port and certificates, with [`ServerOptions::tls`] (boxed: most servers have
    /// none, and a server handle is moved around by value).
    tls: Option<Box<(u16, TlsMaterial)>>,
}

impl RedisServer {
    /// Starts a standalone server with the default [`ServerOptions`] and waits until it answers.
    ///
    /// # Errors
    ///
    /// As [`start_with`](Self::start_with).
    ///
    /// # Example
    ///
    /// ```no_run
    /// let server = dlock_testkit::RedisServer::start()?;
    /// println!("{}", server.url());
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn start() -> Result<RedisServer, HarnessError> {
        Self::start_with(ServerOptions::new())
    }

    /// Starts a server with `options` on a free port and waits (up to 10 s) until it answers
    /// `PING`. A port taken by another process before the server could bind it is retried with
    /// a new port, up to 10 times.
    ///
    /// # Errors
    ///
    /// When `redis-server` is not found, an option is reserved by the harness, the temp dir
    /// cannot be created, or the server exits or does not answer in time. Startup errors include
    /// the command line and the tail of the server's log and stderr.
    ///
    /// # Example
    ///
    /// ```no_run
    /// use dlock_testkit::{RedisServer, ServerOptions};
    ///
    /// let server = RedisServer::start_with(ServerOptions::new().arg("maxmemory", "10mb"))?;
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn start_with(options: ServerOptions) -> Result<RedisServer, HarnessError> {
        options.validate()?;
        let binary = match options.chosen_binary() {
            Some(chosen) => chosen.to_path_buf(),
            None => redis_server_binary()?,
        };
        let mut last_error = None;
        for _ in 0..START_ATTEMPTS {
            let dir = TempDir::with_prefix("dlock-testkit-")
                .map_err(|e| HarnessError::new("cannot create a temp dir").with_source(e))?;
            let port = free_port(options.is_cluster())?;
            let (effective, tls) = if options.has_tls() {
                let authority = match options.authority() {
                    Some(shared) => shared.clone(),
                    None => std::sync::Arc::new(crate::tls::Authority::new()?),
                };
                let files = authority.issue_server(dir.path())?;
                let material = authority.material().clone();
                let tls_port = free_port(false)?;
                (
                    options.with_tls_args(tls_port, &files),
                    Some(Box::new((tls_port, material))),
                )
            } else {
                (options.clone(), None)
            };
            match launch(&binary, port, dir.path(), &effective) {
                Ok(child) => {
                    return Ok(RedisServer {
                        child: Some(child),
                        paused: AtomicBool::new(false),
                        port,
                        binary,
                        options: effective,
                        dir,
                        tls,
                    });
                }
                Err(LaunchError::PortTaken(error)) => last_error = Some(error),
                Err(LaunchError::Failed(error)) => return Err(error),
            }
        }
        let error = HarnessError::new(format!(
            "could not start redis-server: {START_ATTEMPTS} free ports in a row were taken \
             before it could bind them"
        ));
        Err(match last_error {
            Some(last) => error.with_source(last),
            None => error,
        })
    }

    /// The port other servers replicate from (`REPLICAOF`) and sentinels monitor: the TLS port
    /// when the server replicates over TLS (`tls-replication yes`), else the plain port.
    pub(crate) fn replication_port(&self) -> u16 {
        let tls_replication = self
            .options
            .args()
            .iter()
            .rev()
            .find(|(name, _)| name.eq_ignore_ascii_case("tls-replication"))
            .is_some_and(|(_, value)| value.eq_ignore_ascii_case("yes"));
        match self.tls_port() {
            Some(port) if tls_replication => port,
            _ => self.port,
        }
    }

    /// The TLS port on 127.0.0.1, with [`ServerOptions::tls`] (unchanged by a restart).
    pub fn tls_port(&self) -> Option<u16> {
        self.tls.as_deref().map(|(port, _)| *port)
    }

    /// `rediss://127.0.0.1:<tls port>/` (with the password, if `requirepass` is set), with
    /// [`ServerOptions::tls`]. A client must trust [`TlsMaterial::ca_pem`] to verify it.
    pub fn tls_url(&self) -> Option<String> {
        let port = self.tls_port()?;
        Some(match self.options.password() {
            Some(password) => format!("rediss://:{password}@127.0.0.1:{port}/"),
            None => format!("rediss://127.0.0.1:{port}/"),
        })
    }

    /// The CA and the client certificate of the TLS port, with [`ServerOptions::tls`].
    pub fn tls(&self) -> Option<&TlsMaterial> {
        self.tls.as_deref().map(|(_, material)| material)
    }

    /// The TCP port on 127.0.0.1 (unchanged by [`restart`](Self::restart)).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let server = dlock_testkit::RedisServer::start()?;
    /// let addr = format!("127.0.0.1:{}", server.port());
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The connection URL, `redis://127.0.0.1:PORT/` (`redis://:PASSWORD@127.0.0.1:PORT/` when
    /// `requirepass` was configured).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let server = dlock_testkit::RedisServer::start()?;
    /// let client = redis::Client::open(server.url())?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn url(&self) -> String {
        server_url(self.port, self.options.password())
    }

    /// The server's process id; `None` after [`kill`](Self::kill) (until a restart).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let mut server = dlock_testkit::RedisServer::start()?;
    /// assert!(server.pid().is_some());
    /// server.kill();
    /// assert_eq!(server.pid(), None);
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(ChildGuard::pid)
    }

    /// A new synchronous connection, for test setup and assertions (not for the code under
    /// test, which brings its own async connections).
    ///
    /// # Errors
    ///
    /// When the server cannot be reached within 5 s: killed, paused, or crashed. The error
    /// includes the tail of the server log.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let server = dlock_testkit::RedisServer::start()?;
    /// let mut con = server.connection()?;
    /// let pong: String = redis::cmd("PING").query(&mut con)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn connection(&self) -> Result<redis::Connection, HarnessError> {
        redis::Client::open(self.url())
            .and_then(|client| client.get_connection_with_timeout(CONNECT_TIMEOUT))
            .map_err(|e| {
                HarnessError::new(format!(
                    "cannot connect to redis-server on port {}",
                    self.port
                ))
                .with_file_tail("server log", &self.log_path())
                .with_source(e)
            })
    }

    /// Kills the server (SIGKILL, after SIGCONT if paused) and reaps it: a crash. The port then
    /// refuses connections. Idempotent; never panics.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let mut server = dlock_testkit::RedisServer::start()?;
    /// server.kill();
    /// assert!(server.connection().is_err());
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            if self.paused.swap(false, Ordering::SeqCst) {
                // Not needed for SIGKILL to work, but leaves no stopped process behind if the
                // kill itself fails.
                let _ = child.cont();
            }
            child.kill();
        }
    }

    /// Restarts the server with **empty data** on the same port: kills the running process (if
    /// any), deletes every file of its directory but the logs, and starts a new process, waiting
    /// up to 5 s for the port to be free. Models a restart that lost data; a cluster node comes
    /// back as a fresh node that belongs to no cluster and serves no slots (see
    /// [`RedisCluster::restart_node`](crate::RedisCluster::restart_node) for one that rejoins).
    ///
    /// # Errors
    ///
    /// When the data files cannot be removed, the port stays taken for 5 s, or the new process
    /// fails to start (the error includes the log tail).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let mut server = dlock_testkit::RedisServer::start()?;
    /// let port = server.port();
    /// server.restart()?;
    /// assert_eq!(server.port(), port);
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn restart(&mut self) -> Result<(), HarnessError> {
        self.restart_keeping(&[])
    }

    /// [`restart`](Self::restart), keeping the files named in `keep` (a cluster node's
    /// `nodes.conf`, so that it comes back as the same node).
    pub(crate) fn restart_keeping(&mut self, keep: &[&str]) -> Result<(), HarnessError> {
        self.kill();
        wipe_data(self.dir.path(), keep)?;
        self.relaunch()
    }

    /// Kills the server (SIGKILL: a crash) and starts it again at once on the same port, from
    /// the files in its directory: what the last `SAVE` (or `BGSAVE`) wrote comes back, and
    /// every later write is lost — a crash that loses the latest writes, as a snapshot or an
    /// AOF not yet synced does. (The harness's servers take no snapshot by themselves.)
    ///
    /// # Errors
    ///
    /// As [`restart`](Self::restart).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let mut server = dlock_testkit::RedisServer::start()?;
    /// let mut con = server.connection()?;
    /// redis::cmd("SET").arg("k").arg("saved").exec(&mut con)?;
    /// redis::cmd("SAVE").exec(&mut con)?;
    /// redis::cmd("SET").arg("k").arg("lost").exec(&mut con)?;
    /// server.crash_and_recover()?;
    /// let k: String = redis::cmd("GET").arg("k").query(&mut server.connection()?)?;
    /// assert_eq!(k, "saved");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn crash_and_recover(&mut self) -> Result<(), HarnessError> {
        self.kill();
        self.relaunch()
    }

    /// Starts the (killed) server again on its port, waiting up to 5 s for the port to be
    /// free.
    fn relaunch(&mut self) -> Result<(), HarnessError> {
        let deadline = Instant::now() + RESTART_WINDOW;
        loop {
            match launch(&self.binary, self.port, self.dir.path(), &self.options) {
                Ok(child) => {
                    self.child = Some(child);
                    return Ok(());
                }
                Err(LaunchError::PortTaken(error)) => {
                    if Instant::now() >= deadline {
                        return Err(HarnessError::new(format!(
                            "cannot restart redis-server: port {} stayed taken for {} s",
                            self.port,
                            RESTART_WINDOW.as_secs()
                        ))
                        .with_source(error));
                    }
                    thread::sleep(RESTART_RETRY_INTERVAL);
                }
                Err(LaunchError::Failed(error)) => return Err(error),
            }
        }
    }

    /// Freezes the server with SIGSTOP: connections stay open but nothing is answered, as with
    /// a hung server or a network partition that drops packets. Undo with
    /// [`resume`](Self::resume).
    ///
    /// # Errors
    ///
    /// When the server is not running (killed, or exited).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let server = dlock_testkit::RedisServer::start()?;
    /// server.pause()?;
    /// // ... a lock holder's renewals now time out ...
    /// server.resume()?;
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn pause(&self) -> Result<(), HarnessError> {
        self.running()?.stop()?;
        self.paused.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// Lets a server frozen by [`pause`](Self::pause) run again (SIGCONT).
    ///
    /// # Errors
    ///
    /// When the server is not running (killed, or exited).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let server = dlock_testkit::RedisServer::start()?;
    /// server.pause()?;
    /// server.resume()?;
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn resume(&self) -> Result<(), HarnessError> {
        self.running()?.cont()?;
        self.paused.store(false, Ordering::SeqCst);
        Ok(())
    }

    /// Moves the server's wall clock `ahead` further forward (cumulative), as an NTP step or an
    /// operator would, and returns once the server's `TIME` shows it. Keys whose expiry time is
    /// now in the past are gone for every reader; the monotonic clock is unchanged. The offset
    /// survives [`restart`](Self::restart).
    ///
    /// # Errors
    ///
    /// When the server was not started with [`ServerOptions::movable_clock`], is not running,
    /// or does not show the new time within 5 s.
    ///
    /// # Example
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # let server = dlock_testkit::RedisServer::start_with(
    /// #     dlock_testkit::ServerOptions::new().movable_clock())?;
    /// server.jump_clock(Duration::from_secs(30))?;
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn jump_clock(&self, ahead: Duration) -> Result<(), HarnessError> {
        if !self.options.has_movable_clock() {
            return Err(HarnessError::new(
                "jump_clock: start the server with ServerOptions::movable_clock()",
            ));
        }
        self.running()?;
        let ahead = i64::try_from(ahead.as_micros())
            .map_err(|_| HarnessError::new("jump_clock: the jump is too large"))?;
        let dir = self.dir.path();
        let offset = crate::clock::read_offset(dir).saturating_add(ahead);
        let before = server_time_us(self)?;
        crate::clock::write_offset(dir, offset)?;
        // The shim re-reads the offset within about a millisecond: wait until it did.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if server_time_us(self)? >= before.saturating_add(ahead) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(HarnessError::new(
                    "jump_clock: the server's TIME did not move within 5 s (is the clock shim \
                     loaded? see the server's stdout/stderr log)",
                ));
            }
            thread::sleep(Duration::from_millis(1));
        }
    }

    /// The lease is lost now: removes the keys that say who holds the lock `name` of a dlock
    /// client with the default key prefix ([`DEFAULT_KEY_PREFIX`], `dlock:`), whatever the
    /// lock's kind, and returns how many keys went. The holder learns it at its next renewal,
    /// which finds the lock gone: with the watchdog, within one renewal interval (a third of the
    /// lease by default), its `lease.lost()` resolves and its cancellation token fires (dlock
    /// reports `LostReason::Removed`, or `Expired` if that renewal's answer came after the
    /// lease could have ended); without it, its next `extend` or `release` finds the lock gone.
    /// Anyone may acquire the lock at once, as after a lease that ran out.
    ///
    /// The keys (see `dlock-core/src/key.rs`): `dlock:{name}` for a mutex, `dlock:{name}:sem`
    /// and `:sem:exp` for a semaphore, `dlock:{name}:rw` and `:rw:exp` for a read-write lock —
    /// every holder of the name loses its lease. The waiters' queues and a semaphore's kept
    /// limit stay, as they do when a lease runs out.
    ///
    /// For a client built with `key_prefix(…)`, use
    /// [`expire_lock_with_prefix`](Self::expire_lock_with_prefix); on a cluster,
    /// [`RedisCluster::expire_lock`](crate::RedisCluster::expire_lock), which finds the node
    /// that serves the name.
    ///
    /// # Errors
    ///
    /// When no such key exists (the lock is not held, its lease already ran out, or the client
    /// uses another key prefix): the fault did not land, and the error lists the keys it
    /// looked for. Also when the name is one dlock refuses (empty, braces, control
    /// characters), or the server cannot be reached or refuses the `DEL` (killed, paused, a
    /// cluster node that does not serve the name).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let server = dlock_testkit::RedisServer::start()?;
    /// // ... the code under test holds the lock "invoice:7" on `server` ...
    /// assert_eq!(server.expire_lock("invoice:7")?, 1); // a mutex: one key
    /// // ... now check that it stops working under the lock ...
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn expire_lock(&self, name: &str) -> Result<usize, HarnessError> {
        self.expire_lock_with_prefix(DEFAULT_KEY_PREFIX, name)
    }

    /// [`expire_lock`](Self::expire_lock) for a dlock client whose key prefix is `prefix` (the
    /// value it was given with `key_prefix(…)`; `Client::key_prefix()` returns it).
    ///
    /// # Errors
    ///
    /// As [`expire_lock`](Self::expire_lock); also when the prefix has braces or control
    /// characters (dlock refuses them).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let server = dlock_testkit::RedisServer::start()?;
    /// // The client under test was built with `.key_prefix("billing:locks:")`.
    /// server.expire_lock_with_prefix("billing:locks:", "invoice:7")?;
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn expire_lock_with_prefix(&self, prefix: &str, name: &str) -> Result<usize, HarnessError> {
        let keys = HolderKeys::new(prefix, name)?;
        let removed = self.query(&keys.delete(), "expire_lock: DEL")?;
        keys.outcome(removed, &self.address())
    }

    /// Cuts every client connection to the server, as a network blip or a proxy restart would,
    /// and returns how many it cut: `CLIENT KILL TYPE normal` and `TYPE pubsub`, skipping the
    /// connection that sends them. The server keeps running and its data stays; replication
    /// links to replicas are kept. A connection open before is broken: its next command fails
    /// (a plain `redis::Connection`), or it reconnects (a `ConnectionManager`, as dlock's
    /// client does); a subscriber loses its subscriptions until it resubscribes. Sentinels'
    /// connections are cut too, and they reconnect.
    ///
    /// Pub/sub connections are cut as well because dlock's waiters learn of a release through
    /// one: a real network fault does not spare them.
    ///
    /// # Errors
    ///
    /// When the server cannot be reached (killed, paused) or refuses `CLIENT KILL` (an ACL
    /// user without the right: the harness connects with the default user).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let server = dlock_testkit::RedisServer::start()?;
    /// let mut before = server.connection()?;
    /// assert_eq!(server.cut_connections()?, 1);
    /// assert!(redis::cmd("PING").query::<String>(&mut before).is_err());
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn cut_connections(&self) -> Result<usize, HarnessError> {
        let mut con = self.connection()?;
        let mut cut = 0;
        for kind in ["normal", "pubsub"] {
            let mut cmd = redis::cmd("CLIENT");
            cmd.arg("KILL")
                .arg("TYPE")
                .arg(kind)
                .arg("SKIPME")
                .arg("yes");
            let what = format!("cut_connections: CLIENT KILL TYPE {kind}");
            cut += self.query_on::<usize>(&mut con, &cmd, &what)?;
        }
        Ok(cut)
    }

    /// The content of the server's log file (all runs, if it was restarted); empty if unreadable.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let server = dlock_testkit::RedisServer::start()?;
    /// assert!(server.log().contains("Ready to accept connections"));
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn log(&self) -> String {
        fs::read(self.log_path())
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default()
    }

    /// The server's directory (working dir, log files, `nodes.conf` of a cluster node). It is
    /// removed when the server is dropped.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let server = dlock_testkit::RedisServer::start()?;
    /// println!("logs in {}", server.dir().display());
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The options the server was started with (a replica set reads the password from them).
    pub(crate) fn options(&self) -> &ServerOptions {
        &self.options
    }

    /// `127.0.0.1:<port>`, for messages.
    pub(crate) fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Runs `cmd` on a new connection; the error says `what` failed, and where.
    pub(crate) fn query<T: redis::FromRedisValue>(
        &self,
        cmd: &redis::Cmd,
        what: &str,
    ) -> Result<T, HarnessError> {
        self.query_on(&mut self.connection()?, cmd, what)
    }

    fn query_on<T: redis::FromRedisValue>(
        &self,
        con: &mut redis::Connection,
        cmd: &redis::Cmd,
        what: &str,
    ) -> Result<T, HarnessError> {
        cmd.query(con).map_err(|error| {
            HarnessError::new(format!("{what} failed on redis-server {}", self.address()))
                .with_source(error)
        })
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join(LOG_FILE)
    }

    fn running(&self) -> Result<&ChildGuard, HarnessError> {
        self.child.as_ref().ok_or_else(|| {
            HarnessError::new(format!(
                "redis-server on port {} is not running (it was killed)",
                self.port
            ))
        })
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

impl fmt::Debug for RedisServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            child,
            paused,
            port,
            binary,
            options,
            dir,
            tls,
        } = self;
        f.debug_struct("RedisServer")
            .field("port", port)
            .field("tls_port", &tls.as_deref().map(|(port, _)| port))
            .field("pid", &child.as_ref().map(ChildGuard::pid))
            .field("paused", &paused.load(Ordering::SeqCst))
            .field("dir", &dir.path())
            .field("binary", binary)
            .field("options", options)
            .finish()
    }
}

/// The server's `TIME`, in microseconds since the epoch.
fn server_time_us(server: &RedisServer) -> Result<i64, HarnessError> {
    let mut con = server.connection()?;
    let (secs, micros): (i64, i64) = redis::cmd("TIME")
        .query(&mut con)
        .map_err(|e| HarnessError::new("TIME failed").with_source(e))?;
    Ok(secs * 1_000_000 + micros)
}
