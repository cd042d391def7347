//! [`Network`]: servers and client processes in network namespaces of their own, joined
//! through a router namespace where the nemeses cut links — partitions, one-way cuts,
//! half-open links — without RSTs, and heal them.
//!
//! The layout: every node is a namespace with one veth link to the router namespace. Node `i`
//! (0-based) has the address `10.77.<i+1>.2/24`, the router's end of its link `10.77.<i+1>.1`,
//! and its only route beyond its link is the default route through the router. The router
//! forwards between the node links and has no other link: nothing in the network can reach
//! the host's interfaces, and the host cannot reach into it (the test talks to servers through
//! Unix sockets, see [`NetServer::connection`]). Every network has namespaces of its own, so
//! the same addresses serve every network at once.
//!
//! A cut is a rule in the router, `ip rule add from A to B blackhole`: the router drops the
//! packets from A to B silently (no RST, no ICMP), so both ends keep their TCP connections open
//! and hear nothing — the fault of a switch that fails or a firewall that drops. Heal deletes
//! the rules, and the connections carry on (after TCP's retransmission timers) unless an end
//! gave up on them meanwhile.

mod cuts;
mod netns;
mod node_server;
pub(crate) mod relay;

use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::fs;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

pub use node_server::NetServer;

use crate::options::LOG_FILE;
use crate::{HarnessError, ServerOptions, redis_server_binary};
use cuts::Cut;
use netns::Namespace;

/// The port of every redis-server in the network (each node has its own ports).
pub const SERVER_PORT: u16 = 6379;
/// The port of every sentinel in the network.
pub const SENTINEL_PORT: u16 = 26379;
/// The name under which the network's sentinels monitor the master.
pub const SENTINEL_MASTER_NAME: &str = "dlock";
/// `ip rule` priority of the cuts: before the `local` table's lookups would not matter (the
/// router forwards only), so any value below `main`'s 32766.
const CUT_PRIORITY: &str = "100";
/// Most nodes of one network: node `i` lives in `10.77.<i+1>.0/24`.
const MAX_NODES: usize = 250;
/// How long a replica may take to link to its master.
const LINK_TIMEOUT: Duration = Duration::from_secs(20);
/// How long the sentinels may take to agree on a new master.
const FAILOVER_TIMEOUT: Duration = Duration::from_secs(30);
const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// A node of a [`Network`]: a namespace with one address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(usize);

impl NodeId {
    /// The node's index in the order nodes were added (0 first).
    pub fn index(self) -> usize {
        self.0
    }
}

struct Node {
    label: String,
    ns: Namespace,
}

/// Redis servers, sentinels and client processes in network namespaces of their own, with
/// network faults between them: partitions of any sets of nodes, one-way cuts, half-open
/// links, a group isolated from the rest, and heal.
///
/// Needs root and iproute2 (`ip netns`); [`Network::check_requirements`] says why not, for a
/// test that reports itself skipped. Dropping the network kills every process in its
/// namespaces (its servers and whatever was started with [`command`](Self::command)) and
/// removes the namespaces, also when a test panics. A test process that is SIGKILLed leaves
/// them behind: the next `Network::start` on the machine removes the namespaces of every
/// process that no longer runs (their names carry the pid).
///
/// # Example: a client cut off from its master
///
/// ```no_run
/// use std::time::Duration;
/// use dlock_testkit::{LineChild, Network, ServerOptions};
///
/// let mut net = Network::start()?;
/// let master = net.add_node("master")?;
/// let client = net.add_node("client")?;
/// net.start_server(master, ServerOptions::new())?;
/// let url = net.server(master)?.url(); // redis://10.77.1.2:6379/
///
/// let mut cmd = net.command(client, "target/debug/my-worker"); // your program, in the client's namespace
/// cmd.env("REDIS_URL", url);
/// let worker = LineChild::spawn(cmd)?;
/// worker.wait_for("locked", Duration::from_secs(10))?;
///
/// net.half_open(client, master)?; // packets vanish both ways; no RST
/// // ... the worker's lease must be reported lost within one TTL ...
/// net.heal()?;
/// // ... and it must take the lock again quickly ...
/// # Ok::<(), dlock_testkit::HarnessError>(())
/// ```
pub struct Network {
    // Fields drop in order: processes first, then the node namespaces, then the router.
    sentinels: Vec<(NodeId, NetServer)>,
    servers: Vec<(NodeId, NetServer)>,
    nodes: Vec<Node>,
    cuts: Mutex<BTreeSet<Cut>>,
    router: Namespace,
    stem: String,
}

impl Network {
    /// Why this machine cannot make network namespaces (not root, no `ip`, namespaces not
    /// allowed), or `Ok`. It makes and removes one namespace to find out.
    ///
    /// # Errors
    ///
    /// The reason, for a `SKIPPED <test>: <why>` line.
    pub fn check_requirements() -> Result<(), String> {
        netns::requirements()
    }

    /// Makes the router namespace of a new network, with no nodes yet. First removes the
    /// namespaces that processes no longer running left behind.
    ///
    /// # Errors
    ///
    /// When a namespace cannot be made (not root, no iproute2): the error has `ip`'s message.
    pub fn start() -> Result<Network, HarnessError> {
        netns::sweep_stale();
        let stem = netns::new_stem();
        let router = Namespace::add(format!("{stem}-router"))?;
        let forward = Command::new("ip")
            .args(["netns", "exec", router.name(), "sh", "-c"])
            .arg("echo 1 > /proc/sys/net/ipv4/ip_forward")
            .status()
            .map_err(|e| HarnessError::new("cannot run ip netns exec").with_source(e))?;
        if !forward.success() {
            return Err(HarnessError::new(format!(
                "cannot turn forwarding on in {} ({forward})",
                router.name()
            )));
        }
        Ok(Network {
            sentinels: Vec::new(),
            servers: Vec::new(),
            nodes: Vec::new(),
            cuts: Mutex::new(BTreeSet::new()),
            router,
            stem,
        })
    }

    /// Adds a node: a namespace linked to the router, with the next address. `label` is for
    /// messages and the namespace's name (`dlock-net-<pid>-<n>-n<i>`).
    ///
    /// # Errors
    ///
    /// When the network has 250 nodes, or `ip` fails.
    pub fn add_node(&mut self, label: &str) -> Result<NodeId, HarnessError> {
        let i = self.nodes.len();
        if i >= MAX_NODES {
            return Err(HarnessError::new(format!(
                "a network has at most {MAX_NODES} nodes"
            )));
        }
        let ns = Namespace::add(format!("{}-n{i}", self.stem))?;
        let link = format!("n{i}");
        self.router.ip(&[
            "link",
            "add",
            &link,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            ns.name(),
        ])?;
        let (node_addr, router_addr) = (Self::ip_of(i), Self::router_ip_of(i));
        ns.ip(&["addr", "add", &format!("{node_addr}/24"), "dev", "eth0"])?;
        ns.ip(&["link", "set", "eth0", "up"])?;
        ns.ip(&["route", "add", "default", "via", &router_addr.to_string()])?;
        self.router
            .ip(&["addr", "add", &format!("{router_addr}/24"), "dev", &link])?;
        self.router.ip(&["link", "set", &link, "up"])?;
        self.nodes.push(Node {
            label: label.to_owned(),
            ns,
        });
        Ok(NodeId(i))
    }

    fn ip_of(i: usize) -> Ipv4Addr {
        // `i < MAX_NODES` (250), so the octet fits.
        Ipv4Addr::new(10, 77, u8::try_from(i + 1).unwrap_or(u8::MAX), 2)
    }

    fn router_ip_of(i: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, 77, u8::try_from(i + 1).unwrap_or(u8::MAX), 1)
    }

    /// The node's address.
    pub fn address(&self, node: NodeId) -> Ipv4Addr {
        Self::ip_of(node.0)
    }

    /// The node's namespace name (for `ip netns exec` by hand).
    ///
    /// # Errors
    ///
    /// When `node` is not a node of this network.
    pub fn namespace(&self, node: NodeId) -> Result<&str, HarnessError> {
        Ok(self.node(node)?.ns.name())
    }

    /// The node's label, as given to [`add_node`](Self::add_node).
    pub fn label(&self, node: NodeId) -> &str {
        self.nodes.get(node.0).map_or("?", |n| n.label.as_str())
    }

    /// Every node, in the order they were added.
    pub fn nodes(&self) -> Vec<NodeId> {
        (0..self.nodes.len()).map(NodeId).collect()
    }

    fn node(&self, node: NodeId) -> Result<&Node, HarnessError> {
        self.nodes.get(node.0).ok_or_else(|| {
            HarnessError::new(format!(
                "node {} is not in this network ({} nodes)",
                node.0,
                self.nodes.len()
            ))
        })
    }

    /// A command that runs `program` inside the node's namespace (`ip netns exec <ns>
    /// program`): a client of the network. Add its arguments and spawn it, e.g. with
    /// [`LineChild::spawn`](crate::LineChild::spawn); `ip netns exec` executes the program in
    /// place, so the child's pid is the program's. The network kills it when it drops, if it
    /// still runs and has entered the namespace by then (a process spawned at the very moment
    /// the network drops may not have: keep it in a [`ChildGuard`](crate::ChildGuard) or
    /// [`LineChild`](crate::LineChild), which kill it on their own drop).
    ///
    /// A node that is not in the network gives a command that fails to run.
    pub fn command(&self, node: NodeId, program: impl AsRef<OsStr>) -> Command {
        let ns = self.nodes.get(node.0).map_or_else(
            || format!("{}-no-node-{}", self.stem, node.0),
            |n| n.ns.name().to_owned(),
        );
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec"]).arg(ns).arg(program);
        cmd
    }
}

mod faults;
mod servers;

impl fmt::Debug for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            sentinels,
            servers,
            nodes,
            cuts,
            router,
            stem,
        } = self;
        f.debug_struct("Network")
            .field("stem", stem)
            .field("router", &router.name())
            .field(
                "nodes",
                &nodes.iter().map(|n| n.label.as_str()).collect::<Vec<_>>(),
            )
            .field(
                "servers",
                &servers.iter().map(|(n, _)| n.0).collect::<Vec<_>>(),
            )
            .field(
                "sentinels",
                &sentinels.iter().map(|(n, _)| n.0).collect::<Vec<_>>(),
            )
            .field("cuts", &*lock(cuts))
            .finish()
    }
}

fn lock(cuts: &Mutex<BTreeSet<Cut>>) -> MutexGuard<'_, BTreeSet<Cut>> {
    cuts.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Polls `check` until it returns `Ok`, or fails with its last reason after `limit`.
fn poll<T>(limit: Duration, mut check: impl FnMut() -> Result<T, String>) -> Result<T, String> {
    let deadline = Instant::now() + limit;
    loop {
        match check() {
            Ok(value) => return Ok(value),
            Err(why) if Instant::now() >= deadline => return Err(why),
            Err(_) => thread::sleep(POLL_INTERVAL),
        }
    }
}

/// A new temp dir for one server of the network.
fn server_dir() -> Result<TempDir, HarnessError> {
    TempDir::with_prefix("dlock-testkit-net-")
        .map_err(|e| HarnessError::new("cannot create a temp dir").with_source(e))
}

/// Writes `text` to `dir/<name>`.
fn write_file(dir: &TempDir, name: &str, text: &str) -> Result<OsString, HarnessError> {
    let path = dir.path().join(name);
    fs::write(&path, text).map_err(|e| {
        HarnessError::new(format!("cannot write {}", path.display())).with_source(e)
    })?;
    Ok(path.into_os_string())
}

/// `LOG_FILE` in `dir`, as an argument.
fn log_arg(dir: &TempDir) -> OsString {
    dir.path().join(LOG_FILE).into_os_string()
}

fn socket_addr(ip: Ipv4Addr, port: u16) -> SocketAddrV4 {
    SocketAddrV4::new(ip, port)
}

fn server_binary(options: &ServerOptions) -> Result<std::path::PathBuf, HarnessError> {
    match options.chosen_binary() {
        Some(chosen) => Ok(chosen.to_path_buf()),
        None => redis_server_binary(),
    }
}
