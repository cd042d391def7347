//! Pure figures of the scheduler one-off stage (issue #31): the replicas' one-off runs of one
//! burst (the indexes `first … first + jobs − 1`, all due at the same instant T) merged —
//! exactly once, start − T percentiles, the last start and end, the per-replica share — and
//! each replica's cadence (the gap between its consecutive starts), which shows how fast one
//! replica claims.
//!
//! Nothing here talks to Redis or reads a clock; every figure is unit-tested below.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::sched_scale_replica::OneOffRun;
use crate::stats::{count, nearest_rank};

/// A burst of one-off jobs as the replicas ran it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Burst {
    pub(crate) expected: u64,
    pub(crate) once: u64,
    /// Indexes of the burst that never ran.
    pub(crate) missing: u64,
    /// Indexes that ran more than once, and the runs beyond the first.
    pub(crate) duplicated: u64,
    pub(crate) extra_runs: u64,
    /// Runs of the burst whose due time is not T (0 expected).
    pub(crate) wrong_due: u64,
    /// Runs that started before T (must be 0: the claim refuses early starts by the server's
    /// clock, which is this machine's).
    pub(crate) early: u64,
    /// Handler start − T, ms (µs resolution): the first, p50, p99 and the last.
    pub(crate) first_start_ms: f64,
    pub(crate) p50_ms: f64,
    pub(crate) p99_ms: f64,
    pub(crate) last_start_ms: f64,
    /// The last handler end − T, ms.
    pub(crate) last_end_ms: f64,
    /// Runs per replica id.
    pub(crate) share: BTreeMap<String, u64>,
    /// Per replica id, the median gap between its consecutive starts, µs (its claim cadence:
    /// it claims one run per `take_retry.lua` call, one call after the other).
    pub(crate) gap_p50_us: BTreeMap<String, f64>,
}

impl Burst {
    /// Every index of the burst ran once, none early, none of another due time.
    pub(crate) fn exact(&self) -> bool {
        self.expected > 0 && self.once == self.expected && self.early == 0 && self.wrong_due == 0
    }

    /// Runs per second over the burst: its runs / (last start − T).
    pub(crate) fn starts_per_s(&self) -> f64 {
        if self.last_start_ms > 0.0 {
            crate::stats::float(self.share.values().sum()) / (self.last_start_ms / 1e3)
        } else {
            f64::NAN
        }
    }
}

/// Merges the one-off runs of `replicas` (id, runs) whose index is in `first … first + jobs − 1`,
/// all due at `due_ms` (Unix ms); runs of other indexes are left out (another burst's).
pub(crate) fn burst(
    replicas: &[(String, Vec<OneOffRun>)],
    first: u32,
    jobs: u32,
    due_ms: i64,
) -> Burst {
    let range = first..first.saturating_add(jobs);
    let due_us = due_ms.saturating_mul(1_000);
    let since_due_us = |at_us: u64| i64::try_from(at_us).unwrap_or(i64::MAX) - due_us;
    let mut runs: HashMap<u32, u64> = HashMap::new();
    let mut starts_us = Vec::new();
    let mut last_end_us = i64::MIN;
    let mut out = Burst {
        expected: u64::from(jobs),
        ..Burst::default()
    };
    for (id, replica_runs) in replicas {
        let mut mine: Vec<i64> = Vec::new();
        for &(index, run_due_ms, start_us, end_us) in replica_runs {
            if !range.contains(&index) {
                continue;
            }
            *runs.entry(index).or_insert(0) += 1;
            if run_due_ms != due_ms {
                out.wrong_due += 1;
            }
            mine.push(since_due_us(start_us));
            last_end_us = last_end_us.max(since_due_us(end_us));
        }
        mine.sort_unstable();
        let gaps: Vec<i64> = {
            let mut g: Vec<i64> = mine.windows(2).map(|w| w[1] - w[0]).collect();
            g.sort_unstable();
            g
        };
        if let Some(gap) = nearest_rank(&gaps, 50.0) {
            out.gap_p50_us.insert(id.clone(), gap as f64);
        }
        out.share.insert(id.clone(), count(mine.len()));
        starts_us.extend(mine);
    }
    for index in range {
        match runs.get(&index).copied().unwrap_or(0) {
            0 => out.missing += 1,
            1 => out.once += 1,
            n => {
                out.duplicated += 1;
                out.extra_runs += n - 1;
            }
        }
    }
    starts_us.sort_unstable();
    let ms = |v: Option<i64>| v.map_or(f64::NAN, |us| us as f64 / 1e3);
    out.early = count(starts_us.iter().filter(|&&d| d < 0).count());
    out.first_start_ms = ms(starts_us.first().copied());
    out.p50_ms = ms(nearest_rank(&starts_us, 50.0));
    out.p99_ms = ms(nearest_rank(&starts_us, 99.0));
    out.last_start_ms = ms(starts_us.last().copied());
    out.last_end_ms = ms((last_end_us > i64::MIN).then_some(last_end_us));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const T_MS: i64 = 1_000_000;
    const T_US: u64 = 1_000_000_000;

    #[test]
    fn a_burst_counts_every_index_once_and_times_from_t() {
        // Indexes 10..14 due at T: 10 and 11 by r0, 12 by r1 twice (duplicated), 13 missing;
        // index 3 (another burst) is left out.
        let replicas = vec![
            (
                "r0".to_owned(),
                vec![
                    (10, T_MS, T_US + 1_000, T_US + 1_100),
                    (11, T_MS, T_US + 3_000, T_US + 3_050),
                    (3, T_MS - 5_000, T_US - 9_000, T_US - 8_000),
                ],
            ),
            (
                "r1".to_owned(),
                vec![
                    (12, T_MS, T_US + 2_000, T_US + 2_010),
                    (12, T_MS, T_US + 10_000, T_US + 12_000),
                ],
            ),
        ];
        let b = burst(&replicas, 10, 4, T_MS);
        assert_eq!(
            (b.expected, b.once, b.missing, b.duplicated, b.extra_runs),
            (4, 2, 1, 1, 1)
        );
        assert_eq!((b.early, b.wrong_due), (0, 0));
        assert!(!b.exact());
        assert!((b.first_start_ms - 1.0).abs() < 1e-9);
        assert!((b.p50_ms - 2.0).abs() < 1e-9);
        assert!((b.last_start_ms - 10.0).abs() < 1e-9);
        assert!((b.last_end_ms - 12.0).abs() < 1e-9);
        assert_eq!(b.share.get("r0"), Some(&2));
        assert_eq!(b.share.get("r1"), Some(&2));
        assert_eq!(b.gap_p50_us.get("r0"), Some(&2_000.0));
        assert_eq!(b.gap_p50_us.get("r1"), Some(&8_000.0));
        // 4 runs by 10 ms after T.
        assert!((b.starts_per_s() - 400.0).abs() < 1e-9);
    }

    #[test]
    fn early_starts_and_other_due_times_fail_the_burst() {
        let early = vec![("r0".to_owned(), vec![(0, T_MS, T_US - 1, T_US)])];
        let b = burst(&early, 0, 1, T_MS);
        assert_eq!((b.once, b.early), (1, 1));
        assert!(!b.exact());
        let late = vec![("r0".to_owned(), vec![(0, T_MS + 1, T_US + 5, T_US + 6)])];
        assert_eq!(burst(&late, 0, 1, T_MS).wrong_due, 1);
        let fine = vec![("r0".to_owned(), vec![(0, T_MS, T_US + 5, T_US + 6)])];
        assert!(burst(&fine, 0, 1, T_MS).exact());
        let none = burst(&[], 0, 2, T_MS);
        assert_eq!((none.missing, none.once), (2, 0));
        assert!(none.last_start_ms.is_nan() && none.starts_per_s().is_nan());
    }
}
