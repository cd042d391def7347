//! Pure statistics of the benchmark: nearest-rank percentiles, and the contention figures of W3
//! (hand-off gaps, overlaps, self-hand-offs, fairness) computed from merged lock events.
//!
//! Nothing here talks to Redis or reads a clock, so every figure the report prints is unit-tested
//! on synthetic data below.

use serde::{Deserialize, Serialize};

/// The `p`-th percentile (0 < p ≤ 100) of `sorted` (ascending) by the nearest-rank method: the
/// smallest value such that at least `p`% of the values are ≤ it. `None` for an empty slice.
pub(crate) fn nearest_rank<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len();
    // rank = ceil(p/100 · n), clamped to 1..=n. The float is small and positive: the cast is exact
    // enough for any sample size this benchmark uses.
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let rank = ((p / 100.0) * n as f64).ceil() as usize;
    sorted.get(rank.clamp(1, n) - 1).copied()
}

/// p50 and p99 (nearest rank) of `samples`, each converted by `to`; NaN when there are none.
/// Sorts `samples` in place.
pub(crate) fn p50_p99<T: Copy + Ord>(samples: &mut [T], to: impl Fn(T) -> f64) -> (f64, f64) {
    samples.sort_unstable();
    let at = |p| nearest_rank(samples, p).map_or(f64::NAN, &to);
    (at(50.0), at(99.0))
}

/// p50 and p99 of nanosecond samples, in microseconds (sorts `samples` in place).
pub(crate) fn p50_p99_us(samples: &mut [u64]) -> (f64, f64) {
    p50_p99(samples, ns_to_us)
}

/// A length as a count (saturating: lengths here are far below `u64::MAX`).
pub(crate) fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// Whole milliseconds of `d`, saturating.
pub(crate) fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `n` as a float: exact below 2^53, far above any count or nanosecond span here (104 days).
#[allow(clippy::cast_precision_loss)]
pub(crate) fn float(n: u64) -> f64 {
    n as f64
}

/// Nanoseconds to microseconds, for reporting.
pub(crate) fn ns_to_us(ns: u64) -> f64 {
    float(ns) / 1e3
}

/// Nanoseconds to seconds, for reporting.
pub(crate) fn ns_to_s(ns: u64) -> f64 {
    float(ns) / 1e9
}

/// `a / b` as a float (NaN for b = 0).
pub(crate) fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        f64::NAN
    } else {
        float(a) / float(b)
    }
}

/// `count` events in `elapsed_ns` as a rate per second (NaN for no time).
pub(crate) fn per_second(count: u64, elapsed_ns: u64) -> f64 {
    ratio(count, elapsed_ns) * 1e9
}

/// `part / whole` in percent (NaN when `whole` is 0).
pub(crate) fn percent(part: u64, whole: u64) -> f64 {
    ratio(part, whole) * 100.0
}

/// One held acquisition of the W3 lock: who, and when (CLOCK_MONOTONIC ns, comparable across
/// processes of this machine).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LockEvent {
    /// Global worker number: `process × tasks + task`.
    pub(crate) worker: u32,
    /// Right after acquire returned.
    pub(crate) t_acq: u64,
    /// Right before release was called.
    pub(crate) t_rel: u64,
}

/// What the merged W3 events say about the lock.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Contention {
    /// Number of events (acquisitions that succeeded).
    pub(crate) acquisitions: u64,
    /// Hand-offs whose next acquire came before the previous release: mutual exclusion broken.
    pub(crate) overlaps: u64,
    /// Gap `t_acq[k+1] − t_rel[k]` over every hand-off, µs.
    pub(crate) gap_p50_us: f64,
    pub(crate) gap_p99_us: f64,
    /// The same, only for hand-offs to another worker, µs.
    pub(crate) cross_gap_p50_us: f64,
    pub(crate) cross_gap_p99_us: f64,
    /// Hand-offs from a worker to itself, as a percentage of all hand-offs.
    pub(crate) self_handoff_pct: f64,
    /// Fewest and most acquisitions of one worker (workers with none count as 0).
    pub(crate) fairness_min: u64,
    pub(crate) fairness_max: u64,
}

/// Sorts `events` by `t_acq` and computes the contention figures for `workers` workers.
pub(crate) fn contention(events: &mut [LockEvent], workers: u32) -> Contention {
    events.sort_unstable_by_key(|e| (e.t_acq, e.t_rel, e.worker));
    let mut gaps = Vec::with_capacity(events.len());
    let mut cross = Vec::with_capacity(events.len());
    let mut overlaps = 0;
    let mut selves = 0u64;
    for pair in events.windows(2) {
        let [prev, next] = pair else { continue };
        let gap = signed_diff(next.t_acq, prev.t_rel);
        if gap < 0 {
            overlaps += 1;
        }
        gaps.push(gap);
        if next.worker == prev.worker {
            selves += 1;
        } else {
            cross.push(gap);
        }
    }
    let handoffs = count(gaps.len());
    let (fairness_min, fairness_max) = fairness(events, workers);
    // Signed ns to µs: exact, the gaps are far below 2^53 ns.
    #[allow(clippy::cast_precision_loss)]
    let us = |ns: i64| ns as f64 / 1e3;
    let (gap_p50_us, gap_p99_us) = p50_p99(&mut gaps, us);
    let (cross_gap_p50_us, cross_gap_p99_us) = p50_p99(&mut cross, us);
    Contention {
        acquisitions: count(events.len()),
        overlaps,
        gap_p50_us,
        gap_p99_us,
        cross_gap_p50_us,
        cross_gap_p99_us,
        self_handoff_pct: percent(selves, handoffs),
        fairness_min,
        fairness_max,
    }
}

/// Fewest and most events of one worker among `0..workers`.
pub(crate) fn fairness(events: &[LockEvent], workers: u32) -> (u64, u64) {
    let mut counts = vec![0u64; usize::try_from(workers).unwrap_or(0)];
    for event in events {
        if let Some(count) = usize::try_from(event.worker)
            .ok()
            .and_then(|w| counts.get_mut(w))
        {
            *count += 1;
        }
    }
    let min = counts.iter().copied().min().unwrap_or(0);
    let max = counts.iter().copied().max().unwrap_or(0);
    (min, max)
}

/// `a − b` in signed nanoseconds, saturating.
fn signed_diff(a: u64, b: u64) -> i64 {
    if a >= b {
        i64::try_from(a - b).unwrap_or(i64::MAX)
    } else {
        i64::try_from(b - a).map_or(i64::MIN, |d| -d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(worker: u32, t_acq: u64, t_rel: u64) -> LockEvent {
        LockEvent {
            worker,
            t_acq,
            t_rel,
        }
    }

    #[test]
    fn nearest_rank_follows_the_definition() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(nearest_rank(&v, 50.0), Some(50));
        assert_eq!(nearest_rank(&v, 99.0), Some(99));
        assert_eq!(nearest_rank(&v, 100.0), Some(100));
        assert_eq!(nearest_rank(&v, 0.1), Some(1));
        // Wikipedia's example: {15, 20, 35, 40, 50}.
        let w = [15, 20, 35, 40, 50];
        assert_eq!(nearest_rank(&w, 5.0), Some(15));
        assert_eq!(nearest_rank(&w, 30.0), Some(20));
        assert_eq!(nearest_rank(&w, 40.0), Some(20));
        assert_eq!(nearest_rank(&w, 50.0), Some(35));
        assert_eq!(nearest_rank(&w, 100.0), Some(50));
        assert_eq!(nearest_rank::<u64>(&[], 50.0), None);
        assert_eq!(nearest_rank(&[7u64], 99.0), Some(7));
    }

    #[test]
    fn p50_p99_sorts_and_converts_to_microseconds() {
        let mut v: Vec<u64> = (1..=1000).rev().map(|i| i * 1_000).collect();
        let (p50, p99) = p50_p99_us(&mut v);
        assert!((p50 - 500.0).abs() < 1e-9);
        assert!((p99 - 990.0).abs() < 1e-9);
    }

    #[test]
    fn contention_counts_gaps_overlaps_and_self_handoffs() {
        // Unsorted on purpose: the function sorts by t_acq.
        let mut events = vec![
            event(1, 3_000, 4_000),   // cross (0→1), gap 1_000
            event(0, 0, 1_000),       // the first acquisition
            event(0, 1_500, 2_000),   // self (0→0), gap 500
            event(2, 3_900, 5_000),   // cross (1→2), gap -100: an overlap
            event(1, 10_000, 11_000), // cross (2→1), gap 5_000
        ];
        let c = contention(&mut events, 3);
        assert_eq!(c.acquisitions, 5);
        assert_eq!(c.overlaps, 1);
        // Gaps in t_acq order: 500 (self), 1_000 (0→1), -100 (1→2), 5_000 (2→1).
        assert!((c.self_handoff_pct - 25.0).abs() < 1e-9);
        // All gaps sorted: -100, 500, 1000, 5000 → p50 = rank 2 = 500 ns.
        assert!((c.gap_p50_us - 0.5).abs() < 1e-9);
        assert!((c.gap_p99_us - 5.0).abs() < 1e-9);
        // Cross gaps sorted: -100, 1000, 5000 → p50 = rank 2 = 1000 ns.
        assert!((c.cross_gap_p50_us - 1.0).abs() < 1e-9);
        assert!((c.cross_gap_p99_us - 5.0).abs() < 1e-9);
        assert_eq!((c.fairness_min, c.fairness_max), (1, 2));
    }

    #[test]
    fn fairness_counts_idle_workers_as_zero() {
        let events = [event(0, 0, 1), event(0, 2, 3), event(2, 4, 5)];
        assert_eq!(fairness(&events, 3), (0, 2));
        // Out-of-range workers are ignored rather than a panic.
        assert_eq!(fairness(&[event(9, 0, 1)], 2), (0, 0));
    }

    #[test]
    fn degenerate_inputs_give_nan_not_panics() {
        let c = contention(&mut [], 2);
        assert_eq!(c.acquisitions, 0);
        assert!(c.gap_p50_us.is_nan());
        assert!(c.self_handoff_pct.is_nan());
        let c = contention(&mut [event(0, 5, 6)], 1);
        assert_eq!(c.overlaps, 0);
        assert!(c.cross_gap_p99_us.is_nan());
        assert!(per_second(10, 0).is_nan());
        assert!((per_second(10, 1_000_000_000) - 10.0).abs() < 1e-9);
        assert_eq!(signed_diff(1, 3), -2);
        assert_eq!(signed_diff(3, 1), 2);
    }
}
