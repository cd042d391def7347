//! [`RedisReplicaSet`]: one master and N replicas (`REPLICAOF`), with replication fault
//! injection.
//!
//! Replicas are made replicas by a `REPLICAOF` command once they run, not by a `--replicaof`
//! argument: [`ServerOptions`] passes each value as one argument, and `redis-server` reads a
//! quoted `"127.0.0.1 6379"` as one (invalid) token. A replica that is
//! [`restart`](RedisServer::restart)ed therefore comes back as an empty standalone server.
//!
//! "Caught up" means: the replica reports `master_link_status:up` and a `slave_repl_offset` at
//! least the `master_repl_offset` the master reported just before. The master's offset only
//! grows, so a replica that passes once has received everything written before the check began.

use std::fmt;
use std::thread;
use std::time::{Duration, Instant};

use std::sync::Arc;

use crate::tls::Authority;
use crate::{HarnessError, RedisServer, ServerOptions};

/// How long [`RedisReplicaSet::wait_synced`] waits for every replica to catch up.
const SYNC_TIMEOUT: Duration = Duration::from_secs(20);
/// How long [`RedisReplicaSet::promote_replica`] waits for the replica to report `role:master`.
const PROMOTE_TIMEOUT: Duration = Duration::from_secs(10);
/// Read and write timeout of the harness's own queries: a paused server fails them instead of
/// hanging the test.
const QUERY_TIMEOUT: Duration = Duration::from_secs(2);
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// One master and N replicas, each a [`RedisServer`] on 127.0.0.1, every replica linked and
/// caught up when [`start`](Self::start) returns.
///
/// Fault injection: [`kill_master`](Self::kill_master) (a crash),
/// [`pause_replica`](Self::pause_replica) / [`resume_replica`](Self::resume_replica) (SIGSTOP /
/// SIGCONT: on loopback the only way to make replication lag real), and
/// [`promote_replica`](Self::promote_replica) (`REPLICAOF NO ONE`, a failover by hand for tests
/// that do not run [`RedisSentinels`](crate::RedisSentinels)). Dropping it kills every server.
///
/// With `requirepass` in the options, replicas get the same `masterauth`.
///
/// # Example
///
/// ```no_run
/// use dlock_testkit::RedisReplicaSet;
///
/// let mut set = RedisReplicaSet::start(1)?;
/// let mut master = set.master().connection()?;
/// let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut master)?;
/// let acked: i64 = redis::cmd("WAIT").arg(1).arg(1000).query(&mut master)?;
/// assert_eq!(acked, 1);
///
/// set.kill_master();
/// set.promote_replica(0)?; // replica 0 now takes writes, with "k" in it
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RedisReplicaSet {
    master: RedisServer,
    replicas: Vec<RedisServer>,
}

impl RedisReplicaSet {
    /// Starts a master and `replicas` replicas with default options.
    ///
    /// # Errors
    ///
    /// As [`start_with`](Self::start_with).
    ///
    /// # Example
    ///
    /// ```no_run
    /// let set = dlock_testkit::RedisReplicaSet::start(2)?;
    /// assert_eq!(set.replicas().len(), 2);
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn start(replicas: usize) -> Result<RedisReplicaSet, HarnessError> {
        Self::start_with(replicas, ServerOptions::new())
    }

    /// Starts a master and `replicas` replicas, all configured with `options` (after
    /// `repl-diskless-sync-delay 0`, so that a full sync starts at once rather than after the
    /// default 5 s, and `masterauth` when `requirepass` is set), sends
    /// `REPLICAOF 127.0.0.1 <master port>` to each replica, and waits (up to 20 s) until every
    /// replica reports `master_link_status:up` and has caught up with the master's offset.
    ///
    /// With [`ServerOptions::tls`] (or [`ServerOptions::tls_client_cert_required`]), every
    /// server also gets a TLS port, all with certificates of one CA made for the set
    /// ([`RedisServer::tls`] of any of them), and `tls-replication yes`: the replicas replicate
    /// from the master's TLS port, and [`RedisSentinels`](crate::RedisSentinels) started on the
    /// set run over TLS too. The harness keeps using the plain ports.
    ///
    /// # Errors
    ///
    /// When `replicas` is 0, `options` asks for cluster mode, a server fails to start (see [`RedisServer::start_with`]),
    /// `REPLICAOF` is refused, or a replica does not catch up in time (the error includes the
    /// master's and that replica's log tails).
    ///
    /// # Example
    ///
    /// ```no_run
    /// use dlock_testkit::{RedisReplicaSet, ServerOptions};
    ///
    /// let set = RedisReplicaSet::start_with(2, ServerOptions::new().arg("requirepass", "s3cret"))?;
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn start_with(
        replicas: usize,
        options: ServerOptions,
    ) -> Result<RedisReplicaSet, HarnessError> {
        if replicas == 0 {
            return Err(HarnessError::new(
                "RedisReplicaSet needs at least one replica, 0 requested",
            ));
        }
        if options.is_cluster() {
            return Err(HarnessError::new(
                "RedisReplicaSet runs standalone servers: cluster mode is not supported",
            ));
        }
        // Defaults first, so that the caller's arguments override them.
        let mut defaults = ServerOptions::new().arg("repl-diskless-sync-delay", "0");
        if let Some(password) = options.password() {
            defaults = defaults.arg("masterauth", password);
        }
        if options.has_tls() {
            // Replication over TLS, to the TLS port: sentinels then learn (and announce) the
            // TLS ports of the master and the replicas.
            defaults = defaults.arg("tls-replication", "yes");
        }
        let mut options = options.with_leading_args(&defaults);
        if options.has_tls() {
            // One CA for the whole set (and its sentinels): each trusts the others.
            options = options.with_authority(Arc::new(Authority::new()?));
        }
        let master = RedisServer::start_with(options.clone())?;
        let replicas = (0..replicas)
            .map(|_| RedisServer::start_with(options.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        let set = RedisReplicaSet { master, replicas };
        for replica in &set.replicas {
            let mut con = query_connection(replica)?;
            redis::cmd("REPLICAOF")
                .arg("127.0.0.1")
                .arg(set.master.replication_port())
                .query::<()>(&mut con)
                .map_err(|e| set.error(replica, "REPLICAOF", e))?;
        }
        set.wait_synced()?;
        Ok(set)
    }

    /// The master (the one started as master: after [`kill_master`](Self::kill_master) it is
    /// dead, after a failover it may be a replica).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let set = dlock_testkit::RedisReplicaSet::start(1)?;
    /// let client = redis::Client::open(set.master().url())?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn master(&self) -> &RedisServer {
        &self.master
    }

    /// The master, for fault injection beyond [`kill_master`](Self::kill_master) (pause,
    /// restart).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let mut set = dlock_testkit::RedisReplicaSet::start(1)?;
    /// set.master_mut().pause()?; // a hung master: sentinels will fail it over
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn master_mut(&mut self) -> &mut RedisServer {
        &mut self.master
    }

    /// The replicas, in start order (the indexes every other method takes).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let set = dlock_testkit::RedisReplicaSet::start(2)?;
    /// let ports: Vec<u16> = set.replicas().iter().map(|r| r.port()).collect();
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn replicas(&self) -> &[RedisServer] {
        &self.replicas
    }

    /// The replicas, for fault injection (kill, restart).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let mut set = dlock_testkit::RedisReplicaSet::start(2)?;
    /// set.replicas_mut()[1].kill();
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn replicas_mut(&mut self) -> &mut [RedisServer] {
        &mut self.replicas
    }

    /// The index of the replica listening on `port`, its plain or its TLS port (to find the one
    /// a sentinel promoted).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let set = dlock_testkit::RedisReplicaSet::start(2)?;
    /// let port = set.replicas()[1].port();
    /// assert_eq!(set.replica_index(port), Some(1));
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn replica_index(&self, port: u16) -> Option<usize> {
        self.replicas
            .iter()
            .position(|r| r.port() == port || r.tls_port() == Some(port))
    }

    /// Kills the master (SIGKILL, reaped): a crash. Idempotent.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let mut set = dlock_testkit::RedisReplicaSet::start(1)?;
    /// set.kill_master();
    /// assert!(set.master().pid().is_none());
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn kill_master(&mut self) {
        self.master.kill();
    }

    /// Freezes replica `index` (SIGSTOP): it stops acknowledging and applying writes, so `WAIT`
    /// cannot count it and its offset falls behind. Undo with
    /// [`resume_replica`](Self::resume_replica).
    ///
    /// # Errors
    ///
    /// When `index` is out of range or the replica is not running.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let set = dlock_testkit::RedisReplicaSet::start(1)?;
    /// set.pause_replica(0)?;
    /// // ... writes on the master are now not acknowledged: WAIT 1 200 returns 0 ...
    /// set.resume_replica(0)?;
    /// set.wait_synced()?;
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn pause_replica(&self, index: usize) -> Result<(), HarnessError> {
        self.replica(index)?.pause()
    }

    /// Lets replica `index`, frozen by [`pause_replica`](Self::pause_replica), run again
    /// (SIGCONT). It then catches up on its own; [`wait_synced`](Self::wait_synced) waits for it.
    ///
    /// # Errors
    ///
    /// When `index` is out of range or the replica is not running.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let set = dlock_testkit::RedisReplicaSet::start(1)?;
    /// set.pause_replica(0)?;
    /// set.resume_replica(0)?;
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn resume_replica(&self, index: usize) -> Result<(), HarnessError> {
        self.replica(index)?.resume()
    }

    /// Promotes replica `index` by hand (`REPLICAOF NO ONE`) and waits (up to 10 s) until it
    /// reports `role:master`: a failover without sentinels. The other replicas keep following
    /// the old master, and [`master`](Self::master) still names the old one.
    ///
    /// # Errors
    ///
    /// When `index` is out of range, the replica cannot be reached (killed or paused), or it
    /// does not become a master in time (the error includes its log tail).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let mut set = dlock_testkit::RedisReplicaSet::start(1)?;
    /// set.kill_master();
    /// set.promote_replica(0)?;
    /// let new_master = set.replicas()[0].url();
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn promote_replica(&self, index: usize) -> Result<(), HarnessError> {
        let replica = self.replica(index)?;
        let mut con = query_connection(replica)?;
        redis::cmd("REPLICAOF")
            .arg("NO")
            .arg("ONE")
            .query::<()>(&mut con)
            .map_err(|e| self.error(replica, "REPLICAOF NO ONE", e))?;
        let deadline = Instant::now() + PROMOTE_TIMEOUT;
        loop {
            let info = replication_info(replica)?;
            if info_field(&info, "role") == Some("master") {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(HarnessError::new(format!(
                    "replica 127.0.0.1:{} did not report role:master within {} s of \
                     REPLICAOF NO ONE",
                    replica.port(),
                    PROMOTE_TIMEOUT.as_secs()
                ))
                .with_section("INFO replication", info)
                .with_file_tail("replica log", &replica.dir().join(crate::options::LOG_FILE)));
            }
            thread::sleep(POLL_INTERVAL);
        }
    }

    /// The replication offset replica `index` has processed (`slave_repl_offset` in its
    /// `INFO replication`): compare with [`master_offset`](Self::master_offset) to see lag.
    ///
    /// # Errors
    ///
    /// When `index` is out of range, the replica cannot be reached (killed, or paused: the
    /// query then times out after 2 s), or it reports no offset (it is not a replica).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let set = dlock_testkit::RedisReplicaSet::start(1)?;
    /// let lag = set.master_offset()?.saturating_sub(set.replication_offset(0)?);
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn replication_offset(&self, index: usize) -> Result<u64, HarnessError> {
        let replica = self.replica(index)?;
        offset_field(replica, "slave_repl_offset")
    }

    /// The master's replication offset (`master_repl_offset`): how far its replication stream
    /// has gone.
    ///
    /// # Errors
    ///
    /// When the master cannot be reached (killed or paused).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let set = dlock_testkit::RedisReplicaSet::start(1)?;
    /// assert!(set.replication_offset(0)? >= set.master_offset()?);
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn master_offset(&self) -> Result<u64, HarnessError> {
        offset_field(&self.master, "master_repl_offset")
    }

    /// Waits (up to 20 s) until every replica reports `master_link_status:up` and an offset at
    /// least the master's offset when the wait began: everything written before the call has
    /// reached every replica. The master and every replica must be running and not paused.
    ///
    /// # Errors
    ///
    /// When a server cannot be reached, or a replica does not catch up in time (the error
    /// includes its `INFO replication` and the log tails of the master and that replica).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let set = dlock_testkit::RedisReplicaSet::start(1)?;
    /// set.pause_replica(0)?;
    /// set.resume_replica(0)?;
    /// set.wait_synced()?;
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn wait_synced(&self) -> Result<(), HarnessError> {
        let target = self.master_offset()?;
        let deadline = Instant::now() + SYNC_TIMEOUT;
        for replica in &self.replicas {
            loop {
                let info = replication_info(replica)?;
                let link_up = info_field(&info, "master_link_status") == Some("up");
                let offset = info_field(&info, "slave_repl_offset").and_then(|o| o.parse().ok());
                if link_up && offset.is_some_and(|o: u64| o >= target) {
                    break;
                }
                if Instant::now() >= deadline {
                    let message = format!(
                        "replica 127.0.0.1:{} did not catch up with the master 127.0.0.1:{} \
                         (offset {target}) within {} s",
                        replica.port(),
                        self.master.port(),
                        SYNC_TIMEOUT.as_secs()
                    );
                    return Err(self.with_logs(
                        HarnessError::new(message).with_section("replica INFO replication", info),
                        replica,
                    ));
                }
                thread::sleep(POLL_INTERVAL);
            }
        }
        Ok(())
    }

    fn replica(&self, index: usize) -> Result<&RedisServer, HarnessError> {
        self.replicas.get(index).ok_or_else(|| {
            HarnessError::new(format!(
                "no replica {index}: the set has {} replicas",
                self.replicas.len()
            ))
        })
    }

    fn error(
        &self,
        replica: &RedisServer,
        command: &str,
        error: redis::RedisError,
    ) -> HarnessError {
        self.with_logs(
            HarnessError::new(format!(
                "{command} on replica 127.0.0.1:{} failed",
                replica.port()
            ))
            .with_source(error),
            replica,
        )
    }

    /// Attaches the master's and `replica`'s log tails.
    fn with_logs(&self, error: HarnessError, replica: &RedisServer) -> HarnessError {
        let log = crate::options::LOG_FILE;
        error
            .with_file_tail(
                &format!("master 127.0.0.1:{} log", self.master.port()),
                &self.master.dir().join(log),
            )
            .with_file_tail(
                &format!("replica 127.0.0.1:{} log", replica.port()),
                &replica.dir().join(log),
            )
    }
}

impl fmt::Debug for RedisReplicaSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self { master, replicas } = self;
        f.debug_struct("RedisReplicaSet")
            .field("master", master)
            .field("replicas", replicas)
            .finish()
    }
}

/// A connection whose queries time out after [`QUERY_TIMEOUT`] (a paused server fails them).
fn query_connection(server: &RedisServer) -> Result<redis::Connection, HarnessError> {
    let con = server.connection()?;
    con.set_read_timeout(Some(QUERY_TIMEOUT))
        .and_then(|()| con.set_write_timeout(Some(QUERY_TIMEOUT)))
        .map_err(|e| HarnessError::new("cannot set a socket timeout").with_source(e))?;
    Ok(con)
}

/// `INFO replication` of `server`.
pub(crate) fn replication_info(server: &RedisServer) -> Result<String, HarnessError> {
    let mut con = query_connection(server)?;
    redis::cmd("INFO")
        .arg("replication")
        .query(&mut con)
        .map_err(|e| {
            HarnessError::new(format!(
                "INFO replication on 127.0.0.1:{} failed",
                server.port()
            ))
            .with_file_tail("server log", &server.dir().join(crate::options::LOG_FILE))
            .with_source(e)
        })
}

/// The value of `name:value` in an `INFO` reply.
pub(crate) fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

fn offset_field(server: &RedisServer, name: &str) -> Result<u64, HarnessError> {
    let info = replication_info(server)?;
    info_field(&info, name)
        .and_then(|o| o.parse().ok())
        .ok_or_else(|| {
            HarnessError::new(format!(
                "127.0.0.1:{} reports no {name} in INFO replication",
                server.port()
            ))
            .with_section("INFO replication", info)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_fields_are_found_by_exact_name() {
        let info = "# Replication\r\nrole:slave\r\nmaster_link_status:up\r\n\
                    slave_repl_offset:42\r\nslave_repl_offset_x:7\r\n";
        assert_eq!(info_field(info, "role"), Some("slave"));
        assert_eq!(info_field(info, "slave_repl_offset"), Some("42"));
        assert_eq!(info_field(info, "master_repl_offset"), None);
    }
}
