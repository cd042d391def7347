//! What a matrix cell measured, per workload, computed from its saved history alone (so a
//! replay computes the same figures):
//!
//! - **overlaps**: pairs of holds that overlapped while both were within their `safe_until`
//!   (`history.rs`'s lease mutex), and **fence inversions** (a later grant with a smaller
//!   fence);
//! - **lost acquires**: acknowledged grants whose lock was gone while the holder was still
//!   within its lease — another client was granted it then, or the holder's release, asked in
//!   time, found it not held;
//! - **refused**: stale writes refused (guarded writes refused, `fenced_set` answered stale);
//! - **stale applied**: writes that landed after a newer holder's (the final list's values
//!   going back), **lost writes**: acknowledged writes or set elements missing from the final
//!   data, **doubled**: set elements present twice;
//! - **unavailability windows**: per client, from an operation left without an answer to the
//!   next answer; their p50 and max, and whether every client was answered after the heal.

use std::collections::BTreeMap;

use serde_json::Value;

use super::record::Cell;
use crate::partitions::history::{History, Outcome};

/// A request sent this close (µs) to the end of a workload's record may have been cut off by
/// the stop: the command timeout of the matrix's clients (`cell.rs`).
const CUT_OFF_US: u128 = 500_000;
/// One workload's figures in one cell.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Measure {
    pub(crate) holds: usize,
    pub(crate) overlaps: usize,
    pub(crate) fence_inversions: usize,
    pub(crate) lost_acquires: usize,
    pub(crate) refused: usize,
    pub(crate) stale_applied: usize,
    pub(crate) lost_writes: usize,
    pub(crate) doubled: usize,
    /// Unavailability windows, ms.
    pub(crate) windows_ms: Vec<u128>,
    /// Every client of the workload was answered after the heal: no request of it is left
    /// without an answer at the end, and it had one after the heal or still holds a grant
    /// from before it.
    pub(crate) recovered: bool,
}

impl Measure {
    /// The windows' median and maximum, ms (0 without windows).
    pub(crate) fn p50_max(&self) -> (u128, u128) {
        let mut w = self.windows_ms.clone();
        w.sort_unstable();
        let p50 = w.get(w.len().saturating_sub(1) / 2).copied().unwrap_or(0);
        (p50, w.last().copied().unwrap_or(0))
    }
}

/// The figures of `workload` in `cell`.
pub(crate) fn measure(cell: &Cell, workload: &str) -> Measure {
    let history = History {
        ops: cell
            .ops
            .iter()
            .filter(|(w, _)| w == workload)
            .map(|(_, op)| *op)
            .collect(),
    };
    let report = history.check_lease_mutex();
    let writes: Vec<_> = cell
        .writes
        .iter()
        .filter(|w| w.workload == workload)
        .collect();
    let refused = writes
        .iter()
        .filter(|w| w.result == "refused" || w.result == "stale")
        .count();
    let final_of = |suffix: &str| {
        cell.finals
            .iter()
            .find(|(w, key, _)| w == workload && key.ends_with(suffix))
            .map(|(_, _, v)| v.clone())
    };
    let (stale_applied, lost_writes, doubled) = match workload {
        "guarded" => list_figures(&writes, final_of(":writes")),
        "set" => set_figures(&writes, final_of(":set")),
        _ => (0, 0, 0),
    };
    let (windows_ms, recovered) = windows(cell, workload);
    Measure {
        holds: report.holds,
        overlaps: report.overlaps.len(),
        fence_inversions: report.fence_inversions.len(),
        lost_acquires: history.lost_acquires(),
        refused,
        stale_applied,
        lost_writes,
        doubled,
        windows_ms,
        recovered,
    }
}

/// The guarded workload's list: values going back (stale applied) and acknowledged appends
/// missing (lost), counted per value.
fn list_figures(writes: &[&super::record::Write], list: Option<Value>) -> (usize, usize, usize) {
    let values: Vec<u128> = list
        .as_ref()
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().and_then(|s| s.parse().ok()))
                .collect()
        })
        .unwrap_or_default();
    let mut highest = 0;
    let mut stale = 0;
    let mut present: BTreeMap<u128, usize> = BTreeMap::new();
    for &v in &values {
        if v < highest {
            stale += 1;
        }
        highest = highest.max(v);
        *present.entry(v).or_insert(0) += 1;
    }
    let mut acked: BTreeMap<u128, usize> = BTreeMap::new();
    for w in writes
        .iter()
        .filter(|w| w.what == "write" && w.result == "applied")
    {
        if let Ok(v) = w.value.parse() {
            *acked.entry(v).or_insert(0) += 1;
        }
    }
    let lost = acked
        .iter()
        .map(|(v, n)| n.saturating_sub(present.get(v).copied().unwrap_or(0)))
        .sum();
    (stale, lost, 0)
}

/// The set workload: acknowledged elements missing from the final set, elements twice.
fn set_figures(writes: &[&super::record::Write], set: Option<Value>) -> (usize, usize, usize) {
    let text = set
        .as_ref()
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for e in text.split(',').filter(|e| !e.is_empty()) {
        *counts.entry(e).or_insert(0) += 1;
    }
    let lost = writes
        .iter()
        .filter(|w| w.result == "applied" && !counts.contains_key(w.value.as_str()))
        .count();
    let doubled = counts.values().filter(|n| **n > 1).count();
    (0, lost, doubled)
}

/// Each client's unavailability windows (ms), and whether every client was answered after
/// the heal.
fn windows(cell: &Cell, workload: &str) -> (Vec<u128>, bool) {
    // (invoked, completed) of every operation and write, per process.
    let mut by_process: BTreeMap<u32, Vec<(u128, Option<u128>)>> = BTreeMap::new();
    for (_, op) in cell.ops.iter().filter(|(w, _)| w == workload) {
        by_process
            .entry(op.process)
            .or_default()
            .push((op.invoked_us, op.completed_us));
    }
    for w in cell.writes.iter().filter(|w| w.workload == workload) {
        by_process
            .entry(w.process)
            .or_default()
            .push((w.invoked_us, w.completed_us));
    }
    let heal = cell.at("heal").unwrap_or(0);
    // The clients are stopped at the end of the run, and a request sent just before may be cut
    // off unanswered: it says nothing about recovery. Only one left unanswered for longer than
    // a command timeout before the last event of the workload counts.
    let last = by_process
        .values()
        .flatten()
        .map(|&(invoked, completed)| completed.unwrap_or(invoked))
        .max()
        .unwrap_or(0);
    let mut windows = Vec::new();
    let mut recovered = !by_process.is_empty();
    for (process, events) in &mut by_process {
        events.sort_unstable();
        let mut open: Option<u128> = None;
        for &(invoked, completed) in events.iter() {
            match (open, completed) {
                (None, None) => open = Some(invoked),
                (Some(start), Some(done)) if done > start => {
                    windows.push((done - start) / 1_000);
                    open = None;
                }
                _ => {}
            }
        }
        if let Some(start) = open {
            let end = events
                .iter()
                .map(|e| e.1.unwrap_or(e.0))
                .max()
                .unwrap_or(start);
            windows.push(end.saturating_sub(start) / 1_000);
        }
        let answered_after_heal = events.iter().any(|e| e.1.is_some_and(|c| c > heal));
        // A client still in a hold granted before the heal has nothing to be answered.
        let holding = cell
            .ops
            .iter()
            .filter(|(w, op)| w == workload && op.process == *process)
            .max_by_key(|(_, op)| op.invoked_us)
            .is_some_and(|(_, op)| matches!(op.outcome, Outcome::Granted { .. }));
        let cut_off_by_the_stop = open.is_some_and(|start| start + CUT_OFF_US > last);
        recovered &= (open.is_none() || cut_off_by_the_stop) && (answered_after_heal || holding);
    }
    (windows, recovered)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cell(lines: &[(&str, &str)]) -> Cell {
        let mut cell = Cell {
            timeline: vec![("heal".into(), 5)],
            ..Cell::default()
        };
        for (w, l) in lines {
            cell.take_line(w, l).expect("line");
        }
        cell
    }

    #[test]
    fn a_grant_overlapped_within_its_lease_is_a_lost_acquire() {
        let c = cell(&[
            ("lock", "op 1 acquire 0 10 granted:1:900000"),
            ("lock", "op 2 acquire 20 30 granted:2:900000"),
            ("lock", "op 1 release 100 110 not-held"),
            ("lock", "op 2 release 200 60000 released"),
        ]);
        let m = measure(&c, "lock");
        assert_eq!((m.holds, m.overlaps, m.lost_acquires), (2, 1, 1));
        assert!(m.recovered);
    }

    #[test]
    fn stale_and_lost_writes_are_read_from_the_final_list() {
        let mut c = cell(&[
            ("guarded", "write 1 0 10 applied 5"),
            ("guarded", "write 1 20 30 applied 5"),
            ("guarded", "write 2 40 50 applied 9"),
            ("guarded", "write 1 60 70 refused 5"),
            ("guarded", "fenced 1 80 90 stale 5"),
            ("guarded", "write 1 100 60000 applied 5"),
        ]);
        c.finals.push((
            "guarded".into(),
            "{g}:writes".into(),
            json!(["5", "9", "5"]),
        ));
        let m = measure(&c, "guarded");
        assert_eq!((m.refused, m.stale_applied, m.lost_writes), (2, 1, 1));
    }

    #[test]
    fn set_elements_lost_or_doubled_are_counted() {
        let mut c = cell(&[
            ("set", "write 1 0 10 applied 1-0"),
            ("set", "write 2 20 30 applied 2-0"),
            ("set", "write 1 40 - unknown 1-1"),
        ]);
        c.finals
            .push(("set".into(), "{s}:set".into(), json!("1-0,1-1,1-1")));
        let m = measure(&c, "set");
        assert_eq!((m.lost_writes, m.doubled), (1, 1));
    }

    #[test]
    fn a_window_runs_from_the_first_unanswered_request_to_the_next_answer() {
        let c = cell(&[
            ("lock", "op 1 acquire 1000 2000 busy"),
            ("lock", "op 1 acquire 3000 - unknown"),
            ("lock", "op 1 acquire 4000 - unknown"),
            ("lock", "op 1 acquire 5000 9000 busy"),
            ("lock", "op 2 acquire 1000 - unknown"),
            ("lock", "op 2 acquire 8000 70000 busy"),
        ]);
        let m = measure(&c, "lock");
        assert_eq!(m.windows_ms, vec![6, 69]);
        assert_eq!(m.p50_max(), (6, 69));
        assert!(m.recovered, "both answered after the heal");
    }

    #[test]
    fn a_request_cut_off_by_the_stop_is_no_failure_to_recover_but_one_left_longer_is() {
        let cut_off = cell(&[
            ("lock", "op 1 acquire 1000 2000 busy"),
            ("lock", "op 1 acquire 3000000 - unknown"),
            ("lock", "op 2 acquire 1000 3200000 busy"),
        ]);
        assert!(
            measure(&cut_off, "lock").recovered,
            "sent 0.2 s before the end"
        );
        let left = cell(&[
            ("lock", "op 1 acquire 1000 2000 busy"),
            ("lock", "op 1 acquire 2500000 - unknown"),
            ("lock", "op 2 acquire 1000 3200000 busy"),
        ]);
        assert!(
            !measure(&left, "lock").recovered,
            "unanswered for 0.7 s before the end"
        );
    }
}
