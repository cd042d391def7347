//! [`RedisCluster`]: N cluster-enabled servers joined by `redis-cli --cluster create`.
//!
//! Masters only: dlock's cluster rule (every key of a lock in one slot) is about slots, not
//! failover, and replicas would double the startup cost of every cluster test.

use std::fmt;
use std::fs::{self, File};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use std::sync::Arc;

use crate::lock_keys::{DEFAULT_KEY_PREFIX, HolderKeys};
use crate::options::NODES_CONF_FILE;
use crate::tls::{Authority, TlsMaterial};
use crate::{ChildGuard, HarnessError, RedisServer, ServerOptions, redis_cli_binary};

/// Number of hash slots in Redis Cluster.
const SLOTS: usize = 16_384;
/// Redis Cluster refuses to be created with fewer masters.
const MIN_MASTERS: usize = 3;
/// How long `redis-cli --cluster create` may run.
const CREATE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the nodes may take to agree on `cluster_state:ok` after creation.
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(20);
const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// A Redis Cluster of N masters (default 3) and no replicas, each a [`RedisServer`], all slots
/// assigned and `cluster_state:ok` on every node when [`start`](Self::start) returns.
///
/// Dropping it kills every node. Fault injection goes through [`nodes_mut`](Self::nodes_mut)
/// and [`restart_node`](Self::restart_node); note that [`RedisServer::restart`] brings a node
/// back as a fresh, empty node that has left the cluster.
///
/// # Example
///
/// ```no_run
/// use dlock_testkit::RedisCluster;
///
/// let cluster = RedisCluster::start()?;
/// let client = redis::cluster::ClusterClient::new(cluster.urls())?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts a cluster of 3 masters.
    ///
    /// # Errors
    ///
    /// As [`start_with`](Self::start_with).
    ///
    /// # Example
    ///
    /// ```no_run
    /// let cluster = dlock_testkit::RedisCluster::start()?;
    /// assert_eq!(cluster.nodes().len(), 3);
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn start() -> Result<RedisCluster, HarnessError> {
        Self::start_masters(MIN_MASTERS)
    }

    /// Starts a cluster of `masters` masters (at least 3) with default options.
    ///
    /// # Errors
    ///
    /// As [`start_with`](Self::start_with).
    ///
    /// # Example
    ///
    /// ```no_run
    /// let cluster = dlock_testkit::RedisCluster::start_masters(5)?;
    /// assert_eq!(cluster.urls().len(), 5);
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn start_masters(masters: usize) -> Result<RedisCluster, HarnessError> {
        Self::start_with(masters, ServerOptions::new())
    }

    /// Starts `masters` cluster nodes configured with `options` (cluster mode is switched on),
    /// runs `redis-cli --cluster create … --cluster-replicas 0 --cluster-yes`, and waits (up to
    /// 20 s) until every node reports `cluster_state:ok`, all 16384 slots assigned, and knows
    /// every other node.
    ///
    /// With [`ServerOptions::tls`], every node also gets a TLS port with a certificate of one CA
    /// made for the cluster, and `tls-cluster yes` (the cluster bus over TLS; TLS clients are
    /// given the nodes' TLS ports). The cluster is created, and watched by the harness, through
    /// the plain ports.
    ///
    /// # Errors
    ///
    /// When `masters < 3`, `redis-cli` is not found, a node fails to start, `redis-cli` fails
    /// or hangs, or the cluster does not converge in time. The error includes the `redis-cli`
    /// output, the last observed cluster state and every node's log tail.
    ///
    /// # Example
    ///
    /// ```no_run
    /// use dlock_testkit::{RedisCluster, ServerOptions};
    ///
    /// let cluster = RedisCluster::start_with(3, ServerOptions::new().arg("maxmemory", "10mb"))?;
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn start_with(
        masters: usize,
        options: ServerOptions,
    ) -> Result<RedisCluster, HarnessError> {
        if masters < MIN_MASTERS {
            return Err(HarnessError::new(format!(
                "a Redis Cluster needs at least {MIN_MASTERS} masters, {masters} requested"
            )));
        }
        let cli = redis_cli_binary()?;
        let mut options = options.cluster(true);
        if options.has_tls() {
            // One CA for every node, and the cluster bus over TLS: the nodes then announce
            // their TLS ports to TLS clients (`CLUSTER SLOTS`, `CLUSTER SHARDS`, redirections).
            options = options
                .with_leading_args(&ServerOptions::new().arg("tls-cluster", "yes"))
                .with_authority(Arc::new(Authority::new()?));
        }
        let nodes = (0..masters)
            .map(|_| RedisServer::start_with(options.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        let cluster = RedisCluster { nodes };

        let mut cmd = Command::new(cli);
        cmd.args(["--cluster", "create"])
            .args(
                cluster
                    .nodes
                    .iter()
                    .map(|n| format!("127.0.0.1:{}", n.port())),
            )
            .args(["--cluster-replicas", "0", "--cluster-yes"]);
        if let Some(password) = options.password() {
            // The environment rather than `-a`: no "using a password on the command line" noise.
            cmd.env("REDISCLI_AUTH", password);
        }
        let output = cluster.run_cli(cmd)?;
        cluster.wait_converged(&output)?;
        Ok(cluster)
    }

    /// The nodes' URLs, in [`nodes`](Self::nodes) order.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let cluster = dlock_testkit::RedisCluster::start()?;
    /// let client = redis::cluster::ClusterClient::new(cluster.urls())?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The nodes' TLS URLs, `rediss://127.0.0.1:TLS_PORT/`, in [`nodes`](Self::nodes) order,
    /// for a cluster started with [`ServerOptions::tls`]; `None` otherwise. A client must trust
    /// [`RedisCluster::tls`]'s CA.
    ///
    /// # Example
    ///
    /// ```no_run
    /// use dlock_testkit::{RedisCluster, ServerOptions};
    /// let cluster = RedisCluster::start_with(3, ServerOptions::new().tls())?;
    /// assert_eq!(cluster.tls_urls().map(|urls| urls.len()), Some(3));
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn tls_urls(&self) -> Option<Vec<String>> {
        self.nodes.iter().map(RedisServer::tls_url).collect()
    }

    /// The CA (and a client certificate) of a TLS cluster's nodes, all issued by one CA.
    pub fn tls(&self) -> Option<&TlsMaterial> {
        self.nodes.first().and_then(RedisServer::tls)
    }

    /// The nodes, e.g. for a connection to one of them.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let cluster = dlock_testkit::RedisCluster::start()?;
    /// let mut con = cluster.nodes()[0].connection()?;
    /// let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut con)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// The nodes, for fault injection (kill, pause, restart).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let mut cluster = dlock_testkit::RedisCluster::start()?;
    /// cluster.nodes_mut()[1].kill();
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn nodes_mut(&mut self) -> &mut [RedisServer] {
        &mut self.nodes
    }

    /// Restarts node `index` with **empty data** on the same port, keeping its cluster identity
    /// (`nodes.conf`: its id, its slots, its peers), so that it rejoins the cluster and serves
    /// the same slots, now empty: a master that crashed and came back without persistence. Waits
    /// (up to 20 s) until every node reports `cluster_state:ok` again.
    ///
    /// (A plain [`RedisServer::restart`] of a node through [`nodes_mut`](Self::nodes_mut) brings
    /// it back as a fresh node outside the cluster, and its slots stay unserved.)
    ///
    /// # Errors
    ///
    /// As [`RedisServer::restart`]; or when the cluster does not reach `cluster_state:ok` in
    /// time (the error includes every node's log tail).
    ///
    /// # Panics
    ///
    /// When `index` is not the index of a node.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let mut cluster = dlock_testkit::RedisCluster::start()?;
    /// cluster.nodes_mut()[1].kill();
    /// // ... requests for the slots of node 1 fail ...
    /// cluster.restart_node(1)?; // back, serving its slots, with no keys
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn restart_node(&mut self, index: usize) -> Result<(), HarnessError> {
        self.nodes[index].restart_keeping(&[NODES_CONF_FILE])?;
        self.wait_converged(&format!("(not run: restart of node {index})"))
    }

    /// The lease is lost now: [`RedisServer::expire_lock`] on the node that serves the lock
    /// `name` (default key prefix `dlock:`). The first running node is asked; one that does not
    /// serve the name's slot answers `MOVED`, and the node it names is asked instead.
    ///
    /// # Errors
    ///
    /// As [`RedisServer::expire_lock`]; also when the node that serves the name is down (the
    /// error names it).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let cluster = dlock_testkit::RedisCluster::start()?;
    /// // ... the code under test holds the lock "invoice:7" on the cluster ...
    /// assert_eq!(cluster.expire_lock("invoice:7")?, 1);
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn expire_lock(&self, name: &str) -> Result<usize, HarnessError> {
        self.expire_lock_with_prefix(DEFAULT_KEY_PREFIX, name)
    }

    /// [`expire_lock`](Self::expire_lock) for a dlock client whose key prefix is `prefix`.
    ///
    /// # Errors
    ///
    /// As [`expire_lock`](Self::expire_lock) and [`RedisServer::expire_lock_with_prefix`].
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let cluster = dlock_testkit::RedisCluster::start()?;
    /// cluster.expire_lock_with_prefix("billing:locks:", "invoice:7")?;
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn expire_lock_with_prefix(&self, prefix: &str, name: &str) -> Result<usize, HarnessError> {
        let keys = HolderKeys::new(prefix, name)?;
        let node = self.node_serving(keys.first())?;
        let removed = node.query(&keys.delete(), "expire_lock: DEL")?;
        keys.outcome(removed, &node.address())
    }

    /// [`RedisServer::cut_connections`] on every running node (a killed node has none to
    /// cut), and how many connections that cut in all. The cluster bus between the nodes is
    /// not a client connection and stays up.
    ///
    /// # Errors
    ///
    /// As [`RedisServer::cut_connections`], for the first node that fails.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let cluster = dlock_testkit::RedisCluster::start()?;
    /// let cut = cluster.cut_connections()?;
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn cut_connections(&self) -> Result<usize, HarnessError> {
        self.nodes
            .iter()
            .filter(|node| node.pid().is_some())
            .map(RedisServer::cut_connections)
            .sum()
    }

    /// The node that serves `key`'s slot, by the cluster's own answer: the first running node,
    /// or the one its `MOVED` names.
    fn node_serving(&self, key: &str) -> Result<&RedisServer, HarnessError> {
        let first = self
            .nodes
            .iter()
            .find(|node| node.pid().is_some())
            .ok_or_else(|| HarnessError::new("every node of the cluster was killed"))?;
        // `CLUSTER KEYSLOT` would need the slot map as well; a command on the key is routed by
        // the node itself. `EXISTS` changes nothing, wherever it runs.
        let mut cmd = redis::cmd("EXISTS");
        cmd.arg(key);
        let mut con = first.connection()?;
        let error = match cmd.query::<i64>(&mut con) {
            Ok(_) => return Ok(first),
            Err(error) => error,
        };
        // `redirect_node` is `(address, slot)`, the address as the node wrote it: `host:port`.
        let port = error
            .redirect_node()
            .and_then(|(address, _)| address.rsplit_once(':'))
            .and_then(|(_, port)| port.parse::<u16>().ok());
        let Some(port) = port else {
            return Err(HarnessError::new(format!(
                "EXISTS {key} failed on redis-server {}",
                first.address()
            ))
            .with_source(error));
        };
        let node = self
            .nodes
            .iter()
            .find(|node| node.port() == port || node.tls_port() == Some(port))
            .ok_or_else(|| {
                HarnessError::new(format!(
                    "the cluster sends `{key}` to port {port}, which is none of its nodes"
                ))
            })?;
        if node.pid().is_none() {
            return Err(HarnessError::new(format!(
                "`{key}` is served by node {}, which was killed",
                node.address()
            )));
        }
        Ok(node)
    }

    /// Runs `redis-cli` to completion, its output captured through a file (a pipe could fill
    /// up and block it while we wait), and returns that output.
    fn run_cli(&self, mut cmd: Command) -> Result<String, HarnessError> {
        let scratch = TempDir::with_prefix("dlock-testkit-cli-")
            .map_err(|e| HarnessError::new("cannot create a temp dir").with_source(e))?;
        let out_path = scratch.path().join("redis-cli.out");
        let out = File::create(&out_path)
            .and_then(|out| Ok((out.try_clone()?, out)))
            .map_err(|e| {
                HarnessError::new(format!("cannot create {}", out_path.display())).with_source(e)
            })?;
        cmd.stdin(Stdio::null()).stdout(out.0).stderr(out.1);
        let mut child = ChildGuard::spawn(cmd)?;
        let status = child.wait_timeout(CREATE_TIMEOUT)?;
        let output = fs::read(&out_path)
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default();
        let failure = match status {
            Some(status) if status.success() => return Ok(output),
            Some(status) => format!("redis-cli --cluster create failed ({status})"),
            None => format!(
                "redis-cli --cluster create did not finish within {} s",
                CREATE_TIMEOUT.as_secs()
            ),
        };
        Err(self.error(
            HarnessError::new(failure).with_command(child.command_line()),
            &output,
        ))
    }

    /// Polls every node until all agree the cluster is complete, or the deadline passes.
    fn wait_converged(&self, cli_output: &str) -> Result<(), HarnessError> {
        let deadline = Instant::now() + CONVERGE_TIMEOUT;
        loop {
            let pending = self.nodes.iter().find_map(|node| {
                node_state(node, self.nodes.len())
                    .err()
                    .map(|why| format!("node 127.0.0.1:{}: {why}", node.port()))
            });
            let Some(pending) = pending else {
                return Ok(());
            };
            if Instant::now() >= deadline {
                let message = format!(
                    "the cluster did not reach cluster_state:ok within {} s: {pending}",
                    CONVERGE_TIMEOUT.as_secs()
                );
                return Err(self.error(HarnessError::new(message), cli_output));
            }
            thread::sleep(POLL_INTERVAL);
        }
    }

    /// Attaches the `redis-cli` output and every node's log tail to `error`.
    fn error(&self, error: HarnessError, cli_output: &str) -> HarnessError {
        self.nodes.iter().fold(
            error.with_section("redis-cli output", cli_output.trim_end()),
            |error, node| {
                let label = format!("node 127.0.0.1:{} log", node.port());
                error.with_file_tail(&label, &node.dir().join(crate::options::LOG_FILE))
            },
        )
    }
}

/// `Ok` when `node` reports `cluster_state:ok`, all slots assigned and `expected_nodes` known;
/// otherwise what is still missing.
fn node_state(node: &RedisServer, expected_nodes: usize) -> Result<(), String> {
    let mut con = node.connection().map_err(|e| e.message().to_owned())?;
    let info: String = redis::cmd("CLUSTER")
        .arg("INFO")
        .query(&mut con)
        .map_err(|e| format!("CLUSTER INFO: {e}"))?;
    let field = |name: &str| {
        info.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
            .unwrap_or("?")
    };
    let expected_nodes = expected_nodes.to_string();
    let slots = SLOTS.to_string();
    let state = [
        ("cluster_state", "ok"),
        ("cluster_slots_assigned", slots.as_str()),
        ("cluster_known_nodes", expected_nodes.as_str()),
    ];
    if state.iter().all(|(name, want)| field(name) == *want) {
        Ok(())
    } else {
        Err(state
            .iter()
            .map(|(name, _)| format!("{name}:{}", field(name)))
            .collect::<Vec<_>>()
            .join(" "))
    }
}

impl fmt::Debug for RedisCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self { nodes } = self;
        f.debug_struct("RedisCluster")
            .field("nodes", nodes)
            .finish()
    }
}
