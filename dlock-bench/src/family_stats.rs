//! The pure figures of the lock-family workloads (W4 read-write lock, W5 semaphore): which
//! operation a ticket is, what the observer saw when a holder entered, and what the merged holds
//! of every worker say (rates, waits, the most holders inside at once, overlaps, fairness, lost
//! updates).
//!
//! Nothing here talks to Redis or reads a clock: every figure is unit-tested below.

use serde::{Deserialize, Serialize};

use crate::stats::{LockEvent, count, fairness, ns_to_s, p50_p99_us, per_second};

/// What one hold does inside the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Op {
    /// A 1 ms pause (W4's reads, every W5 acquisition).
    Read,
    /// `GET` the counter, a 1 ms pause, `SET` it one higher (W4's writes).
    Write,
}

impl Op {
    /// The operation of ticket `ticket` (1, 2, …) when every `write_every`-th ticket is a write
    /// (0: none is): W4's 10 % writes are the tickets divisible by 10.
    pub(crate) fn of_ticket(ticket: u64, write_every: u64) -> Op {
        if write_every != 0 && ticket.is_multiple_of(write_every) {
            Op::Write
        } else {
            Op::Read
        }
    }

    /// Writes among tickets `1..=tickets`: what the counter must read at the end.
    pub(crate) fn writes_in(tickets: u64, write_every: u64) -> u64 {
        tickets.checked_div(write_every).unwrap_or(0)
    }
}

/// How a holder is inside the lock, as the observer counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Role {
    /// Beside others: a reader, a semaphore's permit holder.
    Shared,
    /// Alone: a writer, a mutex's holder.
    Exclusive,
}

/// The observer's count of holders inside the lock right after one holder entered (itself
/// included).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Inside {
    pub(crate) shared: u64,
    pub(crate) exclusive: u64,
}

impl Inside {
    /// An exclusive holder together with anyone else: the lock let a writer overlap.
    pub(crate) fn overlaps(self) -> bool {
        self.exclusive > 0 && self.shared + self.exclusive > 1
    }
}

/// One hold of one worker task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Hold {
    /// Global task number: `process × tasks + task`.
    pub(crate) task: u32,
    pub(crate) op: Op,
    /// From the acquire call to its return (request to grant), ns.
    pub(crate) wait_ns: u64,
    /// What the observer counted when this holder entered.
    pub(crate) inside: Inside,
}

/// Reads or writes: how many, their rate, and their waits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct OpFigures {
    pub(crate) count: u64,
    pub(crate) per_s: f64,
    pub(crate) wait_p50_us: f64,
    pub(crate) wait_p99_us: f64,
}

/// What the merged holds of every worker say.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct HoldFigures {
    pub(crate) window_s: f64,
    pub(crate) reads: OpFigures,
    pub(crate) writes: OpFigures,
    /// Every hold, per second.
    pub(crate) ops_per_s: f64,
    /// The most shared holders (readers, permit holders) the observer saw inside at once.
    pub(crate) max_shared: u64,
    /// Holds whose entry found an exclusive holder with anyone else: must be 0.
    pub(crate) overlaps: u64,
    /// Fewest and most holds of one task (tasks with none count as 0).
    pub(crate) fairness_min: u64,
    pub(crate) fairness_max: u64,
}

impl HoldFigures {
    /// The figures of `holds` by `tasks` tasks in a window of `window_ns`.
    pub(crate) fn of(holds: &[Hold], tasks: u32, window_ns: u64) -> HoldFigures {
        let of_op = |op: Op| {
            let mut waits: Vec<u64> = holds
                .iter()
                .filter(|h| h.op == op)
                .map(|h| h.wait_ns)
                .collect();
            let (wait_p50_us, wait_p99_us) = p50_p99_us(&mut waits);
            OpFigures {
                count: count(waits.len()),
                per_s: per_second(count(waits.len()), window_ns),
                wait_p50_us,
                wait_p99_us,
            }
        };
        // `fairness` counts per worker: a hold is an event of its task (its times unused).
        let events: Vec<LockEvent> = holds
            .iter()
            .map(|h| LockEvent {
                worker: h.task,
                t_acq: 0,
                t_rel: 0,
            })
            .collect();
        let (fairness_min, fairness_max) = fairness(&events, tasks);
        HoldFigures {
            window_s: ns_to_s(window_ns),
            reads: of_op(Op::Read),
            writes: of_op(Op::Write),
            ops_per_s: per_second(count(holds.len()), window_ns),
            max_shared: holds.iter().map(|h| h.inside.shared).max().unwrap_or(0),
            overlaps: count(holds.iter().filter(|h| h.inside.overlaps()).count()),
            fairness_min,
            fairness_max,
        }
    }

    /// Whether the least-served task had at least half as many holds as the most-served.
    pub(crate) fn fair(&self) -> bool {
        self.fairness_min.saturating_mul(2) >= self.fairness_max
    }
}

/// `expected − counter`: updates lost (or, below 0, made twice).
pub(crate) fn lost_updates(expected: u64, counter: u64) -> i64 {
    i64::try_from(expected).unwrap_or(i64::MAX) - i64::try_from(counter).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hold(task: u32, op: Op, wait_us: u64, shared: u64, exclusive: u64) -> Hold {
        Hold {
            task,
            op,
            wait_ns: wait_us * 1_000,
            inside: Inside { shared, exclusive },
        }
    }

    #[test]
    fn every_tenth_ticket_is_a_write() {
        let ops: Vec<Op> = (1..=20).map(|t| Op::of_ticket(t, 10)).collect();
        let writes: Vec<usize> = (0..20).filter(|&i| ops[i] == Op::Write).collect();
        assert_eq!(writes, [9, 19], "tickets 10 and 20");
        assert_eq!(Op::writes_in(20_000, 10), 2_000);
        assert_eq!(Op::writes_in(2_005, 10), 200);
        let writes = (1..=2_000).filter(|&t| Op::of_ticket(t, 10) == Op::Write);
        assert_eq!(writes.count(), 200);
        // No writes at all (W5).
        assert_eq!(Op::of_ticket(10, 0), Op::Read);
        assert_eq!(Op::writes_in(4_000, 0), 0);
    }

    #[test]
    fn an_exclusive_holder_must_be_alone() {
        let inside = |shared, exclusive| Inside { shared, exclusive };
        assert!(!inside(0, 1).overlaps(), "a writer alone");
        assert!(!inside(5, 0).overlaps(), "readers together");
        assert!(inside(1, 1).overlaps(), "a writer with a reader");
        assert!(inside(0, 2).overlaps(), "two writers");
    }

    #[test]
    fn figures_split_reads_and_writes() {
        let holds = [
            hold(0, Op::Read, 10, 1, 0),
            hold(1, Op::Read, 30, 3, 0),
            hold(1, Op::Write, 500, 0, 1),
            hold(2, Op::Read, 20, 2, 0),
            hold(2, Op::Write, 700, 1, 1), // a reader got in beside a writer
        ];
        let f = HoldFigures::of(&holds, 4, 1_000_000_000);
        assert_eq!((f.reads.count, f.writes.count), (3, 2));
        assert!((f.reads.per_s - 3.0).abs() < 1e-9);
        assert!((f.ops_per_s - 5.0).abs() < 1e-9);
        // Nearest rank: read waits 10, 20, 30 µs → p50 20, p99 30.
        assert!((f.reads.wait_p50_us - 20.0).abs() < 1e-9);
        assert!((f.reads.wait_p99_us - 30.0).abs() < 1e-9);
        assert!((f.writes.wait_p50_us - 500.0).abs() < 1e-9);
        assert!((f.writes.wait_p99_us - 700.0).abs() < 1e-9);
        assert_eq!((f.max_shared, f.overlaps), (3, 1));
        // Task 3 never held: fairness counts it as 0.
        assert_eq!((f.fairness_min, f.fairness_max), (0, 2));
        assert!(!f.fair());
        assert!((f.window_s - 1.0).abs() < 1e-9);
    }

    #[test]
    fn fairness_wants_half_of_the_most() {
        let holds = [
            hold(0, Op::Read, 1, 1, 0),
            hold(1, Op::Read, 1, 1, 0),
            hold(1, Op::Read, 1, 1, 0),
        ];
        let f = HoldFigures::of(&holds, 2, 1);
        assert_eq!((f.fairness_min, f.fairness_max), (1, 2));
        assert!(f.fair());
    }

    #[test]
    fn no_holds_give_nan_not_panics() {
        let f = HoldFigures::of(&[], 2, 0);
        assert_eq!((f.reads.count, f.max_shared, f.overlaps), (0, 0, 0));
        assert!(f.reads.wait_p99_us.is_nan() && f.ops_per_s.is_nan());
        assert_eq!(lost_updates(2_000, 2_000), 0);
        assert_eq!(lost_updates(2_000, 1_998), 2);
        assert_eq!(lost_updates(0, 1), -1);
    }
}
