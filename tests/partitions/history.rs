//! Lock histories and their checker: what each client saw (an acquire or release, when it was
//! asked, when it answered and how), checked against a **lease** mutex, and, where no lease
//! ran out, against a plain mutex for linearizability.
//!
//! The lease mutex is dlock's promise: two holders overlap only if both were within their
//! `safe_until` (a holder paused past its lease is a documented non-promise, which fences are
//! for), and fences rise in grant order. A hold counts from the moment its client learned it
//! (the acquire's answer) to the earlier of its release being asked and its `safe_until`, so
//! only overlaps both clients believed in are counted.
//!
//! The lease-free part uses stateright's `LinearizabilityTester` (a search for a real-time
//! respecting order of the operations that a sequential mutex accepts): stateright is already
//! what dlock-model is built on and a dependency of these tests, it needs no other runtime
//! (Knossos is Clojure, Porcupine Go), and its tester takes operations whose answer never came
//! (left in flight: they may or may not have taken effect). Its search is exponential in the
//! number of concurrent operations: fine for the smoke workloads' histories of tens of
//! operations; the matrix's long histories must be checked in windows.
//!
//! A history is saved as text, one operation a line, so that a run can be checked again
//! ([`History::save`], [`History::load`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use stateright::semantics::{ConsistencyTester, LinearizabilityTester, SequentialSpec};

/// What a client asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Acquire,
    Release,
}

/// How it ended, as the client saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The lock is ours, with this fence, until `safe_until_us` at the latest.
    Granted { fence: u64, safe_until_us: u128 },
    /// Someone else holds it (a `try_acquire` that found it taken).
    Busy,
    /// Our hold was released.
    Released,
    /// The release found the lock not ours (it had run out).
    NotHeld,
    /// No answer (a timeout, a cut connection): it may or may not have taken effect.
    Unknown,
}

/// One operation of one client process. Times are µs since the epoch on the machine's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Op {
    pub(crate) process: u32,
    pub(crate) kind: Kind,
    pub(crate) invoked_us: u128,
    /// When the answer came; `None` with [`Outcome::Unknown`].
    pub(crate) completed_us: Option<u128>,
    pub(crate) outcome: Outcome,
}

/// A run's operations, in any order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct History {
    pub(crate) ops: Vec<Op>,
}

/// A hold as the checker sees it: from the grant's answer to its release or lease end.
#[derive(Clone, Copy, Debug)]
struct Hold {
    process: u32,
    asked_us: u128,
    from_us: u128,
    until_us: u128,
    fence: u64,
}

/// What [`History::check_lease_mutex`] found.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct LeaseReport {
    /// Holds granted.
    pub(crate) holds: usize,
    /// Pairs of holds (by process and fence) that overlapped while both were within their
    /// `safe_until`: a broken promise.
    pub(crate) overlaps: Vec<((u32, u64), (u32, u64))>,
    /// Pairs of holds where the one granted first (answered before the other was asked) has a
    /// fence not below the other's.
    pub(crate) fence_inversions: Vec<((u32, u64), (u32, u64))>,
    /// Holds whose lease ran out before they were released (the lease-free check does not
    /// apply then).
    pub(crate) outlived_leases: usize,
}

impl History {
    fn holds(&self) -> (Vec<Hold>, usize) {
        let mut by_process: BTreeMap<u32, Vec<&Op>> = BTreeMap::new();
        for op in &self.ops {
            by_process.entry(op.process).or_default().push(op);
        }
        let end = self
            .ops
            .iter()
            .map(|op| op.completed_us.unwrap_or(op.invoked_us))
            .max()
            .unwrap_or(0);
        let mut holds = Vec::new();
        let mut outlived = 0;
        for ops in by_process.values_mut() {
            ops.sort_by_key(|op| op.invoked_us);
            for (i, op) in ops.iter().enumerate() {
                let (
                    Kind::Acquire,
                    Outcome::Granted {
                        fence,
                        safe_until_us,
                    },
                    Some(from_us),
                ) = (op.kind, op.outcome, op.completed_us)
                else {
                    continue;
                };
                let released = ops[i + 1..]
                    .iter()
                    .find(|later| later.kind == Kind::Release)
                    .map(|release| release.invoked_us);
                // Unreleased at the history's end is only outlived if the lease ended before.
                let outlived_it = released.map_or(safe_until_us < end, |at| at > safe_until_us);
                if outlived_it {
                    outlived += 1;
                }
                holds.push(Hold {
                    process: op.process,
                    asked_us: op.invoked_us,
                    from_us,
                    until_us: released.map_or(safe_until_us, |at| at.min(safe_until_us)),
                    fence,
                });
            }
        }
        (holds, outlived)
    }

    /// Checks the history against a lease mutex (see the module docs).
    pub(crate) fn check_lease_mutex(&self) -> LeaseReport {
        let (holds, outlived_leases) = self.holds();
        let mut report = LeaseReport {
            holds: holds.len(),
            outlived_leases,
            ..LeaseReport::default()
        };
        for (i, a) in holds.iter().enumerate() {
            for b in &holds[i + 1..] {
                let id = |h: &Hold| (h.process, h.fence);
                if a.from_us < b.until_us && b.from_us < a.until_us {
                    report.overlaps.push((id(a), id(b)));
                }
                let (first, second) = if a.from_us <= b.from_us {
                    (a, b)
                } else {
                    (b, a)
                };
                // Fence 0: the client could not read it (not a fence dlock issues).
                let known = first.fence > 0 && second.fence > 0;
                if known && first.from_us < second.asked_us && first.fence >= second.fence {
                    report.fence_inversions.push((id(first), id(second)));
                }
            }
        }
        report
    }

    /// How many acknowledged grants lost their lock while the holder was within its lease:
    /// another process was granted it before this hold ended (its release asked, or its
    /// `safe_until`), or the holder's release, asked before its `safe_until`, found the lock
    /// not held.
    pub(crate) fn lost_acquires(&self) -> usize {
        let (holds, _) = self.holds();
        holds
            .iter()
            .filter(|a| {
                let overtaken = holds.iter().any(|b| {
                    b.process != a.process && b.from_us > a.from_us && b.from_us < a.until_us
                });
                let found_gone = self.ops.iter().any(|op| {
                    op.process == a.process
                        && op.kind == Kind::Release
                        && op.outcome == Outcome::NotHeld
                        && op.invoked_us > a.from_us
                        && op.invoked_us == a.until_us
                });
                overtaken || found_gone
            })
            .count()
    }

    /// Whether the history is linearizable against a plain mutex (no leases): `None` when a
    /// hold outlived its lease or an operation got no answer (an acquire that took effect
    /// unseen holds a lease nobody releases), where only the lease mutex applies. Check a
    /// fault-free window ([`before`](Self::before)) with it.
    pub(crate) fn lease_free_linearizable(&self) -> Option<bool> {
        if self.holds().1 > 0 || self.ops.iter().any(|op| op.outcome == Outcome::Unknown) {
            return None;
        }
        // Every invocation and answer, in time order (an invocation first on a tie).
        let mut events: Vec<(u128, bool, usize)> = Vec::new();
        for (i, op) in self.ops.iter().enumerate() {
            events.push((op.invoked_us, false, i));
            if let Some(at) = op.completed_us {
                events.push((at, true, i));
            }
        }
        events.sort();
        let mut tester = LinearizabilityTester::new(PlainMutex::default());
        // A process whose operation got no answer goes on as a new thread: the tester allows
        // one operation in flight per thread, and that one may or may not have taken effect.
        let mut epoch: BTreeMap<u32, u32> = BTreeMap::new();
        let mut thread_of = vec![(0, 0); self.ops.len()];
        for (_, answer, i) in events {
            let op = self.ops[i];
            if answer {
                let ret = match op.outcome {
                    Outcome::Granted { .. } => MutexRet::Granted,
                    Outcome::Busy => MutexRet::Busy,
                    Outcome::Released => MutexRet::Released,
                    Outcome::NotHeld => MutexRet::NotHeld,
                    Outcome::Unknown => continue,
                };
                if tester.on_return(thread_of[i], ret).is_err() {
                    return Some(false);
                }
            } else {
                let e = epoch.entry(op.process).or_insert(0);
                thread_of[i] = (op.process, *e);
                if op.outcome == Outcome::Unknown {
                    *e += 1;
                }
                let call = match op.kind {
                    Kind::Acquire => MutexOp::Acquire(op.process),
                    Kind::Release => MutexOp::Release(op.process),
                };
                if tester.on_invoke(thread_of[i], call).is_err() {
                    return Some(false);
                }
            }
        }
        Some(tester.is_consistent())
    }

    /// The operations answered before `at_us` (a window that a fault starting then did not
    /// touch).
    pub(crate) fn before(&self, at_us: u128) -> History {
        History {
            ops: self
                .ops
                .iter()
                .filter(|op| op.completed_us.is_some_and(|c| c < at_us))
                .copied()
                .collect(),
        }
    }

    /// The history as text, one operation a line:
    /// `<process> acquire|release <invoked_us> <completed_us|-> <outcome>`, the outcome being
    /// `granted:<fence>:<safe_until_us>`, `busy`, `released`, `not-held` or `unknown`.
    pub(crate) fn save(&self) -> String {
        let mut text = String::new();
        for op in &self.ops {
            let kind = match op.kind {
                Kind::Acquire => "acquire",
                Kind::Release => "release",
            };
            let completed = op.completed_us.map_or("-".to_owned(), |c| c.to_string());
            let outcome = match op.outcome {
                Outcome::Granted {
                    fence,
                    safe_until_us,
                } => format!("granted:{fence}:{safe_until_us}"),
                Outcome::Busy => "busy".into(),
                Outcome::Released => "released".into(),
                Outcome::NotHeld => "not-held".into(),
                Outcome::Unknown => "unknown".into(),
            };
            let _ = writeln!(
                text,
                "{} {kind} {} {completed} {outcome}",
                op.process, op.invoked_us
            );
        }
        text
    }

    /// Reads what [`save`](Self::save) wrote.
    ///
    /// # Errors
    ///
    /// The first line that is not an operation, and why.
    pub(crate) fn load(text: &str) -> Result<History, String> {
        let ops = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|line| parse_op(line).ok_or_else(|| format!("not an operation: {line:?}")))
            .collect::<Result<_, _>>()?;
        Ok(History { ops })
    }
}

fn parse_op(line: &str) -> Option<Op> {
    let mut words = line.split_whitespace();
    let process = words.next()?.parse().ok()?;
    let kind = match words.next()? {
        "acquire" => Kind::Acquire,
        "release" => Kind::Release,
        _ => return None,
    };
    let invoked_us = words.next()?.parse().ok()?;
    let completed_us = match words.next()? {
        "-" => None,
        at => Some(at.parse().ok()?),
    };
    let outcome = match words.next()? {
        "busy" => Outcome::Busy,
        "released" => Outcome::Released,
        "not-held" => Outcome::NotHeld,
        "unknown" => Outcome::Unknown,
        granted => {
            let mut parts = granted.strip_prefix("granted:")?.split(':');
            Outcome::Granted {
                fence: parts.next()?.parse().ok()?,
                safe_until_us: parts.next()?.parse().ok()?,
            }
        }
    };
    Some(Op {
        process,
        kind,
        invoked_us,
        completed_us,
        outcome,
    })
}

/// A mutex without leases, the sequential object of the lease-free check.
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq)]
struct PlainMutex {
    holder: Option<u32>,
}

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum MutexOp {
    Acquire(u32),
    Release(u32),
}

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum MutexRet {
    Granted,
    Busy,
    Released,
    NotHeld,
}

impl SequentialSpec for PlainMutex {
    type Op = MutexOp;
    type Ret = MutexRet;

    fn invoke(&mut self, op: &MutexOp) -> MutexRet {
        match *op {
            MutexOp::Acquire(p) if self.holder.is_none() => {
                self.holder = Some(p);
                MutexRet::Granted
            }
            MutexOp::Acquire(_) => MutexRet::Busy,
            MutexOp::Release(p) if self.holder == Some(p) => {
                self.holder = None;
                MutexRet::Released
            }
            MutexOp::Release(_) => MutexRet::NotHeld,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acquire(process: u32, at: (u128, u128), fence: u64, safe_until_us: u128) -> Op {
        Op {
            process,
            kind: Kind::Acquire,
            invoked_us: at.0,
            completed_us: Some(at.1),
            outcome: Outcome::Granted {
                fence,
                safe_until_us,
            },
        }
    }

    fn op(process: u32, kind: Kind, at: (u128, Option<u128>), outcome: Outcome) -> Op {
        Op {
            process,
            kind,
            invoked_us: at.0,
            completed_us: at.1,
            outcome,
        }
    }

    fn release(process: u32, at: (u128, u128)) -> Op {
        op(
            process,
            Kind::Release,
            (at.0, Some(at.1)),
            Outcome::Released,
        )
    }

    #[test]
    fn holds_taken_in_turn_pass_both_checks() {
        let history = History {
            ops: vec![
                acquire(1, (0, 10), 1, 1_000),
                release(1, (100, 110)),
                acquire(2, (5, 120), 2, 1_100),
                release(2, (200, 210)),
                op(3, Kind::Acquire, (50, Some(60)), Outcome::Busy),
            ],
        };
        let report = history.check_lease_mutex();
        assert_eq!(report.holds, 2);
        assert!(report.overlaps.is_empty() && report.fence_inversions.is_empty());
        assert_eq!(history.lease_free_linearizable(), Some(true));
    }

    #[test]
    fn two_holders_within_their_leases_are_an_overlap() {
        let history = History {
            ops: vec![
                acquire(1, (0, 10), 1, 1_000),
                acquire(2, (20, 30), 2, 1_000),
                release(1, (100, 110)),
                release(2, (120, 130)),
            ],
        };
        assert_eq!(history.check_lease_mutex().overlaps, vec![((1, 1), (2, 2))]);
        assert_eq!(history.lease_free_linearizable(), Some(false));
    }

    #[test]
    fn a_holder_past_its_safe_until_overlaps_nobody() {
        // 1's lease ended at 50 and it never released: 2's grant at 60 is no overlap.
        let history = History {
            ops: vec![acquire(1, (0, 10), 1, 50), acquire(2, (55, 60), 2, 1_000)],
        };
        let report = history.check_lease_mutex();
        assert!(report.overlaps.is_empty());
        assert_eq!(
            report.outlived_leases, 1,
            "2's lease runs past the history's end"
        );
        assert_eq!(history.lease_free_linearizable(), None, "leases decided it");
    }

    #[test]
    fn a_later_grant_with_a_smaller_fence_is_an_inversion() {
        let history = History {
            ops: vec![
                acquire(1, (0, 10), 7, 1_000),
                release(1, (20, 30)),
                acquire(2, (40, 50), 5, 1_000),
                release(2, (60, 70)),
            ],
        };
        assert_eq!(
            history.check_lease_mutex().fence_inversions,
            vec![((1, 7), (2, 5))]
        );
    }

    #[test]
    fn an_unanswered_operation_leaves_it_to_the_lease_mutex() {
        // 1's acquire timed out but may have taken the lock: only leases say when it ends.
        let history = History {
            ops: vec![
                op(1, Kind::Acquire, (0, None), Outcome::Unknown),
                op(2, Kind::Acquire, (50, Some(60)), Outcome::Busy),
                op(1, Kind::Acquire, (70, Some(80)), Outcome::Busy),
            ],
        };
        assert_eq!(history.lease_free_linearizable(), None);
        // The window before it answers: nobody could hold the lock, so `busy` is not
        // linearizable there.
        assert_eq!(history.before(65).lease_free_linearizable(), Some(false));
        // A busy answer with nobody who could hold it is not.
        let history = History {
            ops: vec![op(2, Kind::Acquire, (50, Some(60)), Outcome::Busy)],
        };
        assert_eq!(history.lease_free_linearizable(), Some(false));
    }

    #[test]
    fn a_saved_history_loads_back_the_same() -> Result<(), String> {
        let history = History {
            ops: vec![
                acquire(1, (0, 10), 3, 1_000),
                op(2, Kind::Acquire, (5, None), Outcome::Unknown),
                release(1, (20, 30)),
                op(2, Kind::Release, (40, Some(50)), Outcome::NotHeld),
                op(3, Kind::Acquire, (45, Some(55)), Outcome::Busy),
            ],
        };
        assert_eq!(History::load(&history.save())?, history);
        assert!(History::load("1 acquire 0 5 maybe").is_err());
        Ok(())
    }
}
