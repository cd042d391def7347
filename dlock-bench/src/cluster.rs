//! The Cluster rows (issue #29): W2 and W8 on a 3-master Redis Cluster (dlock-testkit's
//! `RedisCluster`, started by this stage) beside the same workloads on the run's single server,
//! in one run, with dlock's default client (`Client::cluster_builder` with the masters' URLs on
//! the cluster). Only dlock runs: the raw floors and rslock open one plain connection to one
//! server and have no cluster client.
//!
//! * **W2** as `w2.rs` runs it (64 tasks of uncontended pairs on distinct names, its warm-up,
//!   barriers and timed loop, multi-thread runtime with 2 workers), one round on each deployment.
//! * **W8** as `w8.rs` runs it (the worker processes are given every master's URL).
//!
//! Per master, from its own `INFO commandstats`/`cpu`: commands and redis-server CPU in the
//! window, and their spread (busiest ÷ idlest − 1; dlock's keys carry their name as hash tag,
//! so the names should spread evenly over the slots: within ±15 % wanted). Per operation:
//! commands on the cluster ÷ on the single server (a cluster should cost no command more).
//!
//! **Projection, on paper.** This machine has 2 cores for the client and 3 masters, so no
//! cluster rate measured here says what more masters would serve. What is measured is each
//! master's redis-server CPU per operation; [`projected_per_s`] turns it into the operations/s
//! `M` masters could serve if Redis CPU were the only limit: every master a core of its own,
//! the load spread over the masters as unevenly as measured (the busiest master's share, ×
//! `M`), the CPU per operation independent of `M` (no cross-slot work: every key of a lock is in
//! one slot), and enough clients.

use std::fmt::Write as _;
use std::sync::Arc;

use dlock_testkit::RedisCluster;
use serde::{Deserialize, Serialize};

use crate::dlock::Dlock;
use crate::nodes::{NodeLoad, Nodes, idle_cpu_us_per_s, loads, measure_nodes, spread_pct, sum};
use crate::redis_stats::{PerCommand, PerOp};
use crate::report::{Entry, Section, Target};
use crate::rt::{BoxError, multi_thread_runtime};
use crate::spec::Counts;
use crate::stats::{count, float, ns_to_s, per_second, percent, ratio};
use crate::subject::{Fence, Subject};
use crate::subjects::Setting;
use crate::table::{int, table};
use crate::w2::{Gates, run_task};
use crate::w8::{self, IDLE_SPAN, W8Result};

/// The masters whose rate is projected.
const PROJECTED_MASTERS: [u32; 3] = [3, 6, 12];
/// Issue #29: each master's commands and CPU within ±15 % of the others'.
const MAX_SPREAD_PCT: f64 = 15.0;
/// W2's commands per pair on the cluster ÷ on the single server: "the same", within ±5 %. (W8's
/// are not held to it: they depend on the share of acquisitions that waited, which the timing
/// of each deployment sets.)
const SAME_COMMANDS: f64 = 0.05;

/// W2 on one deployment.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct W2OnNodes {
    pub(crate) cluster: bool,
    pub(crate) pairs: u64,
    pub(crate) window_s: f64,
    pub(crate) pairs_per_s: f64,
    /// Every node summed.
    pub(crate) per_pair: PerOp,
    pub(crate) loads: Vec<NodeLoad>,
    pub(crate) commands: PerCommand,
}

/// What `M` masters could serve if Redis CPU were the limit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Projection {
    pub(crate) workload: String,
    /// redis-server CPU per operation, every master summed, µs.
    pub(crate) cpu_us_per_op: f64,
    /// The busiest master's CPU ÷ the masters' mean.
    pub(crate) imbalance: f64,
    /// `(masters, operations/s)`.
    pub(crate) per_s: Vec<(u32, f64)>,
}

/// The Cluster stage's result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct ClusterResult {
    pub(crate) masters: usize,
    /// Single server, then cluster.
    pub(crate) w2: [W2OnNodes; 2],
    pub(crate) w8: [W8Result; 2],
    pub(crate) projections: Vec<Projection>,
}

/// Operations/s that `masters` masters could serve if Redis CPU were the only limit, from the
/// measured CPU per operation (µs, every master summed) and imbalance (the busiest master's
/// CPU ÷ the mean): each master has `1e6` µs of CPU per second and carries `imbalance / masters`
/// of every operation's CPU at most.
pub(crate) fn projected_per_s(cpu_us_per_op: f64, imbalance: f64, masters: u32) -> f64 {
    f64::from(masters) * 1e6 / (cpu_us_per_op * imbalance)
}

/// The busiest value ÷ the mean (NaN when there is none or all are 0).
pub(crate) fn imbalance(values: &[u64]) -> f64 {
    let max = values.iter().copied().max().unwrap_or(0);
    let total: u64 = values.iter().sum();
    ratio(max * count(values.len()), total)
}

impl Projection {
    fn of(workload: &str, ops: u64, loads: &[NodeLoad]) -> Projection {
        let cpu: Vec<u64> = loads.iter().map(NodeLoad::busy_cpu_us).collect();
        let cpu_us_per_op = ratio(cpu.iter().sum(), ops);
        let imbalance = imbalance(&cpu);
        let per_s = PROJECTED_MASTERS
            .iter()
            .map(|&m| (m, projected_per_s(cpu_us_per_op, imbalance, m)))
            .collect();
        Projection {
            workload: workload.to_owned(),
            cpu_us_per_op,
            imbalance,
            per_s,
        }
    }
}

/// The Cluster stage: a 3-master cluster, W2 and W8 on the single server and on it.
pub(crate) fn run(s: &Setting) -> Result<Entry, BoxError> {
    eprintln!("  starting a 3-master cluster …");
    let cluster = RedisCluster::start()?;
    let single = Nodes::single(&s.url);
    let masters = Nodes::cluster(cluster.urls());
    let counts = &s.counts;
    eprintln!("  W2, single server, then cluster …");
    let w2 = [w2_on(&single, counts)?, w2_on(&masters, counts)?];
    eprintln!("  W8, single server, then cluster …");
    let w8 = [w8::run_on(&single, counts)?, w8::run_on(&masters, counts)?];
    let projections = vec![
        Projection::of("W2 pairs", w2[1].pairs, &w2[1].loads),
        Projection::of("W8 acquisitions", w8[1].acquisitions(), &w8[1].loads),
    ];
    Entry::new(
        "cluster",
        ClusterResult {
            masters: masters.urls().len(),
            w2,
            w8,
            projections,
        },
    )
}

/// W2 with dlock's default client on `nodes`, one round.
fn w2_on(nodes: &Nodes, counts: &Counts) -> Result<W2OnNodes, BoxError> {
    multi_thread_runtime()?.block_on(async {
        let mut controls = nodes.fresh().await?;
        let idle = idle_cpu_us_per_s(&mut controls, IDLE_SPAN).await?;
        let subject = Arc::new(Dlock::from(nodes.client()?));
        let tasks = usize::try_from(counts.w2_tasks)?;
        let gates = Arc::new(Gates::new(tasks));
        let handles: Vec<_> = (0..counts.w2_tasks)
            .map(|task| {
                tokio::spawn(run_task(
                    subject.clone(),
                    gates.clone(),
                    task,
                    Fence::No,
                    counts.w2_warmup_per_task,
                    counts.w2_pairs_of(task),
                ))
            })
            .collect();
        gates.warmed.wait().await;
        let all_pairs = async {
            gates.go.wait().await;
            let mut pairs = 0;
            for handle in handles {
                pairs += count(handle.await??.len());
            }
            Ok(pairs)
        };
        let (pairs, window_ns, window) = measure_nodes(&mut controls, all_pairs).await?;
        let total = sum(&window);
        Ok(W2OnNodes {
            cluster: nodes.is_cluster(),
            pairs,
            window_s: ns_to_s(window_ns),
            pairs_per_s: per_second(pairs, window_ns),
            per_pair: PerOp::of(&total, pairs, <Dlock as Subject>::OWN_PLAIN),
            loads: loads(nodes, &window, &idle, window_ns),
            commands: total.commands,
        })
    })
}

/// What the tables show of one workload on one deployment.
struct Row<'a> {
    workload: &'static str,
    cluster: bool,
    ops: u64,
    per_s: f64,
    per_op: &'a PerOp,
    loads: &'a [NodeLoad],
}

impl ClusterResult {
    fn rows(&self) -> Vec<Row<'_>> {
        let w2 = self.w2.iter().map(|w| Row {
            workload: "W2 pairs",
            cluster: w.cluster,
            ops: w.pairs,
            per_s: w.pairs_per_s,
            per_op: &w.per_pair,
            loads: &w.loads,
        });
        let w8 = self.w8.iter().map(|w| Row {
            workload: "W8 acquisitions",
            cluster: w.cluster,
            ops: w.acquisitions(),
            per_s: w.acquisitions_per_s,
            per_op: &w.per_acq,
            loads: &w.loads,
        });
        w2.chain(w8).collect()
    }
}

fn spreads(loads: &[NodeLoad]) -> (f64, f64) {
    (
        spread_pct(loads.iter().map(|l| l.commands)),
        spread_pct(loads.iter().map(NodeLoad::busy_cpu_us)),
    )
}

fn deployment(cluster: bool) -> &'static str {
    if cluster { "cluster" } else { "single" }
}

impl Section for ClusterResult {
    fn details(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "### Cluster: W2 and W8 on {} masters beside a single server (dlock only)\n",
            self.masters
        );
        let rows = self.rows();
        let summary = rows.iter().map(|r| {
            let (cmds, cpu) = spreads(r.loads);
            vec![
                r.workload.to_owned(),
                deployment(r.cluster).to_owned(),
                int(float(r.ops)),
                int(r.per_s),
                format!("{:.2}", r.per_op.commands),
                format!("{:.2}", r.per_op.round_trips),
                format!("{:.1}", r.per_op.server_cpu_us),
                format!(
                    "{:.1}",
                    ratio(r.loads.iter().map(NodeLoad::busy_cpu_us).sum(), r.ops)
                ),
                format!("{cmds:.1}"),
                format!("{cpu:.1}"),
            ]
        });
        let header = [
            "workload",
            "on",
            "operations",
            "per s",
            "commands/op",
            "round trips/op",
            "redis CPU µs/op (all nodes)",
            "less idle",
            "commands spread %",
            "busy CPU spread %",
        ];
        table(out, "llrrrrrrrr", &header, summary);
        let _ = writeln!(
            out,
            "Spread: busiest ÷ idlest node − 1. Busy CPU: each node's redis-server CPU in the \
             window less its idle rate (measured for {} s before, with nothing sent: timers, the \
             cluster bus) over the window's length. W2: one round on each deployment. W8's \
             commands per acquisition depend on how many acquisitions waited ({:.1} % single, \
             {:.1} % cluster in this run), so they are not held to the single server's.\n",
            IDLE_SPAN.as_secs(),
            percent(self.w8[0].handoffs.waited, self.w8[0].acquisitions()),
            percent(self.w8[1].handoffs.waited, self.w8[1].acquisitions()),
        );
        let per_master = rows.iter().filter(|r| r.cluster).flat_map(|r| {
            r.loads.iter().map(move |l| {
                vec![
                    r.workload.to_owned(),
                    l.url.clone(),
                    int(float(l.commands)),
                    format!("{:.1}", float(l.server_cpu_us) / 1e3),
                    format!("{:.1}", float(l.idle_cpu_us) / 1e3),
                    format!("{:.1}", ratio(l.busy_cpu_us(), r.ops)),
                ]
            })
        });
        let header = [
            "workload",
            "master",
            "commands",
            "redis CPU ms",
            "of which idle ms",
            "busy redis CPU µs per op (of all ops)",
        ];
        table(out, "llrrrr", &header, per_master);
        let _ = writeln!(
            out,
            "Projection on paper (not measured: 2 cores here), if Redis CPU were the only \
             limit: each master a core of its own, the load as unevenly spread as measured, the \
             CPU per operation as measured on the cluster, clients never the limit.\n"
        );
        let projected = self.projections.iter().map(|p| {
            let mut row = vec![
                p.workload.clone(),
                format!("{:.1}", p.cpu_us_per_op),
                format!("{:.2}", p.imbalance),
            ];
            row.extend(p.per_s.iter().map(|&(_, v)| int(v)));
            row
        });
        let header = [
            "workload",
            "redis CPU µs/op",
            "busiest ÷ mean",
            "3 masters /s",
            "6 masters /s",
            "12 masters /s",
        ];
        table(out, "lrrrrr", &header, projected);
        for w8 in &self.w8 {
            w8.details(out);
        }
    }

    fn targets(&self) -> Vec<Target> {
        let mut targets = Vec::new();
        for r in self.rows().iter().filter(|r| r.cluster) {
            let (cmds, cpu) = spreads(r.loads);
            for (what, spread) in [("commands", cmds), ("redis CPU", cpu)] {
                targets.push(Target::new(
                    format!(
                        "Cluster {}: per-master {what} spread (max ÷ min − 1)",
                        r.workload
                    ),
                    "≤ 15 %",
                    format!("{spread:.1} %"),
                    spread <= MAX_SPREAD_PCT,
                ));
            }
        }
        {
            let (single, cluster) = (&self.w2[0].per_pair, &self.w2[1].per_pair);
            let what = "W2 commands per pair";
            let r = cluster.commands / single.commands;
            targets.push(Target::new(
                format!("Cluster {what}: cluster ÷ single"),
                "1.00 (±5 %)",
                format!("{r:.3} ({:.2} / {:.2})", cluster.commands, single.commands),
                (r - 1.0).abs() <= SAME_COMMANDS,
            ));
        }
        for mut target in self.w8[1].targets() {
            target.name = format!("Cluster {}", target.name);
            targets.push(target);
        }
        targets
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn projection_scales_with_masters_and_pays_for_imbalance() {
        // 50 µs of Redis CPU per pair: one core serves 20,000 pairs/s; 3 perfectly balanced
        // masters 60,000.
        assert!((projected_per_s(50.0, 1.0, 1) - 20_000.0).abs() < 1e-6);
        assert!((projected_per_s(50.0, 1.0, 3) - 60_000.0).abs() < 1e-6);
        assert!((projected_per_s(50.0, 1.0, 12) - 240_000.0).abs() < 1e-6);
        // The busiest master 10 % above the mean saturates first.
        assert!((projected_per_s(50.0, 1.1, 6) - 120_000.0 / 1.1).abs() < 1e-6);
    }

    #[test]
    fn imbalance_is_busiest_over_mean() {
        assert!((imbalance(&[100, 100, 100]) - 1.0).abs() < 1e-9);
        assert!((imbalance(&[90, 100, 110]) - 1.1).abs() < 1e-9);
        assert!(imbalance(&[]).is_nan());
        assert!(imbalance(&[0, 0]).is_nan());
        let node = |url: &str| NodeLoad {
            url: url.into(),
            commands: 10,
            server_cpu_us: 3_500,
            idle_cpu_us: 500,
        };
        let loads = [node("a"), node("b")];
        let p = Projection::of("W2 pairs", 100, &loads);
        assert!((p.cpu_us_per_op - 60.0).abs() < 1e-9);
        assert_eq!(p.per_s.len(), 3);
        assert!((p.per_s[0].1 - 50_000.0).abs() < 1e-6);
    }
}
