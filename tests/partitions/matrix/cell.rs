//! One cell of the matrix on a real network: a master, two replicas and three sentinels in
//! namespaces of their own, two client nodes each running one `dlock-test-worker matrix` per
//! workload, a nemesis that makes the sentinels fail the master over, and the heal.
//!
//! The nodes: `m` (master, sentinel), `r1`, `r2` (replicas), `s1`, `s2` (sentinels), `c1`,
//! `c2` (clients). The sentinels other than the master's have nodes of their own, so that the
//! replication links can be cut without blinding them.
//!
//! The timeline: the workers warm up until both clients of the lock workload have held the
//! lock (bounded). Then the master's packets to the replicas are cut (one way), and the
//! nemesis is applied right after the workload's next grant, or [`Plan::replication_cut`] later:
//! a grant the master acknowledged and no replica received, the case durability is for.
//! (Replication over veth takes microseconds, so no failover would otherwise meet an
//! unreplicated grant. Freezing the replicas does not do it: their kernels still take the
//! stream into the socket, and they read it when they resume. Nor does a relay on the
//! replication link under Sentinel, which points a replica whose master address differs from
//! the master's back at the master within seconds: `+fix-slave-config`.) The harness waits for
//! the sentinels to fail over, keeps the cut for [`Plan::cut`], heals, lets the clients run
//! [`Plan::after`] more and then until every client was answered after the heal (at most
//! [`Plan::recovery`] more: a loaded machine resyncs the demoted master later), and stops them. It then reads the data from the new master and
//! returns the cell's history.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dlock_testkit::{LineChild, Network, NodeId, ServerOptions};
use serde_json::Value;

use super::measure::measure;
use super::promise::{Nemesis, Row, WORKLOADS};
use super::record::Cell;
use crate::partitions::history::{Kind, Outcome};
use crate::partitions::network;

const WORKER: &str = env!("CARGO_BIN_EXE_dlock-test-worker");
/// Every client's lease: longer than a failover (about 2–3 s here), so that a hold granted
/// before the cut is still within its lease when the other side takes the lock.
const TTL_MS: u64 = 10_000;
const COMMAND_TIMEOUT_MS: u64 = 500;
/// The sentinel log lines kept with the history.
const SENTINEL_EVENTS: [&str; 5] = [
    "+elected-leader",
    "+selected-slave",
    "+failover-end",
    "+switch-master",
    "+convert-to-slave",
];
/// The workers' own bound; the harness stops them long before.
const WORKER_MS: u64 = 120_000;

/// How long each phase of a cell lasts.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plan {
    /// The longest warm-up.
    pub(crate) warm: Duration,
    /// The longest the replication links stay cut before the nemesis, waiting for the lock
    /// workload's next grant: at most above its longest hold (6 s), and below what makes
    /// Sentinel pass over a replica whose link has been down too long (ten times
    /// `down-after-milliseconds`). The `Replicas` rows wait it out: no replica can
    /// acknowledge a grant meanwhile.
    pub(crate) replication_cut: Duration,
    /// How long the cut lasts (at least until the failover was seen, plus a second).
    pub(crate) cut: Duration,
    /// How long the clients run after the heal, at least.
    pub(crate) after: Duration,
    /// How much longer they run, at most, until every client was answered after the heal
    /// (the "recovers" promise is judged on that): a fixed stop cut off a recovery that a
    /// loaded machine made late (the demoted master's resync, which `min-replicas-to-write`
    /// waits for), and failed the smoke cell.
    pub(crate) recovery: Duration,
    /// The lock workload's holds, ms: from, to.
    pub(crate) lock_hold_ms: (u64, u64),
}

/// The clients of one cell.
struct Workers {
    children: Vec<(String, LineChild)>,
}

impl Workers {
    /// Moves every line the workers printed so far into `cell`.
    fn pump(&self, cell: &mut Cell) {
        for (workload, child) in &self.children {
            while let Some(line) = child.try_line() {
                cell.take_line(workload, &line)
                    .unwrap_or_else(|e| panic!("{workload}: {e}"));
            }
        }
    }

    /// Pumps lines until `until`, or until `done` holds (checked after each round).
    fn pump_until(&self, cell: &mut Cell, until: Instant, mut done: impl FnMut(&Cell) -> bool) {
        loop {
            self.pump(cell);
            if done(cell) || Instant::now() >= until {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

pub(crate) fn now_us() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros())
}

/// The lock workload's grants to `process` so far.
fn grants(cell: &Cell, process: u32) -> usize {
    cell.ops
        .iter()
        .filter(|(w, op)| {
            w == "lock"
                && op.process == process
                && op.kind == Kind::Acquire
                && matches!(op.outcome, Outcome::Granted { .. })
        })
        .count()
}

/// The nodes of a cell's network.
struct Nodes {
    m: NodeId,
    r1: NodeId,
    r2: NodeId,
    s1: NodeId,
    s2: NodeId,
    c1: NodeId,
    c2: NodeId,
}

fn build(net: &mut Network, row: Row) -> Nodes {
    let [m, r1, r2, s1, s2, c1, c2] =
        ["m", "r1", "r2", "s1", "s2", "c1", "c2"].map(|label| net.add_node(label).expect("node"));
    let mut options = ServerOptions::new();
    if row == Row::ReplicasMin {
        // On every server, so that the promoted replica keeps it.
        options = options
            .arg("min-replicas-to-write", "1")
            .arg("min-replicas-max-lag", "2");
    }
    net.start_server(m, options.clone()).expect("master");
    for r in [r1, r2] {
        net.start_replica(r, m, options.clone()).expect("replica");
    }
    for node in [m, s1, s2] {
        net.start_sentinel(node, m, 2).expect("sentinel");
    }
    net.wait_sentinels(2).expect("the sentinels see each other");
    Nodes {
        m,
        r1,
        r2,
        s1,
        s2,
        c1,
        c2,
    }
}

fn spawn(net: &Network, row: Row, nodes: &Nodes, plan: Plan) -> Workers {
    let (client, durability) = row.client();
    let sentinels = net.sentinel_urls().join(",");
    let mut children = Vec::new();
    for (w, workload) in WORKLOADS.iter().enumerate() {
        let (hold_min, hold_max) = match *workload {
            "lock" => plan.lock_hold_ms,
            "guarded" => (300, 2_000),
            _ => (0, 0),
        };
        for (process, node) in [(1u32, nodes.c1), (2, nodes.c2)] {
            let mut cmd = net.command(node, WORKER);
            cmd.arg("matrix")
                .arg(format!("workload={workload}"))
                .arg(format!("client={client}"))
                .arg(format!("durability={durability}"))
                .arg(format!("sentinels={sentinels}"))
                .arg(format!("name={workload}"))
                .arg(format!("process={process}"))
                .arg(format!("ms={WORKER_MS}"))
                .arg(format!("ttl_ms={TTL_MS}"))
                .arg(format!("command_timeout_ms={COMMAND_TIMEOUT_MS}"))
                .arg(format!("hold_min_ms={hold_min}"))
                .arg(format!("hold_max_ms={hold_max}"))
                .arg("period_ms=100")
                .arg(format!("seed={}", 7 + 2 * w + process as usize));
            let child = LineChild::spawn(cmd).expect("spawn a worker");
            children.push(((*workload).to_owned(), child));
        }
    }
    Workers { children }
}

fn apply(net: &Network, nemesis: Nemesis, n: &Nodes) {
    let others = [n.r1, n.r2, n.s1, n.s2, n.c1, n.c2];
    match nemesis {
        Nemesis::Partition => net.partition(&[&[n.m], &others]),
        Nemesis::OneWay => others
            .into_iter()
            .try_for_each(|to| net.cut_one_way(n.m, to)),
        Nemesis::HalfOpen => [n.r1, n.r2, n.s1, n.s2, n.c1]
            .into_iter()
            .try_for_each(|other| net.half_open(n.m, other)),
        Nemesis::IsolateMinority => net.isolate(&[n.m, n.c1]),
    }
    .expect("the nemesis");
}

/// Runs one cell; `None` where namespaces cannot be made.
pub(crate) fn run(test: &str, row: Row, nemesis: Nemesis, plan: Plan) -> Option<Cell> {
    let mut net = network(test)?;
    let nodes = build(&mut net, row);
    let workers = spawn(&net, row, &nodes, plan);
    let mut cell = Cell {
        row: row.name().to_owned(),
        nemesis: nemesis.name().to_owned(),
        ..Cell::default()
    };
    let warm_until = Instant::now() + plan.warm;
    workers.pump_until(&mut cell, warm_until, |c| {
        grants(c, 1) > 0 && grants(c, 2) > 0
    });
    let before = grants(&cell, 1) + grants(&cell, 2);
    for r in [nodes.r1, nodes.r2] {
        net.cut_one_way(nodes.m, r).expect("cut the replication");
    }
    cell.timeline.push(("replication-cut".into(), now_us()));
    workers.pump_until(&mut cell, Instant::now() + plan.replication_cut, |c| {
        grants(c, 1) + grants(c, 2) > before
    });
    apply(&net, nemesis, &nodes);
    let cut = Instant::now();
    cell.timeline.push(("cut".into(), now_us()));
    let new = net.wait_failover(nodes.m).expect("the sentinels fail over");
    cell.timeline.push(("failover".into(), now_us()));
    let heal_at = (cut + plan.cut).max(Instant::now() + Duration::from_secs(1));
    workers.pump_until(&mut cell, heal_at, |_| false);
    net.heal().expect("heal");
    cell.timeline.push(("heal".into(), now_us()));
    let healed = Instant::now();
    workers.pump_until(&mut cell, healed + plan.after, |_| false);
    // Checked every 100 ms: it reads the whole history.
    let mut checked = Instant::now();
    workers.pump_until(&mut cell, healed + plan.after + plan.recovery, |c| {
        if checked.elapsed() < Duration::from_millis(100) {
            return false;
        }
        checked = Instant::now();
        WORKLOADS.iter().all(|w| measure(c, w).recovered)
    });
    workers.pump(&mut cell);
    drop(workers);
    read_finals(&net, nodes.m, new, &mut cell);
    Some(cell)
}

/// The data as the master holds it at the end (the one a majority of sentinels names).
fn read_finals(net: &Network, old: NodeId, promoted: NodeId, cell: &mut Cell) {
    let master = net.wait_failover(old).unwrap_or(promoted);
    // What the sentinels did (a second failover explains writes lost after the first).
    for node in net.nodes() {
        let Ok(sentinel) = net.sentinel(node) else {
            continue;
        };
        let log = sentinel.log();
        for line in log
            .lines()
            .filter(|l| SENTINEL_EVENTS.iter().any(|e| l.contains(e)))
        {
            cell.sentinels.push((node.index(), line.to_owned()));
        }
    }
    let server = net.server(master).expect("the master");
    let mut con = server.connection().expect("socket");
    let list: Vec<String> = redis::cmd("LRANGE")
        .arg("{guarded}:writes")
        .arg(0)
        .arg(-1)
        .query(&mut con)
        .expect("LRANGE");
    let set: Option<String> = redis::cmd("GET")
        .arg("{set}:set")
        .query(&mut con)
        .expect("GET");
    cell.finals.push((
        "guarded".into(),
        "{guarded}:writes".into(),
        Value::from(list),
    ));
    cell.finals.push((
        "set".into(),
        "{set}:set".into(),
        Value::from(set.unwrap_or_default()),
    ));
}
