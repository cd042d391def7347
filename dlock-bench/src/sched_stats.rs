//! Pure statistics of the scheduler workload: fire delays, exactly-once counts per occurrence,
//! which replica ran what, the window's edges, and the breakdown of the window's round trips
//! into claims, lock calls, ledger writes and `run_now` polls, inferred from `INFO commandstats`.
//!
//! Nothing here talks to Redis or reads a clock; every figure is unit-tested below.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::redis_stats::PerCommand;
use crate::stats::ratio;
use crate::stats::{count, float, nearest_rank};

/// Fire delays (server-clock start − nominal instant) of the occurrences of a window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct DelaySummary {
    /// Occurrences with a delay (the ledger's start is at or after the nominal instant).
    pub(crate) samples: u64,
    /// Occurrences that started *before* their nominal instant by the server's clock (no
    /// delay): must be 0, the claim refuses early starts.
    pub(crate) early: u64,
    pub(crate) p50_ms: f64,
    pub(crate) p99_ms: f64,
    pub(crate) max_ms: f64,
}

impl DelaySummary {
    /// Nearest-rank p50/p99 and the maximum of `delays_ms` (`None` = started early).
    pub(crate) fn of(delays_ms: &[Option<u64>]) -> Self {
        let mut ms: Vec<u64> = delays_ms.iter().flatten().copied().collect();
        ms.sort_unstable();
        let as_f64 = |v: Option<u64>| v.map_or(f64::NAN, float);
        Self {
            samples: count(ms.len()),
            early: count(delays_ms.len()) - count(ms.len()),
            p50_ms: as_f64(nearest_rank(&ms, 50.0)),
            p99_ms: as_f64(nearest_rank(&ms, 99.0)),
            max_ms: as_f64(ms.last().copied()),
        }
    }
}

/// How often each expected occurrence ran, from the handler's per-occurrence counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct OnceSummary {
    /// Occurrences expected: every whole second from the first to the last, inclusive.
    pub(crate) occurrences: u64,
    pub(crate) once: u64,
    /// Occurrences that ran more than once: must be 0.
    pub(crate) repeated: u64,
    /// Occurrences that did not run.
    pub(crate) missed: u64,
}

impl OnceSummary {
    /// Counts, for every second `first_ms, first_ms + 1000, …, last_ms`, how often it ran
    /// according to `counts` (occurrence ms → runs; absent = 0).
    pub(crate) fn of(counts: &BTreeMap<i64, u64>, first_ms: i64, last_ms: i64) -> Self {
        let mut summary = Self::default();
        let mut at = first_ms;
        while at <= last_ms {
            summary.occurrences += 1;
            match counts.get(&at).copied().unwrap_or(0) {
                0 => summary.missed += 1,
                1 => summary.once += 1,
                _ => summary.repeated += 1,
            }
            at += 1_000;
        }
        summary
    }

    /// Every occurrence ran exactly once.
    pub(crate) fn exact(&self) -> bool {
        self.once == self.occurrences && self.occurrences > 0
    }
}

/// The first whole-second-plus-`edge_ms` instant strictly after `after_ms` (Unix ms).
pub(crate) fn next_edge(after_ms: u64, edge_ms: u64) -> u64 {
    let edge = after_ms / 1_000 * 1_000 + edge_ms;
    if edge > after_ms { edge } else { edge + 1_000 }
}

/// The nominal instants (Unix ms, whole seconds) strictly inside `(start_ms, end_ms)`.
pub(crate) fn seconds_between(start_ms: u64, end_ms: u64) -> Vec<i64> {
    let first = start_ms / 1_000 + 1;
    let last = end_ms.saturating_sub(1) / 1_000;
    (first..=last)
        .filter_map(|s| i64::try_from(s * 1_000).ok())
        .collect()
}

/// Runs per replica id.
pub(crate) fn distribution<'a>(
    replicas: impl IntoIterator<Item = &'a str>,
) -> BTreeMap<String, u64> {
    let mut runs = BTreeMap::new();
    for replica in replicas {
        *runs.entry(replica.to_owned()).or_insert(0) += 1;
    }
    runs
}

/// The window's client round trips taken apart, inferred from the commands the scheduler's
/// scripts run inside Redis (dlock-scheduler's `claim.lua` and `finish.lua`, dlock-core's
/// `acquire.lua` and `release.lua`, as of this benchmark):
///
/// * every `claim.lua` call runs `EXISTS` (is the job paused?) first, and nothing else does;
/// * a *won* claim runs `ZADD` twice (claims, runs), a refused one never;
/// * `finish.lua` (the ledger's "running" and end records) runs `HGET` first, nothing else does;
/// * `TIME` runs once per claim that got past the "already claimed" check (won, or too early
///   by the server's clock), once per lock acquire and once per end record, so with every run
///   succeeding `too early = TIME − 3 × wins`;
/// * the lock's own calls (`acquire.lua` + `release.lua`) are the other `EVALSHA`s;
/// * `LPOP` is the `run_now` request poll, sent by every replica every second (a release with
///   no waiter runs no `LPOP`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Breakdown {
    pub(crate) claims: u64,
    pub(crate) wins: u64,
    /// Claims refused because the occurrence's time had not come by the server's clock (the
    /// replica waits and claims again).
    pub(crate) too_early: u64,
    /// Claims that found the occurrence claimed by another replica.
    pub(crate) found_claimed: u64,
    /// `acquire.lua` + `release.lua` calls.
    pub(crate) lock_calls: u64,
    /// `finish.lua` calls.
    pub(crate) ledger_writes: u64,
    /// `LPOP` of the `run_now` requests.
    pub(crate) polls: u64,
    /// Per occurrence: the winner's round trips (its winning claim, the lock calls, the ledger
    /// writes; its too-early claims are counted apart).
    pub(crate) winner_per_occurrence: f64,
    /// Per occurrence and losing replica: claims that found it claimed.
    pub(crate) loser_per_occurrence: f64,
    /// Per occurrence: too-early claims (all replicas together).
    pub(crate) too_early_per_occurrence: f64,
    /// Per occurrence and replica: `run_now` polls.
    pub(crate) polls_per_replica_per_occurrence: f64,
}

impl Breakdown {
    /// Infers the breakdown of a window with `occurrences` occurrences run by one of `replicas`
    /// replicas each; `None` when the counts do not fit the scripts' shape (a run that was
    /// skipped or failed, or scripts that changed).
    pub(crate) fn infer(commands: &PerCommand, occurrences: u64, replicas: u32) -> Option<Self> {
        let get = |name: &str| commands.get(name);
        let claims = get("exists");
        let ledger_writes = get("hget");
        let zadd = get("zadd");
        if zadd % 2 != 0 || occurrences == 0 || replicas < 2 {
            return None;
        }
        let wins = zadd / 2;
        let too_early = get("time").checked_sub(3 * wins)?;
        let found_claimed = claims.checked_sub(wins + too_early)?;
        let lock_calls = get("evalsha").checked_sub(claims + ledger_writes)?;
        let polls = get("lpop");
        let losers = occurrences * u64::from(replicas - 1);
        Some(Self {
            claims,
            wins,
            too_early,
            found_claimed,
            lock_calls,
            ledger_writes,
            polls,
            winner_per_occurrence: ratio(wins + lock_calls + ledger_writes, occurrences),
            loser_per_occurrence: ratio(found_claimed, losers),
            too_early_per_occurrence: ratio(too_early, occurrences),
            polls_per_replica_per_occurrence: ratio(polls, occurrences * u64::from(replicas)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_use_nearest_rank_and_count_early_starts() {
        let mut delays: Vec<Option<u64>> = (1..=20).map(Some).collect();
        delays.push(None);
        let d = DelaySummary::of(&delays);
        assert_eq!(d.samples, 20);
        assert_eq!(d.early, 1);
        assert!((d.p50_ms - 10.0).abs() < 1e-9);
        // 99 % of 20 samples: rank 20, the maximum.
        assert!((d.p99_ms - 20.0).abs() < 1e-9);
        assert!((d.max_ms - 20.0).abs() < 1e-9);
        let none = DelaySummary::of(&[]);
        assert_eq!(none.samples, 0);
        assert!(none.p50_ms.is_nan());
    }

    #[test]
    fn once_counts_every_expected_second() {
        let counts: BTreeMap<i64, u64> = [(1_000, 1), (2_000, 2), (4_000, 1), (9_000, 1)].into();
        let s = OnceSummary::of(&counts, 1_000, 4_000);
        assert_eq!(
            s,
            OnceSummary {
                occurrences: 4,
                once: 2,
                repeated: 1,
                missed: 1
            }
        );
        assert!(!s.exact());
        assert!(OnceSummary::of(&counts, 4_000, 4_000).exact());
        assert!(!OnceSummary::of(&counts, 5_000, 4_000).exact());
    }

    #[test]
    fn window_edges_and_seconds() {
        assert_eq!(next_edge(10_399, 400), 10_400);
        assert_eq!(next_edge(10_400, 400), 11_400);
        assert_eq!(next_edge(10_900, 400), 11_400);
        assert_eq!(
            seconds_between(10_400, 13_400),
            vec![11_000, 12_000, 13_000]
        );
        assert_eq!(seconds_between(10_000, 12_000), vec![11_000]);
        assert!(seconds_between(10_400, 10_900).is_empty());
    }

    #[test]
    fn distribution_counts_runs_per_replica() {
        let d = distribution(["r0", "r2", "r0"]);
        assert_eq!(d.get("r0"), Some(&2));
        assert_eq!(d.get("r2"), Some(&1));
        assert_eq!(d.get("r1"), None);
    }

    fn stats(pairs: &[(&str, u64)]) -> PerCommand {
        PerCommand(pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect())
    }

    #[test]
    fn breakdown_of_a_window_without_skew() {
        // 10 occurrences, 3 replicas: 30 claims (10 won), 20 lock calls, 20 ledger writes,
        // one poll per replica and second.
        let c = stats(&[
            ("exists", 30),
            ("zscore", 30),
            ("zadd", 20),
            ("hget", 20),
            ("time", 30),
            ("evalsha", 70),
            ("lpop", 30),
        ]);
        let b = Breakdown::infer(&c, 10, 3).unwrap();
        assert_eq!(
            (b.claims, b.wins, b.too_early, b.found_claimed),
            (30, 10, 0, 20)
        );
        assert_eq!((b.lock_calls, b.ledger_writes, b.polls), (20, 20, 30));
        assert!((b.winner_per_occurrence - 5.0).abs() < 1e-9);
        assert!((b.loser_per_occurrence - 1.0).abs() < 1e-9);
        assert!(b.too_early_per_occurrence.abs() < 1e-9);
        assert!((b.polls_per_replica_per_occurrence - 1.0).abs() < 1e-9);
    }

    #[test]
    fn breakdown_counts_too_early_claims_and_rejects_odd_shapes() {
        // A replica 500 ms ahead asks first each time and is told to wait: 10 more claims that
        // each ran TIME.
        let c = stats(&[
            ("exists", 40),
            ("zadd", 20),
            ("hget", 20),
            ("time", 40),
            ("evalsha", 80),
        ]);
        let b = Breakdown::infer(&c, 10, 3).unwrap();
        assert_eq!((b.too_early, b.found_claimed), (10, 20));
        assert!((b.too_early_per_occurrence - 1.0).abs() < 1e-9);
        assert!(Breakdown::infer(&stats(&[("zadd", 3)]), 10, 3).is_none());
        assert!(Breakdown::infer(&stats(&[("zadd", 2)]), 10, 3).is_none());
        assert!(Breakdown::infer(&c, 0, 3).is_none());
    }
}
