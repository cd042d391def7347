//! [`RedisSentinels`]: Redis Sentinel processes (`redis-server <conf> --sentinel`) watching a
//! [`RedisReplicaSet`], for failover tests.
//!
//! A sentinel needs a config file it can rewrite (it records what it learns: its id, replicas,
//! other sentinels, the current master), so each one gets `sentinel.conf` in its own temp dir,
//! written for the port it is about to bind; a lost port race starts over in a new dir with a
//! new port, as for [`RedisServer`](crate::RedisServer).
//!
//! Timings are short so that a failover takes seconds: a master is subjectively down after
//! [`DOWN_AFTER`] without a reply, and a failed failover attempt is retried after twice
//! [`FAILOVER_TIMEOUT`]. On loopback no announce settings are needed: every process is reached
//! at, and announces, 127.0.0.1.

use std::collections::HashMap;
use std::fmt;
use std::fs;
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::launch::{LaunchError, launch_args, server_url};
use crate::options::LOG_FILE;
use crate::port::free_port;
use crate::replicas::{RedisReplicaSet, info_field};
use crate::tls::{Authority, ServerFiles, TlsMaterial};
use crate::{ChildGuard, HarnessError, redis_server_binary};

/// The name under which the sentinels monitor the master.
const MASTER_NAME: &str = "dlock";
/// Sentinels started by [`RedisSentinels::start`].
const DEFAULT_SENTINELS: usize = 3;
/// `sentinel down-after-milliseconds`.
const DOWN_AFTER: Duration = Duration::from_millis(1000);
/// `sentinel failover-timeout`.
const FAILOVER_TIMEOUT: Duration = Duration::from_millis(3000);
/// The sentinel's config file, in its directory.
const CONFIG_FILE: &str = "sentinel.conf";
/// How many fresh ports one sentinel's start tries when it keeps losing the port race.
const START_ATTEMPTS: usize = 10;
/// How long the sentinels may take to discover the replicas and each other (hello messages are
/// published every 2 s).
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long [`RedisSentinels::wait_failover`] waits; a split vote costs an election timeout
/// plus twice [`FAILOVER_TIMEOUT`] before the next attempt.
const FAILOVER_WAIT: Duration = Duration::from_secs(30);
/// Connect, read and write timeout of the harness's queries.
const QUERY_TIMEOUT: Duration = Duration::from_secs(2);
const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// N sentinels (default 3, quorum a majority) monitoring the master of a [`RedisReplicaSet`]
/// under the name [`master_name`](Self::master_name), each a `redis-server --sentinel` child
/// process in its own temp dir on a free port. [`start`](Self::start) returns once every
/// sentinel knows the master, every replica and every other sentinel.
///
/// Dropping it kills every sentinel (drop it before the replica set, or together: the order
/// does not matter to the processes).
///
/// # Example
///
/// ```no_run
/// use dlock_testkit::{RedisReplicaSet, RedisSentinels};
///
/// let mut set = RedisReplicaSet::start(2)?;
/// let sentinels = RedisSentinels::start(&set)?;
/// // hand sentinels.urls() and sentinels.master_name() to the client under test ...
///
/// let old = set.master().port();
/// set.kill_master();
/// let new = sentinels.wait_failover(old)?;
/// assert_eq!(sentinels.master_addr(0)?, ("127.0.0.1".to_owned(), new));
/// assert!(set.replica_index(new).is_some());
/// # Ok::<(), dlock_testkit::HarnessError>(())
/// ```
pub struct RedisSentinels {
    sentinels: Vec<Sentinel>,
    replicas: usize,
    password: Option<String>,
    /// A TLS set's CA and client certificate (the sentinels' certificates are of the same CA).
    tls: Option<TlsMaterial>,
    /// The set's servers as `(port the sentinels name, plain port)`: a TLS set's sentinels
    /// name TLS ports, the harness queries plain ones.
    node_ports: Vec<(u16, u16)>,
}

/// One sentinel process. Fields drop in order: the process dies before its directory goes.
struct Sentinel {
    child: Option<ChildGuard>,
    port: u16,
    /// The TLS port (`tls-port`), for a TLS replica set.
    tls_port: Option<u16>,
    dir: TempDir,
}

impl RedisSentinels {
    /// Starts 3 sentinels (quorum 2) monitoring `set`'s master.
    ///
    /// # Errors
    ///
    /// As [`start_with`](Self::start_with).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let set = dlock_testkit::RedisReplicaSet::start(1)?;
    /// let sentinels = dlock_testkit::RedisSentinels::start(&set)?;
    /// assert_eq!(sentinels.ports().len(), 3);
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn start(set: &RedisReplicaSet) -> Result<RedisSentinels, HarnessError> {
        Self::start_with(set, DEFAULT_SENTINELS)
    }

    /// Starts `count` sentinels (quorum `count / 2 + 1`) monitoring `set`'s master, with
    /// `down-after-milliseconds` 1000 and `failover-timeout` 3000, and waits (up to 30 s) until
    /// each reports the master as a master (`SENTINEL MASTER`), every replica of `set` as a
    /// linked replica (`SENTINEL REPLICAS`) and `count - 1` other sentinels. `set`'s master and
    /// replicas must be running.
    ///
    /// For a TLS set ([`RedisReplicaSet::start_with`] with
    /// [`ServerOptions::tls`](crate::ServerOptions::tls)) every sentinel also gets a TLS port
    /// ([`tls_urls`](Self::tls_urls)) with a certificate of the set's CA, monitors the master's
    /// TLS port and talks TLS to the nodes and to the other sentinels (`tls-replication yes`): it
    /// names the TLS ports of masters ([`master_addr`](Self::master_addr),
    /// [`wait_failover`](Self::wait_failover)).
    ///
    /// # Errors
    ///
    /// When `count` is 0, `redis-server` is not found, a sentinel fails to start (the error
    /// includes its log), or discovery does not complete in time (the error says what a
    /// sentinel still misses and includes every sentinel's log tail).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let set = dlock_testkit::RedisReplicaSet::start(1)?;
    /// let sentinels = dlock_testkit::RedisSentinels::start_with(&set, 5)?;
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn start_with(set: &RedisReplicaSet, count: usize) -> Result<RedisSentinels, HarnessError> {
        if count == 0 {
            return Err(HarnessError::new(
                "RedisSentinels needs at least one sentinel, 0 requested",
            ));
        }
        let binary = redis_server_binary()?;
        let password = set.master().options().password().map(str::to_owned);
        let authority = set.master().options().authority().cloned();
        let monitor = Monitor {
            master_port: set.master().replication_port(),
            quorum: count / 2 + 1,
            password: password.as_deref(),
            tls: authority.as_deref(),
            tls_auth_clients: set.master().options().tls_auth_clients(),
        };
        let sentinels = (0..count)
            .map(|_| Sentinel::start(&binary, &monitor))
            .collect::<Result<Vec<_>, _>>()?;
        let node_ports = std::iter::once(set.master())
            .chain(set.replicas())
            .map(|server| (server.replication_port(), server.port()))
            .collect();
        let sentinels = RedisSentinels {
            sentinels,
            replicas: set.replicas().len(),
            password,
            tls: authority.map(|a| a.material().clone()),
            node_ports,
        };
        sentinels.wait_discovered()?;
        Ok(sentinels)
    }

    /// The name the sentinels monitor the master under (`"dlock"`), for `SENTINEL` commands
    /// and for a Sentinel client.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let set = dlock_testkit::RedisReplicaSet::start(1)?;
    /// # let sentinels = dlock_testkit::RedisSentinels::start(&set)?;
    /// assert_eq!(sentinels.master_name(), "dlock");
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn master_name(&self) -> &str {
        MASTER_NAME
    }

    /// The sentinels' ports on 127.0.0.1, in start order (the indexes other methods take).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let set = dlock_testkit::RedisReplicaSet::start(1)?;
    /// # let sentinels = dlock_testkit::RedisSentinels::start(&set)?;
    /// let addrs: Vec<String> = sentinels.ports().iter().map(|p| format!("127.0.0.1:{p}")).collect();
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn ports(&self) -> Vec<u16> {
        self.sentinels.iter().map(|s| s.port).collect()
    }

    /// The sentinels' URLs, `redis://127.0.0.1:PORT/` (sentinels take no password here).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let set = dlock_testkit::RedisReplicaSet::start(1)?;
    /// # let sentinels = dlock_testkit::RedisSentinels::start(&set)?;
    /// let client = redis::Client::open(sentinels.urls()[0].as_str())?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn urls(&self) -> Vec<String> {
        self.sentinels
            .iter()
            .map(|s| server_url(s.port, None))
            .collect()
    }

    /// The sentinels' TLS URLs, `rediss://127.0.0.1:TLS_PORT/`, when they watch a TLS replica
    /// set ([`RedisReplicaSet::start_with`] with [`ServerOptions::tls`](crate::ServerOptions::tls));
    /// `None` otherwise. A client must trust [`RedisSentinels::tls`]'s CA.
    ///
    /// # Example
    ///
    /// ```no_run
    /// use dlock_testkit::{RedisReplicaSet, RedisSentinels, ServerOptions};
    /// let set = RedisReplicaSet::start_with(1, ServerOptions::new().tls())?;
    /// let sentinels = RedisSentinels::start(&set)?;
    /// assert!(sentinels.tls_urls().is_some());
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn tls_urls(&self) -> Option<Vec<String>> {
        self.sentinels
            .iter()
            .map(|s| s.tls_port.map(|port| format!("rediss://127.0.0.1:{port}/")))
            .collect()
    }

    /// The CA (and client certificate) of a TLS set's sentinels and servers.
    pub fn tls(&self) -> Option<&TlsMaterial> {
        self.tls.as_ref()
    }

    /// Asks sentinel `index` where the master is (`SENTINEL GET-MASTER-ADDR-BY-NAME`). During
    /// a failover this is already the replica being promoted.
    ///
    /// # Errors
    ///
    /// When `index` is out of range, the sentinel cannot be reached, or it does not know the
    /// master name.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let set = dlock_testkit::RedisReplicaSet::start(1)?;
    /// # let sentinels = dlock_testkit::RedisSentinels::start(&set)?;
    /// let (host, port) = sentinels.master_addr(0)?;
    /// assert_eq!(port, set.master().port());
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn master_addr(&self, index: usize) -> Result<(String, u16), HarnessError> {
        let sentinel = self.sentinel(index)?;
        sentinel.master_addr().map_err(|why| {
            HarnessError::new(format!("sentinel 127.0.0.1:{}: {why}", sentinel.port))
                .with_file_tail("sentinel log", &sentinel.dir.path().join(LOG_FILE))
        })
    }

    /// Waits (up to 30 s) until a failover has replaced the master on `old_master_port`: every
    /// running sentinel names the same other master, and that server reports `role:master`.
    /// Returns the new master's port as the sentinels name it (a TLS set's: its TLS port; find
    /// the replica with [`RedisReplicaSet::replica_index`]). For a TLS set, `old_master_port`
    /// may be the old master's plain or TLS port.
    ///
    /// # Errors
    ///
    /// When no failover completes in time; the error says what each sentinel reported last and
    /// includes every sentinel's log tail (`+sdown`, `+odown`, `+elected-leader`,
    /// `+switch-master` lines tell how far it got).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let mut set = dlock_testkit::RedisReplicaSet::start(1)?;
    /// # let sentinels = dlock_testkit::RedisSentinels::start(&set)?;
    /// let old = set.master().port();
    /// set.kill_master();
    /// let new = sentinels.wait_failover(old)?;
    /// assert_eq!(new, set.replicas()[0].port());
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn wait_failover(&self, old_master_port: u16) -> Result<u16, HarnessError> {
        // A TLS set's sentinels name TLS ports: the old master's plain port is taken for its.
        let old_master_port = self
            .node_ports
            .iter()
            .find_map(|&(named, plain)| (plain == old_master_port).then_some(named))
            .unwrap_or(old_master_port);
        let deadline = Instant::now() + FAILOVER_WAIT;
        loop {
            let last = match self.failover_state(old_master_port) {
                Ok(port) => return Ok(port),
                Err(why) => why,
            };
            if Instant::now() >= deadline {
                let message = format!(
                    "no failover away from master 127.0.0.1:{old_master_port} within {} s: {last}",
                    FAILOVER_WAIT.as_secs()
                );
                return Err(self.with_logs(HarnessError::new(message)));
            }
            thread::sleep(POLL_INTERVAL);
        }
    }

    /// Kills sentinel `index` (SIGKILL, reaped). Idempotent; an index out of range is ignored.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let set = dlock_testkit::RedisReplicaSet::start(1)?;
    /// # let mut sentinels = dlock_testkit::RedisSentinels::start(&set)?;
    /// sentinels.kill(0); // the other two still make a quorum
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn kill(&mut self, index: usize) {
        if let Some(mut child) = self.sentinels.get_mut(index).and_then(|s| s.child.take()) {
            child.kill();
        }
    }

    /// The content of sentinel `index`'s log file; empty if unreadable or out of range.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let set = dlock_testkit::RedisReplicaSet::start(1)?;
    /// # let sentinels = dlock_testkit::RedisSentinels::start(&set)?;
    /// assert!(sentinels.log(0).contains("+monitor master dlock"));
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn log(&self, index: usize) -> String {
        self.sentinels
            .get(index)
            .and_then(|s| fs::read(s.dir.path().join(LOG_FILE)).ok())
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default()
    }

    fn sentinel(&self, index: usize) -> Result<&Sentinel, HarnessError> {
        self.sentinels.get(index).ok_or_else(|| {
            HarnessError::new(format!(
                "no sentinel {index}: there are {}",
                self.sentinels.len()
            ))
        })
    }

    fn running(&self) -> impl Iterator<Item = &Sentinel> {
        self.sentinels.iter().filter(|s| s.child.is_some())
    }

    /// Polls until every sentinel knows the master, the replicas and the other sentinels.
    fn wait_discovered(&self) -> Result<(), HarnessError> {
        let deadline = Instant::now() + DISCOVERY_TIMEOUT;
        let others = self.sentinels.len() - 1;
        loop {
            let pending = self.running().find_map(|s| {
                s.discovery(self.replicas, others)
                    .err()
                    .map(|why| format!("sentinel 127.0.0.1:{}: {why}", s.port))
            });
            let Some(pending) = pending else {
                return Ok(());
            };
            if Instant::now() >= deadline {
                let message = format!(
                    "the sentinels did not discover the replica set within {} s: {pending}",
                    DISCOVERY_TIMEOUT.as_secs()
                );
                return Err(self.with_logs(HarnessError::new(message)));
            }
            thread::sleep(POLL_INTERVAL);
        }
    }

    /// The new master's port once every running sentinel names it and it is a master;
    /// otherwise what is still missing.
    fn failover_state(&self, old_master_port: u16) -> Result<u16, String> {
        let mut agreed = None;
        for sentinel in self.running() {
            let (_, port) = sentinel
                .master_addr()
                .map_err(|why| format!("sentinel 127.0.0.1:{}: {why}", sentinel.port))?;
            if port == old_master_port {
                return Err(format!(
                    "sentinel 127.0.0.1:{} still names the old master",
                    sentinel.port
                ));
            }
            match agreed {
                Some(agreed) if agreed != port => {
                    return Err(format!("sentinels disagree: {agreed} and {port}"));
                }
                _ => agreed = Some(port),
            }
        }
        let port = agreed.ok_or("no sentinel is running")?;
        let plain = self
            .node_ports
            .iter()
            .find_map(|&(named, plain)| (named == port).then_some(plain))
            .unwrap_or(port);
        let info: String = query(plain, self.password.as_deref(), &["INFO", "replication"])
            .map_err(|e| format!("new master 127.0.0.1:{port}: {e}"))?;
        match info_field(&info, "role") {
            Some("master") => Ok(port),
            role => Err(format!(
                "127.0.0.1:{port} is named by the sentinels but reports role {role:?}"
            )),
        }
    }

    /// Attaches every sentinel's log tail.
    fn with_logs(&self, error: HarnessError) -> HarnessError {
        self.sentinels.iter().fold(error, |error, s| {
            let label = format!("sentinel 127.0.0.1:{} log", s.port);
            error.with_file_tail(&label, &s.dir.path().join(LOG_FILE))
        })
    }
}

impl fmt::Debug for RedisSentinels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            sentinels,
            replicas,
            password,
            tls,
            node_ports,
        } = self;
        f.debug_struct("RedisSentinels")
            .field("sentinels", sentinels)
            .field("replicas", replicas)
            .field("tls", tls)
            .field("node_ports", node_ports)
            .field("password", &password.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl fmt::Debug for Sentinel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            child,
            port,
            tls_port,
            dir,
        } = self;
        f.debug_struct("Sentinel")
            .field("port", port)
            .field("tls_port", tls_port)
            .field("pid", &child.as_ref().map(ChildGuard::pid))
            .field("dir", &dir.path())
            .finish()
    }
}

/// What every sentinel's config says about the monitored master.
struct Monitor<'a> {
    master_port: u16,
    quorum: usize,
    password: Option<&'a str>,
    /// The CA of a TLS set: the sentinel gets a TLS port and a certificate of it, and talks TLS
    /// to the nodes and the other sentinels (`tls-replication yes`).
    tls: Option<&'a Authority>,
    /// `tls-auth-clients`: as the set's servers.
    tls_auth_clients: &'static str,
}

/// A sentinel's TLS port and files.
struct SentinelTls {
    port: u16,
    files: ServerFiles,
}

impl Sentinel {
    /// Starts one sentinel on a free port, retrying with a new port (and dir) on a lost race.
    fn start(binary: &Path, monitor: &Monitor<'_>) -> Result<Sentinel, HarnessError> {
        let mut last_error = None;
        for _ in 0..START_ATTEMPTS {
            let dir = TempDir::with_prefix("dlock-testkit-sentinel-")
                .map_err(|e| HarnessError::new("cannot create a temp dir").with_source(e))?;
            let port = free_port(false)?;
            let tls = match monitor.tls {
                Some(authority) => Some(SentinelTls {
                    port: free_port(false)?,
                    files: authority.issue_server(dir.path())?,
                }),
                None => None,
            };
            let config = dir.path().join(CONFIG_FILE);
            let text = config_text(port, dir.path(), monitor, tls.as_ref());
            fs::write(&config, text).map_err(|e| {
                HarnessError::new(format!("cannot write {}", config.display())).with_source(e)
            })?;
            let args = vec![config.into_os_string(), "--sentinel".into()];
            match launch_args(binary, args, &[], port, dir.path(), None) {
                Ok(child) => {
                    return Ok(Sentinel {
                        child: Some(child),
                        port,
                        tls_port: tls.map(|tls| tls.port),
                        dir,
                    });
                }
                Err(LaunchError::PortTaken(error)) => last_error = Some(error),
                Err(LaunchError::Failed(error)) => return Err(error),
            }
        }
        let error = HarnessError::new(format!(
            "could not start a sentinel: {START_ATTEMPTS} free ports in a row were taken"
        ));
        Err(match last_error {
            Some(last) => error.with_source(last),
            None => error,
        })
    }

    fn master_addr(&self) -> Result<(String, u16), String> {
        let addr: Option<(String, String)> = query(
            self.port,
            None,
            &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME],
        )?;
        let (host, port) = addr.ok_or_else(|| format!("does not know master {MASTER_NAME:?}"))?;
        let port = port
            .parse()
            .map_err(|_| format!("named a master with port {port:?}"))?;
        Ok((host, port))
    }

    /// `Ok` when this sentinel sees the master up, `replicas` linked replicas and `others`
    /// other sentinels; otherwise what is missing.
    fn discovery(&self, replicas: usize, others: usize) -> Result<(), String> {
        let master: HashMap<String, String> =
            query(self.port, None, &["SENTINEL", "MASTER", MASTER_NAME])?;
        let field = |name: &str| master.get(name).map_or("?", String::as_str);
        if field("flags") != "master" {
            return Err(format!("master flags are {:?}", field("flags")));
        }
        if field("num-other-sentinels") != others.to_string() {
            return Err(format!(
                "knows {} other sentinels, expects {others}",
                field("num-other-sentinels")
            ));
        }
        let known: Vec<HashMap<String, String>> =
            query(self.port, None, &["SENTINEL", "REPLICAS", MASTER_NAME])?;
        let linked = known
            .iter()
            .filter(|r| {
                r.get("flags").is_some_and(|f| f == "slave")
                    && r.get("master-link-status").is_some_and(|s| s == "ok")
            })
            .count();
        if linked != replicas {
            return Err(format!(
                "sees {linked} linked replicas of {} known, expects {replicas}",
                known.len()
            ));
        }
        Ok(())
    }
}

/// One command on a fresh connection to 127.0.0.1:`port`, every step bounded by
/// [`QUERY_TIMEOUT`].
fn query<T: redis::FromRedisValue>(
    port: u16,
    password: Option<&str>,
    args: &[&str],
) -> Result<T, String> {
    let client = redis::Client::open(server_url(port, password)).map_err(|e| e.to_string())?;
    let mut con = client
        .get_connection_with_timeout(QUERY_TIMEOUT)
        .map_err(|e| format!("connect: {e}"))?;
    con.set_read_timeout(Some(QUERY_TIMEOUT))
        .and_then(|()| con.set_write_timeout(Some(QUERY_TIMEOUT)))
        .map_err(|e| e.to_string())?;
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query(&mut con)
        .map_err(|e| format!("{}: {e}", args.join(" ")))
}

/// The sentinel's config file for `port` and `dir`.
fn config_text(port: u16, dir: &Path, monitor: &Monitor<'_>, tls: Option<&SentinelTls>) -> String {
    let Monitor {
        master_port,
        quorum,
        password,
        tls: _,
        tls_auth_clients,
    } = monitor;
    let dir_text = dir.to_string_lossy();
    let log = dir.join(LOG_FILE);
    let mut text = format!(
        "port {port}\n\
         bind 127.0.0.1\n\
         daemonize no\n\
         protected-mode no\n\
         dir {}\n\
         logfile {}\n\
         sentinel monitor {MASTER_NAME} 127.0.0.1 {master_port} {quorum}\n\
         sentinel down-after-milliseconds {MASTER_NAME} {}\n\
         sentinel failover-timeout {MASTER_NAME} {}\n\
         sentinel parallel-syncs {MASTER_NAME} 1\n",
        quote(&dir_text),
        quote(&log.to_string_lossy()),
        DOWN_AFTER.as_millis(),
        FAILOVER_TIMEOUT.as_millis(),
    );
    if let Some(password) = password {
        text.push_str(&format!(
            "sentinel auth-pass {MASTER_NAME} {}\n",
            quote(password)
        ));
    }
    if let Some(SentinelTls { port, files }) = tls {
        text.push_str(&format!(
            "tls-port {port}\n\
             tls-cert-file {}\n\
             tls-key-file {}\n\
             tls-ca-cert-file {}\n\
             tls-auth-clients {tls_auth_clients}\n\
             tls-replication yes\n",
            quote(&files.cert.to_string_lossy()),
            quote(&files.key.to_string_lossy()),
            quote(&files.ca.to_string_lossy()),
        ));
    }
    text
}

/// A double-quoted config value, as `redis-server` parses it (`\\`, `\"`, `\n` escapes).
fn quote(value: &str) -> String {
    let mut quoted = String::with_capacity(value.len() + 2);
    quoted.push('"');
    for c in value.chars() {
        match c {
            '\\' => quoted.push_str("\\\\"),
            '"' => quoted.push_str("\\\""),
            '\n' => quoted.push_str("\\n"),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_monitors_the_master_with_short_timings() {
        let monitor = Monitor {
            master_port: 7000,
            quorum: 2,
            password: Some("p\"w"),
            tls: None,
            tls_auth_clients: "optional",
        };
        let text = config_text(26379, Path::new("/tmp/s 1"), &monitor, None);
        assert!(text.starts_with("port 26379\nbind 127.0.0.1\n"));
        assert!(text.contains("dir \"/tmp/s 1\"\nlogfile \"/tmp/s 1/redis.log\"\n"));
        assert!(text.contains("sentinel monitor dlock 127.0.0.1 7000 2\n"));
        assert!(text.contains("sentinel down-after-milliseconds dlock 1000\n"));
        assert!(text.contains("sentinel failover-timeout dlock 3000\n"));
        assert!(text.ends_with("sentinel auth-pass dlock \"p\\\"w\"\n"));
    }

    #[test]
    fn a_tls_sentinel_listens_on_its_tls_port_and_replicates_over_tls() {
        let monitor = Monitor {
            master_port: 7000,
            quorum: 2,
            password: None,
            tls: None,
            tls_auth_clients: "yes",
        };
        let tls = SentinelTls {
            port: 26380,
            files: ServerFiles {
                cert: "/t/server.crt".into(),
                key: "/t/server.key".into(),
                ca: "/t/ca.crt".into(),
            },
        };
        let text = config_text(26379, Path::new("/tmp/s"), &monitor, Some(&tls));
        assert!(text.contains("tls-port 26380\n"));
        assert!(text.contains("tls-cert-file \"/t/server.crt\"\n"));
        assert!(text.contains("tls-ca-cert-file \"/t/ca.crt\"\n"));
        assert!(text.contains("tls-auth-clients yes\n"));
        assert!(text.ends_with("tls-replication yes\n"));
    }
}
