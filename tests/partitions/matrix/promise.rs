//! The matrix's rows (a client and its durability), its nemeses, what dlock's README and guide
//! promise for each cell, the check of a cell's figures against that promise, and the
//! markdown table.
//!
//! The promises, stated before the run (the chapter quotes them):
//! - every dlock row: a write guarded by the lock never lands after a newer holder's (guarded
//!   writes, `fenced_set`); the client is answered again after the heal (production,
//!   Sentinel: it follows a failover by itself);
//! - `Durability::None`: nothing more — a failover can lose a lock, and two holders may
//!   coexist briefly (guarantees). Nor do fences rise in grant order while they do: a client
//!   still connected to the old master is granted fences that continue its counter, below
//!   the new master's (floored at its clock on new connections), which is what makes a
//!   fenced store refuse the old side (measured, not checked; the chapter says so);
//! - the `Replicas` rows: fences rise in grant order too (guarantees: fencing tokens stay
//!   increasing across any failover; no grant comes from an old master there, since no
//!   replica can acknowledge it);
//! - `Durability::Replicas { n: 1 }` (with or without `min-replicas-to-write`): no two
//!   holders within their leases and no acknowledged acquire lost, since the failover here
//!   always promotes a replica that acknowledged the grant: both replicas are on the majority
//!   side in every nemesis, and Sentinel promotes the most up-to-date one (production,
//!   "Replica acknowledgement"). The data written under the lock is not waited for: a write
//!   acknowledged by a master that is then failed over may be lost (not promised);
//! - the plain client (`SET NX PX` + compare-and-delete): no promise; there for comparison.

use std::fmt::Write as _;

use super::measure::Measure;

/// A row: which client, with which durability.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Row {
    None,
    Replicas,
    ReplicasMin,
    Plain,
}

impl Row {
    pub(crate) const ALL: [Row; 4] = [Row::None, Row::Replicas, Row::ReplicasMin, Row::Plain];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Row::None => "none",
            Row::Replicas => "replicas",
            Row::ReplicasMin => "replicas+min",
            Row::Plain => "plain",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<Row> {
        Row::ALL.into_iter().find(|r| r.name() == name)
    }

    /// How the table names it.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Row::None => "dlock, `Durability::None`",
            Row::Replicas => "dlock, `Replicas { n: 1 }`",
            Row::ReplicasMin => "dlock, `Replicas { n: 1 }` + `min-replicas-to-write 1`",
            Row::Plain => "plain `SET NX PX` + Lua release",
        }
    }

    /// The worker's `client=` and `durability=` arguments.
    pub(crate) fn client(self) -> (&'static str, &'static str) {
        match self {
            Row::None => ("dlock", "none"),
            Row::Replicas | Row::ReplicasMin => ("dlock", "replicas:1:2000"),
            Row::Plain => ("plain", "none"),
        }
    }

    /// The cell's promise, in words (the table's column).
    pub(crate) fn promise(self) -> &'static str {
        match self {
            Row::None => {
                "stale writes refused, recovers; losses, overlaps, fences out of grant order possible"
            }
            Row::Replicas | Row::ReplicasMin => {
                "no overlap, no lost acquire, fences in grant order, stale writes refused, recovers"
            }
            Row::Plain => "none (comparison)",
        }
    }

    /// The promised properties the figures contradict (empty: the promise is kept).
    pub(crate) fn broken(self, m: &Measure) -> Vec<&'static str> {
        let mut broken = Vec::new();
        if self == Row::Plain {
            return broken;
        }
        if m.stale_applied > 0 {
            broken.push("a stale write landed");
        }
        if !m.recovered {
            broken.push("a client was not answered after the heal");
        }
        if matches!(self, Row::Replicas | Row::ReplicasMin) {
            if m.fence_inversions > 0 {
                broken.push("fences out of grant order");
            }
            if m.overlaps > 0 {
                broken.push("overlapping holds");
            }
            if m.lost_acquires > 0 {
                broken.push("an acknowledged acquire was lost");
            }
        }
        broken
    }
}

/// A fault that makes the sentinels fail the master over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Nemesis {
    /// A symmetric partition: the master alone on one side.
    Partition,
    /// The master's packets to every other node dropped; what they send it still arrives.
    OneWay,
    /// The master's links to the replicas, the other sentinels and client 1 half-open; client
    /// 2 still reaches it.
    HalfOpen,
    /// The master isolated together with a minority: its own sentinel and client 1.
    IsolateMinority,
}

impl Nemesis {
    pub(crate) const ALL: [Nemesis; 4] = [
        Nemesis::Partition,
        Nemesis::OneWay,
        Nemesis::HalfOpen,
        Nemesis::IsolateMinority,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Nemesis::Partition => "partition",
            Nemesis::OneWay => "one-way",
            Nemesis::HalfOpen => "half-open",
            Nemesis::IsolateMinority => "isolate-minority",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<Nemesis> {
        Nemesis::ALL.into_iter().find(|n| n.name() == name)
    }
}

/// The workloads, in the table's order.
pub(crate) const WORKLOADS: [&str; 3] = ["lock", "guarded", "set"];

/// The table's header.
pub(crate) fn table_header() -> String {
    "| client | nemesis | failovers | workload | promised | holds | overlaps | fence inversions | lost acquires | stale refused | stale landed | lost writes | unavailable p50 / max (ms) | verdict |\n\
     |---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
        .to_owned()
}

/// One table line.
pub(crate) fn table_line(
    row: Row,
    nemesis: Nemesis,
    failovers: usize,
    workload: &str,
    m: &Measure,
) -> String {
    let broken = row.broken(m);
    let verdict = match (row, broken.is_empty()) {
        (Row::Plain, _) => "—".to_owned(),
        (_, true) => "kept".to_owned(),
        (_, false) => format!("**broken**: {}", broken.join(", ")),
    };
    let (p50, max) = m.p50_max();
    let lost_writes = if workload == "lock" {
        "—".to_owned()
    } else if m.doubled > 0 {
        format!("{} ({} doubled)", m.lost_writes, m.doubled)
    } else {
        m.lost_writes.to_string()
    };
    let mut line = String::new();
    let _ = writeln!(
        line,
        "| {} | {} | {failovers} | {workload} | {} | {} | {} | {} | {} | {} | {} | {lost_writes} | {p50} / {max} | {verdict} |",
        row.label(),
        nemesis.name(),
        row.promise(),
        m.holds,
        m.overlaps,
        m.fence_inversions,
        m.lost_acquires,
        if workload == "lock" {
            "—".to_owned()
        } else {
            m.refused.to_string()
        },
        if workload == "guarded" {
            m.stale_applied.to_string()
        } else {
            "—".to_owned()
        },
    );
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_row_checks_what_it_promises_and_nothing_else() {
        let overlap = Measure {
            overlaps: 1,
            lost_acquires: 1,
            recovered: true,
            ..Measure::default()
        };
        assert!(
            Row::None.broken(&overlap).is_empty(),
            "None promises no exclusion"
        );
        let inverted = Measure {
            fence_inversions: 1,
            recovered: true,
            ..Measure::default()
        };
        assert!(Row::None.broken(&inverted).is_empty(), "None: split brain");
        assert_eq!(
            Row::ReplicasMin.broken(&inverted),
            vec!["fences out of grant order"]
        );
        assert_eq!(
            Row::Replicas.broken(&overlap),
            vec!["overlapping holds", "an acknowledged acquire was lost"]
        );
        let stale = Measure {
            stale_applied: 1,
            recovered: true,
            ..Measure::default()
        };
        assert_eq!(Row::None.broken(&stale), vec!["a stale write landed"]);
        assert!(Row::Plain.broken(&stale).is_empty());
        assert!(
            table_line(Row::ReplicasMin, Nemesis::OneWay, 1, "lock", &overlap)
                .contains("**broken**")
        );
        assert_eq!(Nemesis::from_name("half-open"), Some(Nemesis::HalfOpen));
        assert_eq!(Row::from_name("replicas+min"), Some(Row::ReplicasMin));
    }
}
