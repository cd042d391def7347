//! Pure figures of W7 (deep queue): which task a queue entry belongs to, FIFO inversions between
//! the queue and the grant order, the waves of re-asks seen in the server's counters, the
//! probe's stalls, and the grant timings after the lock became free.
//!
//! Nothing here talks to Redis or reads a clock; every figure is unit-tested below.

use serde::{Deserialize, Serialize};

use crate::stats::{count, float, nearest_rank, ns_to_us};

/// Prefix of every waiting task's lock label (`MutexOptions::label`): `w7:<task>`.
const LABEL_PREFIX: &str = "w7:";

/// The label of waiting task `task`. dlock writes a lock's label at the end of each of its
/// queue entries (`1 <token> <client> <lease_ms> <pub> <host>\x1f<pid>\x1f<label>`), which is
/// how the benchmark maps an entry to the task that queued it: the owner token, the other
/// unique part of an entry, is not exposed by dlock's API (on purpose: it releases the lock).
pub(crate) fn label(task: u32) -> String {
    format!("{LABEL_PREFIX}{task}")
}

/// The task that queued `entry` (its label), or `None` for an entry of anyone else.
pub(crate) fn task_of_entry(entry: &str) -> Option<u32> {
    let (_, label) = entry.rsplit_once('\x1f')?;
    label.strip_prefix(LABEL_PREFIX)?.parse().ok()
}

/// Whether the queue seen in `next` is the one seen in `prev`, with entries appended only: while
/// the lock is held nobody leaves the queue, so every snapshot must extend the one before.
pub(crate) fn extends(prev: &[String], next: &[String]) -> bool {
    next.len() >= prev.len() && next.iter().zip(prev).all(|(n, p)| n == p)
}

/// From `(s, queue length)` readings in time order: the first time the length reached each
/// tenth of `n` (1/10 … 10/10); NaN for a tenth never reached.
pub(crate) fn tenths(progress: &[(f64, u64)], n: u64) -> Vec<f64> {
    (1..=10u64)
        .map(|k| {
            let wanted = (n * k).div_ceil(10);
            progress
                .iter()
                .find(|&&(_, len)| len >= wanted)
                .map_or(f64::NAN, |&(s, _)| s)
        })
        .collect()
}

/// One acquisition of the W7 lock by a waiting task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Grant {
    /// Global task number: `process × tasks + task`.
    pub(crate) task: u32,
    /// The fencing token the lock came with: grants are in fence order.
    pub(crate) fence: u64,
    /// CLOCK_MONOTONIC ns right after acquire returned, and right before release was called.
    pub(crate) t_acq: u64,
    pub(crate) t_rel: u64,
}

/// How the grant order (by fence) compares with the queue order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Fifo {
    /// Grants whose task had an entry in the queue snapshot.
    pub(crate) matched: u64,
    /// Grants whose task was not in the snapshot (must be 0: every waiter queued first).
    pub(crate) unmatched: u64,
    /// Pairs of grants given out of queue order: must be 0.
    pub(crate) inversions: u64,
    /// Grants whose fence order differs from their `t_acq` order (a late wake-up, not an
    /// inversion of the queue; shown for what it says about the clocks).
    pub(crate) fence_vs_time_swaps: u64,
}

/// Compares `grants` with `queue` (the tasks of the queue's entries, oldest first).
pub(crate) fn fifo(queue: &[u32], grants: &[Grant]) -> Fifo {
    let mut position = std::collections::HashMap::with_capacity(queue.len());
    for (at, &task) in queue.iter().enumerate() {
        position.entry(task).or_insert(at);
    }
    let mut by_fence = grants.to_vec();
    by_fence.sort_unstable_by_key(|g| (g.fence, g.t_acq));
    let positions: Vec<usize> = by_fence
        .iter()
        .filter_map(|g| position.get(&g.task).copied())
        .collect();
    let times: Vec<u64> = by_fence.iter().map(|g| g.t_acq).collect();
    Fifo {
        matched: count(positions.len()),
        unmatched: count(by_fence.len() - positions.len()),
        inversions: inversions(&positions),
        fence_vs_time_swaps: inversions(&times),
    }
}

/// Pairs `i < j` with `seq[i] > seq[j]` (merge sort, O(n log n)).
pub(crate) fn inversions<T: Copy + Ord>(seq: &[T]) -> u64 {
    let mut v = seq.to_vec();
    let mut buf = Vec::with_capacity(v.len());
    sort_counting(&mut v, &mut buf)
}

fn sort_counting<T: Copy + Ord>(v: &mut [T], buf: &mut Vec<T>) -> u64 {
    if v.len() < 2 {
        return 0;
    }
    let mid = v.len() / 2;
    let (left, right) = v.split_at_mut(mid);
    let mut n = sort_counting(left, buf) + sort_counting(right, buf);
    buf.clear();
    let (mut i, mut j) = (0, 0);
    while i < left.len() && j < right.len() {
        if right[j] < left[i] {
            // Every element left in `left` is greater than right[j].
            n += count(left.len() - i);
            buf.push(right[j]);
            j += 1;
        } else {
            buf.push(left[i]);
            i += 1;
        }
    }
    buf.extend_from_slice(&left[i..]);
    buf.extend_from_slice(&right[j..]);
    v.copy_from_slice(buf);
    n
}

/// What the server did in one slice of the sampler (consecutive `INFO commandstats cpu`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Slice {
    /// CLOCK_MONOTONIC ns of the slice's two readings.
    pub(crate) start_ns: u64,
    pub(crate) end_ns: u64,
    pub(crate) evalsha_calls: u64,
    pub(crate) evalsha_usec: u64,
    /// `LPOS` runs only in `acquire.lua` when an attempt finds the lock held and looks for its
    /// own entry: the queueing attempt ("join", the last 128 entries) and a re-ask in mode
    /// "wait" (the whole queue ahead of it). Hand-offs and "again" re-asks never call it, so a
    /// slice with `LPOS` calls after the queue filled is a slice of re-asks that scan; the
    /// re-asks that do not scan show only in the EVALSHA count (the "re-asks" row).
    pub(crate) lpos_calls: u64,
    pub(crate) lpos_usec: u64,
    pub(crate) server_cpu_us: u64,
}

/// A run of consecutive slices with re-asks (`LPOS` calls): many waiters' fallback timers firing
/// together, the figure summed over the wave.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Wave {
    pub(crate) start_ns: u64,
    pub(crate) end_ns: u64,
    pub(crate) evalsha_calls: u64,
    pub(crate) evalsha_usec: u64,
    pub(crate) lpos_calls: u64,
    pub(crate) lpos_usec: u64,
    pub(crate) server_cpu_us: u64,
}

impl Wave {
    fn add(&mut self, s: &Slice) {
        self.end_ns = s.end_ns;
        self.evalsha_calls += s.evalsha_calls;
        self.evalsha_usec += s.evalsha_usec;
        self.lpos_calls += s.lpos_calls;
        self.lpos_usec += s.lpos_usec;
        self.server_cpu_us += s.server_cpu_us;
    }

    /// Server time of one `LPOS` in the wave, µs (the O(n) scan of the queue).
    pub(crate) fn us_per_lpos(&self) -> f64 {
        crate::stats::ratio(self.lpos_usec, self.lpos_calls)
    }

    /// redis-server CPU over the wave's wall time, percent of one core.
    pub(crate) fn cpu_pct(&self) -> f64 {
        crate::stats::percent(
            self.server_cpu_us * 1_000,
            self.end_ns.saturating_sub(self.start_ns),
        )
    }
}

/// Groups the slices with `LPOS` calls into waves (consecutive such slices form one).
pub(crate) fn waves(slices: &[Slice]) -> Vec<Wave> {
    let mut waves = Vec::new();
    let mut current: Option<Wave> = None;
    for s in slices {
        if s.lpos_calls == 0 {
            waves.extend(current.take());
            continue;
        }
        current
            .get_or_insert(Wave {
                start_ns: s.start_ns,
                ..Wave::default()
            })
            .add(s);
    }
    waves.extend(current);
    waves
}

/// The latency probe (`PING` on its own connection every few ms) over a window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Stalls {
    pub(crate) pings: u64,
    pub(crate) p50_us: f64,
    pub(crate) p99_us: f64,
    /// The longest `PING`: the server's (or the loaded machine's) longest stall seen.
    pub(crate) max_us: f64,
    /// When the longest one was sent, ms after the lock became free (negative: before).
    pub(crate) max_at_ms: f64,
}

/// The probe's figures from `(sent ns, latency ns)` pairs; `free_ns` = when the lock became free.
pub(crate) fn stalls(pings: &[(u64, u64)], free_ns: u64) -> Stalls {
    let mut latencies: Vec<u64> = pings.iter().map(|&(_, l)| l).collect();
    latencies.sort_unstable();
    let at = |p| nearest_rank(&latencies, p).map_or(f64::NAN, ns_to_us);
    let worst = pings.iter().max_by_key(|&&(_, l)| l);
    Stalls {
        pings: count(pings.len()),
        p50_us: at(50.0),
        p99_us: at(99.0),
        max_us: worst.map_or(f64::NAN, |&(_, l)| ns_to_us(l)),
        max_at_ms: worst.map_or(f64::NAN, |&(sent, _)| signed_ms(sent, free_ns)),
    }
}

/// When the grants came, relative to the instant the lock became free (the holder's release, or
/// the end of the dead holder's lease).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct GrantTimes {
    /// First and last grant (`t_acq`), ms after the lock became free.
    pub(crate) first_ms: f64,
    pub(crate) last_ms: f64,
    /// Grants per second from the lock's freeing to the last grant.
    pub(crate) per_s: f64,
}

/// The grant timings of `grants` after `free_ns`.
pub(crate) fn grant_times(grants: &[Grant], free_ns: u64) -> GrantTimes {
    let first = grants.iter().map(|g| g.t_acq).min();
    let last = grants.iter().map(|g| g.t_acq).max();
    let ms = |t: Option<u64>| t.map_or(f64::NAN, |t| signed_ms(t, free_ns));
    GrantTimes {
        first_ms: ms(first),
        last_ms: ms(last),
        per_s: last.map_or(f64::NAN, |last| {
            crate::stats::per_second(count(grants.len()), last.saturating_sub(free_ns))
        }),
    }
}

/// `a − b` in ms, signed.
fn signed_ms(a: u64, b: u64) -> f64 {
    if a >= b {
        float(a - b) / 1e6
    } else {
        -float(b - a) / 1e6
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(task: u32, fence: u64, t_acq: u64) -> Grant {
        Grant {
            task,
            fence,
            t_acq,
            t_rel: t_acq + 1,
        }
    }

    #[test]
    fn entries_map_to_their_task_by_label() {
        let entry = "1 0123456789abcdef0123456789abcdef c0ffee 10000 P host\x1f42\x1fw7:1234";
        assert_eq!(task_of_entry(entry), Some(1234));
        assert_eq!(
            task_of_entry(&format!("1 t c 1 P h\x1f1\x1f{}", label(7))),
            Some(7)
        );
        // The holder's label, another lock's, no label, garbage.
        assert_eq!(task_of_entry("1 t c 1 P h\x1f1\x1fw7:holder"), None);
        assert_eq!(task_of_entry("1 t c 1 P h\x1f1\x1fjob"), None);
        assert_eq!(task_of_entry("1 t c 1 P h\x1f1\x1f"), None);
        assert_eq!(task_of_entry("w7:3"), None);
    }

    #[test]
    fn snapshots_must_only_grow() {
        let s = |v: &[&str]| v.iter().map(|e| (*e).to_owned()).collect::<Vec<_>>();
        assert!(extends(&s(&[]), &s(&["a"])));
        assert!(extends(&s(&["a"]), &s(&["a", "b"])));
        assert!(extends(&s(&["a", "b"]), &s(&["a", "b"])));
        assert!(!extends(&s(&["a", "b"]), &s(&["b", "a"])));
        assert!(!extends(&s(&["a", "b"]), &s(&["a"])));
    }

    #[test]
    fn tenths_find_when_the_queue_reached_each() {
        let progress = [(0.1, 0), (0.2, 35), (0.3, 60), (0.5, 99), (0.9, 100)];
        let t = tenths(&progress, 100);
        assert_eq!(t.len(), 10);
        assert!((t[0] - 0.2).abs() < 1e-9 && (t[2] - 0.2).abs() < 1e-9);
        assert!((t[3] - 0.3).abs() < 1e-9 && (t[5] - 0.3).abs() < 1e-9);
        assert!((t[8] - 0.5).abs() < 1e-9 && (t[9] - 0.9).abs() < 1e-9);
        assert!(tenths(&[(0.1, 5)], 100)[9].is_nan());
    }

    #[test]
    fn inversions_count_pairs_out_of_order() {
        assert_eq!(inversions::<u32>(&[]), 0);
        assert_eq!(inversions(&[1]), 0);
        assert_eq!(inversions(&[1, 2, 3, 4]), 0);
        assert_eq!(inversions(&[2, 1, 3]), 1);
        assert_eq!(inversions(&[4, 3, 2, 1]), 6);
        assert_eq!(inversions(&[1, 3, 2, 3, 1]), 4);
        // Against the quadratic definition on a scrambled sequence.
        let seq: Vec<u64> = (0..200u64).map(|i| (i * 7_919) % 211).collect();
        let mut slow = 0;
        for i in 0..seq.len() {
            for j in i + 1..seq.len() {
                slow += u64::from(seq[i] > seq[j]);
            }
        }
        assert_eq!(inversions(&seq), slow);
    }

    #[test]
    fn fifo_orders_grants_by_fence_and_maps_them_to_queue_positions() {
        let queue = [10, 11, 12, 13];
        // Fences in queue order, handed out of t_acq order (a late wake-up): no inversion.
        let inorder = [
            grant(10, 100, 5),
            grant(11, 101, 4),
            grant(12, 102, 6),
            grant(13, 103, 7),
        ];
        let f = fifo(&queue, &inorder);
        assert_eq!((f.matched, f.unmatched, f.inversions), (4, 0, 0));
        assert_eq!(f.fence_vs_time_swaps, 1);
        // 13 granted before 11 and 12: two inversions; 99 never queued.
        let skipped = [
            grant(10, 100, 1),
            grant(13, 101, 2),
            grant(11, 102, 3),
            grant(12, 103, 4),
            grant(99, 104, 5),
        ];
        let f = fifo(&queue, &skipped);
        assert_eq!((f.matched, f.unmatched, f.inversions), (4, 1, 2));
    }

    #[test]
    fn waves_group_consecutive_slices_with_reasks() {
        let slice = |start, lpos, cpu| Slice {
            start_ns: start,
            end_ns: start + 100,
            evalsha_calls: lpos + 1,
            evalsha_usec: 10,
            lpos_calls: lpos,
            lpos_usec: lpos * 2,
            server_cpu_us: cpu,
        };
        let slices = [
            slice(0, 0, 1),
            slice(100, 5, 50),
            slice(200, 3, 20),
            slice(300, 0, 1),
            slice(400, 4, 60),
        ];
        let w = waves(&slices);
        assert_eq!(w.len(), 2);
        assert_eq!((w[0].start_ns, w[0].end_ns), (100, 300));
        assert_eq!(
            (w[0].lpos_calls, w[0].lpos_usec, w[0].evalsha_calls),
            (8, 16, 10)
        );
        assert_eq!(w[0].server_cpu_us, 70);
        assert!((w[0].us_per_lpos() - 2.0).abs() < 1e-9);
        // 70 µs of CPU in 200 ns of wall time: far above one core (synthetic numbers).
        assert!((w[0].cpu_pct() - 35_000.0).abs() < 1e-6);
        assert_eq!((w[1].start_ns, w[1].end_ns, w[1].lpos_calls), (400, 500, 4));
        assert!(waves(&[slice(0, 0, 1)]).is_empty());
    }

    #[test]
    fn stalls_find_the_longest_ping_and_when() {
        let pings = [
            (1_000_000, 100_000),
            (3_000_000, 5_000_000),
            (6_000_000, 200_000),
        ];
        let s = stalls(&pings, 2_000_000);
        assert_eq!(s.pings, 3);
        assert!((s.max_us - 5_000.0).abs() < 1e-9);
        assert!((s.max_at_ms - 1.0).abs() < 1e-9);
        assert!((s.p50_us - 200.0).abs() < 1e-9);
        let before = stalls(&[(1_000_000, 7)], 3_000_000);
        assert!((before.max_at_ms + 2.0).abs() < 1e-9);
        assert!(stalls(&[], 0).max_us.is_nan());
    }

    #[test]
    fn grant_times_are_counted_from_the_lock_freeing() {
        let grants = [grant(0, 1, 3_000_000), grant(1, 2, 1_002_000_000)];
        let t = grant_times(&grants, 2_000_000);
        assert!((t.first_ms - 1.0).abs() < 1e-9);
        assert!((t.last_ms - 1_000.0).abs() < 1e-9);
        assert!((t.per_s - 2.0).abs() < 1e-9);
        assert!(grant_times(&[], 0).first_ms.is_nan());
    }
}
