//! Pure figures of the scheduler's kill phase (issue #30): the runs the handlers announced, the
//! kills, and, from the ledger, what became of each killed run — when it was found abandoned,
//! when its next attempt was claimed and when that attempt's handler started (at least once),
//! and when the next later occurrence ran (both modes).
//!
//! Every instant is the wall clock of this machine in µs since the Unix epoch: the parent's,
//! a replica's and the Redis server's (`TIME`, which the ledger records in ms) are the same
//! clock here. Nothing here talks to Redis or reads a clock; every figure is unit-tested below.

use std::time::{SystemTime, UNIX_EPOCH};

use dlock_scheduler::{RunOutcome, RunRecord};
use serde::{Deserialize, Serialize};

use crate::spec::SCHED_LONG_EVERY_S;
use crate::stats::{count, float, nearest_rank};

/// Whether attempt `attempt` of the occurrence at `occurrence_ms` is a long run in the kill
/// phase: the first attempt of an occurrence on a multiple of [`SCHED_LONG_EVERY_S`] seconds.
/// Later attempts (the retries of a killed run) are short.
pub(crate) fn is_long(occurrence_ms: i64, attempt: u32) -> bool {
    attempt == 1 && occurrence_ms.rem_euclid(SCHED_LONG_EVERY_S * 1_000) == 0
}

/// A run's start as its handler announces it in the kill phase, one line on a Redis list:
/// `<occurrence ms> <attempt> <replica id> <pid> <wall µs>`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Announcement {
    pub(crate) occurrence_ms: i64,
    pub(crate) attempt: u32,
    pub(crate) replica: String,
    pub(crate) pid: u32,
    /// When the handler started (µs).
    pub(crate) at_us: u64,
}

impl Announcement {
    /// The line the handler pushes.
    pub(crate) fn line(&self) -> String {
        let Self {
            occurrence_ms,
            attempt,
            replica,
            pid,
            at_us,
        } = self;
        format!("{occurrence_ms} {attempt} {replica} {pid} {at_us}")
    }

    /// Reads back a [`Announcement::line`].
    pub(crate) fn parse(line: &str) -> Result<Self, String> {
        let bad = || format!("malformed run announcement `{line}`");
        let mut fields = line.split(' ');
        let mut next = || fields.next().ok_or_else(bad);
        let announcement = Self {
            occurrence_ms: next()?.parse().map_err(|_| bad())?,
            attempt: next()?.parse().map_err(|_| bad())?,
            replica: next()?.to_owned(),
            pid: next()?.parse().map_err(|_| bad())?,
            at_us: next()?.parse().map_err(|_| bad())?,
        };
        match fields.next() {
            None => Ok(announcement),
            Some(_) => Err(bad()),
        }
    }

    /// Whether it is a long run, the kind the kill phase kills.
    pub(crate) fn is_long(&self) -> bool {
        is_long(self.occurrence_ms, self.attempt)
    }

    /// The number of the replica that runs it (its id is `r<number>`).
    pub(crate) fn replica_number(&self) -> Result<usize, String> {
        self.replica
            .strip_prefix('r')
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| format!("unexpected replica id `{}`", self.replica))
    }
}

/// One attempt of a run, from the ledger (instants in µs, ms resolution).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LedgerAttempt {
    pub(crate) attempt: u32,
    pub(crate) pid: u32,
    /// When it was claimed, by the Redis server's clock.
    pub(crate) started_us: u64,
    /// When it ended, or was found abandoned.
    pub(crate) ended_us: Option<u64>,
    pub(crate) outcome: &'static str,
}

/// A run from the ledger: its attempts, oldest first (the last is the current one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LedgerRun {
    pub(crate) occurrence_ms: i64,
    pub(crate) manual: bool,
    pub(crate) attempts: Vec<LedgerAttempt>,
}

impl LedgerRun {
    /// How the run's current attempt ended.
    pub(crate) fn outcome(&self) -> &'static str {
        self.attempts.last().map_or("missing", |a| a.outcome)
    }

    /// The run as the ledger records it.
    pub(crate) fn of(record: &RunRecord) -> Self {
        let earlier = record.earlier_attempts.iter().map(|a| LedgerAttempt {
            attempt: a.attempt,
            pid: a.pid,
            started_us: us_of(a.started_at),
            ended_us: a.ended_at.map(us_of),
            outcome: code(&a.outcome),
        });
        let current = LedgerAttempt {
            attempt: record.attempt,
            pid: record.pid,
            started_us: us_of(record.started_at),
            ended_us: record.ended_at.map(us_of),
            outcome: code(&record.outcome),
        };
        Self {
            occurrence_ms: record.occurrence.timestamp_millis(),
            manual: record.manual,
            attempts: earlier.chain(std::iter::once(current)).collect(),
        }
    }
}

/// An outcome's short name (the ledger's code).
fn code(outcome: &RunOutcome) -> &'static str {
    match outcome {
        RunOutcome::Running => "running",
        RunOutcome::Succeeded => "succeeded",
        RunOutcome::Failed(_) => "failed",
        RunOutcome::Cancelled(_) => "cancelled",
        RunOutcome::SkippedOverlap => SKIPPED,
        RunOutcome::Abandoned => ABANDONED,
        _ => "other",
    }
}

const SKIPPED: &str = "skipped_overlap";
const ABANDONED: &str = "abandoned";

fn us_of(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// One kill of the replica running a long run, and the replica started in its place.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Kill {
    pub(crate) occurrence_ms: i64,
    /// The killed replica's id (the new process has the same).
    pub(crate) replica: String,
    pub(crate) killed_pid: u32,
    pub(crate) respawned_pid: u32,
    /// The killed run's handler start (its announcement), the SIGKILL, and the new replica
    /// process set up and started (µs).
    pub(crate) started_us: u64,
    pub(crate) killed_us: u64,
    pub(crate) respawned_us: u64,
}

/// What became of one killed run, in ms after the kill.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct KillOutcome {
    pub(crate) kill: Kill,
    /// How the killed occurrence's run ended, over how many attempts.
    pub(crate) outcome: String,
    pub(crate) attempts: u32,
    /// The ledger's first attempt of the occurrence is the killed process's: the kill hit the
    /// run it meant to.
    pub(crate) hit: bool,
    /// Handler starts of the killed occurrence (the killed one included).
    pub(crate) handler_starts: u64,
    /// How far into the run the kill came (handler start → kill).
    pub(crate) into_run_ms: f64,
    /// Kill → the new replica process running.
    pub(crate) respawn_ms: f64,
    /// Kill → the killed attempt recorded abandoned (its lease had lapsed; at least once).
    pub(crate) found_abandoned_ms: Option<f64>,
    /// Kill → attempt 2 claimed (the ledger's claim time), and its handler started.
    pub(crate) retry_claimed_ms: Option<f64>,
    pub(crate) retry_started_ms: Option<f64>,
    /// Whether the new replica process (rather than a survivor) claimed attempt 2.
    pub(crate) retry_by_respawned: Option<bool>,
    /// Kill → the claim of the first later occurrence that ran (was not skipped as an overlap).
    pub(crate) next_ran_ms: Option<f64>,
    pub(crate) next_by_respawned: Option<bool>,
    /// Later occurrences skipped as overlaps before it (the dead replica still held the job).
    pub(crate) skipped: u64,
}

impl KillOutcome {
    /// What the ledger (`runs`) and the announcements say became of `kill`'s run.
    pub(crate) fn of(kill: &Kill, runs: &[LedgerRun], announced: &[Announcement]) -> Self {
        let after = |us: u64| (float(us) - float(kill.killed_us)) / 1e3;
        let run = runs
            .iter()
            .find(|r| !r.manual && r.occurrence_ms == kill.occurrence_ms);
        let first = run.and_then(|r| r.attempts.first());
        let second = run.and_then(|r| r.attempts.get(1));
        let mut later: Vec<&LedgerRun> = runs
            .iter()
            .filter(|r| !r.manual && r.occurrence_ms > kill.occurrence_ms)
            .collect();
        later.sort_by_key(|r| r.occurrence_ms);
        let skipped = later.iter().take_while(|r| r.outcome() == SKIPPED).count();
        let next = later.get(skipped).and_then(|r| r.attempts.first());
        let of_killed = announced
            .iter()
            .filter(|a| a.occurrence_ms == kill.occurrence_ms);
        Self {
            outcome: run.map_or("missing", LedgerRun::outcome).to_owned(),
            attempts: run.and_then(|r| r.attempts.last()).map_or(0, |a| a.attempt),
            hit: first.is_some_and(|a| a.attempt == 1 && a.pid == kill.killed_pid),
            handler_starts: count(of_killed.clone().count()),
            into_run_ms: (float(kill.killed_us) - float(kill.started_us)) / 1e3,
            respawn_ms: after(kill.respawned_us),
            found_abandoned_ms: first
                .filter(|a| a.outcome == ABANDONED)
                .and_then(|a| a.ended_us)
                .map(after),
            retry_claimed_ms: second.map(|a| after(a.started_us)),
            retry_started_ms: of_killed
                .filter(|a| a.attempt == 2)
                .map(|a| after(a.at_us))
                .next(),
            retry_by_respawned: second.map(|a| a.pid == kill.respawned_pid),
            next_ran_ms: next.map(|a| after(a.started_us)),
            next_by_respawned: next.map(|a| a.pid == kill.respawned_pid),
            skipped: count(skipped),
            kill: kill.clone(),
        }
    }

    /// The killed occurrence ran again and succeeded (at least once).
    pub(crate) fn run_again(&self) -> bool {
        self.outcome == "succeeded" && self.attempts >= 2
    }

    /// The killed occurrence was left abandoned and never started again (at most once).
    pub(crate) fn left_abandoned(&self) -> bool {
        self.outcome == ABANDONED && self.attempts == 1 && self.handler_starts == 1
    }
}

/// Fewest, median (nearest rank) and most of some samples, ms; NaN without samples.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Spread {
    pub(crate) samples: u64,
    pub(crate) min_ms: f64,
    pub(crate) p50_ms: f64,
    pub(crate) max_ms: f64,
}

impl Spread {
    pub(crate) fn of(values: impl IntoIterator<Item = f64>) -> Self {
        let mut ms: Vec<f64> = values.into_iter().collect();
        ms.sort_by(f64::total_cmp);
        Self {
            samples: count(ms.len()),
            min_ms: ms.first().copied().unwrap_or(f64::NAN),
            p50_ms: nearest_rank(&ms, 50.0).unwrap_or(f64::NAN),
            max_ms: ms.last().copied().unwrap_or(f64::NAN),
        }
    }
}

/// The kills of one delivery mode, summed up.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct KillSummary {
    pub(crate) kills: u64,
    /// Kills whose run is the ledger's first attempt of its occurrence.
    pub(crate) hit: u64,
    /// Killed occurrences that ran again and succeeded.
    pub(crate) run_again: u64,
    /// Killed occurrences left abandoned, never started again.
    pub(crate) left_abandoned: u64,
    pub(crate) into_run: Spread,
    pub(crate) respawn: Spread,
    pub(crate) found_abandoned: Spread,
    pub(crate) retry_claimed: Spread,
    pub(crate) retry_started: Spread,
    /// Attempts 2 claimed by the new replica process (of those claimed at all).
    pub(crate) retries_by_respawned: u64,
    pub(crate) next_ran: Spread,
    pub(crate) next_by_respawned: u64,
    /// Later occurrences skipped as overlaps after a kill, in all.
    pub(crate) skipped: u64,
}

impl KillSummary {
    pub(crate) fn of(outcomes: &[KillOutcome]) -> Self {
        let spread = |f: fn(&KillOutcome) -> Option<f64>| Spread::of(outcomes.iter().filter_map(f));
        let counted = |f: fn(&KillOutcome) -> bool| count(outcomes.iter().filter(|o| f(o)).count());
        Self {
            kills: count(outcomes.len()),
            hit: counted(|o| o.hit),
            run_again: counted(KillOutcome::run_again),
            left_abandoned: counted(KillOutcome::left_abandoned),
            into_run: spread(|o| Some(o.into_run_ms)),
            respawn: spread(|o| Some(o.respawn_ms)),
            found_abandoned: spread(|o| o.found_abandoned_ms),
            retry_claimed: spread(|o| o.retry_claimed_ms),
            retry_started: spread(|o| o.retry_started_ms),
            retries_by_respawned: counted(|o| o.retry_by_respawned == Some(true)),
            next_ran: spread(|o| o.next_ran_ms),
            next_by_respawned: counted(|o| o.next_by_respawned == Some(true)),
            skipped: outcomes.iter().map(|o| o.skipped).sum(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announcements_round_trip_and_know_long_runs() {
        let a = Announcement {
            occurrence_ms: 1_700_000_004_000,
            attempt: 1,
            replica: "r2".into(),
            pid: 4242,
            at_us: 1_700_000_004_003_123,
        };
        assert_eq!(Announcement::parse(&a.line()), Ok(a.clone()));
        assert!(a.is_long());
        assert_eq!(a.replica_number(), Ok(2));
        let retry = Announcement {
            attempt: 2,
            ..a.clone()
        };
        assert!(!retry.is_long());
        assert!(!is_long(1_700_000_005_000, 1));
        for bad in ["", "1 2 r0 3", "1 2 r0 3 4 5", "x 1 r0 3 4"] {
            assert!(Announcement::parse(bad).is_err(), "{bad}");
        }
        let odd = Announcement {
            replica: "host:1".into(),
            ..a
        };
        assert!(odd.replica_number().is_err());
    }

    fn attempt(
        n: u32,
        pid: u32,
        started_ms: u64,
        ended_ms: Option<u64>,
        outcome: &'static str,
    ) -> LedgerAttempt {
        LedgerAttempt {
            attempt: n,
            pid,
            started_us: started_ms * 1_000,
            ended_us: ended_ms.map(|ms| ms * 1_000),
            outcome,
        }
    }

    fn run(occurrence_ms: i64, attempts: Vec<LedgerAttempt>) -> LedgerRun {
        LedgerRun {
            occurrence_ms,
            manual: false,
            attempts,
        }
    }

    fn kill() -> Kill {
        Kill {
            occurrence_ms: 8_000,
            replica: "r1".into(),
            killed_pid: 11,
            respawned_pid: 21,
            started_us: 8_003_000,
            killed_us: 8_503_000,
            respawned_us: 8_543_000,
        }
    }

    #[test]
    fn a_retried_kill_is_timed_from_the_ledger_and_the_announcements() {
        // Killed at 8.503 s; its lease lapsed and was found at 9.370 s; attempt 2 claimed by
        // the respawned replica at 9.572 s, its handler started at 9.575 s. Occurrence 9 was
        // skipped (the dead replica's lock), 10 ran on a survivor.
        let runs = vec![
            run(7_000, vec![attempt(1, 12, 7_001, Some(7_002), "succeeded")]),
            run(
                8_000,
                vec![
                    attempt(1, 11, 8_001, Some(9_370), "abandoned"),
                    attempt(2, 21, 9_572, Some(9_580), "succeeded"),
                ],
            ),
            run(
                9_000,
                vec![attempt(1, 13, 9_001, Some(9_001), "skipped_overlap")],
            ),
            run(
                10_000,
                vec![attempt(1, 12, 10_002, Some(10_003), "succeeded")],
            ),
        ];
        let k = kill();
        let announced = vec![
            Announcement {
                occurrence_ms: 8_000,
                attempt: 1,
                replica: "r1".into(),
                pid: 11,
                at_us: 8_003_000,
            },
            Announcement {
                occurrence_ms: 8_000,
                attempt: 2,
                replica: "r1".into(),
                pid: 21,
                at_us: 9_575_000,
            },
        ];
        let o = KillOutcome::of(&k, &runs, &announced);
        assert!(o.hit && o.run_again() && !o.left_abandoned());
        assert_eq!(
            (o.outcome.as_str(), o.attempts, o.handler_starts),
            ("succeeded", 2, 2)
        );
        assert!((o.into_run_ms - 500.0).abs() < 1e-9);
        assert!((o.respawn_ms - 40.0).abs() < 1e-9);
        assert_eq!(o.found_abandoned_ms, Some(867.0));
        assert_eq!(o.retry_claimed_ms, Some(1_069.0));
        assert_eq!(o.retry_started_ms, Some(1_072.0));
        assert_eq!(o.retry_by_respawned, Some(true));
        assert_eq!(
            (o.next_ran_ms, o.next_by_respawned, o.skipped),
            (Some(1_499.0), Some(false), 1)
        );
    }

    #[test]
    fn an_abandoned_kill_is_not_run_again_and_the_next_occurrence_is_timed() {
        let runs = vec![
            run(8_000, vec![attempt(1, 11, 8_001, None, "abandoned")]),
            run(
                9_000,
                vec![attempt(1, 13, 9_001, Some(9_001), "skipped_overlap")],
            ),
            run(
                10_000,
                vec![attempt(1, 21, 10_001, Some(10_002), "succeeded")],
            ),
        ];
        let announced = vec![Announcement {
            occurrence_ms: 8_000,
            attempt: 1,
            replica: "r1".into(),
            pid: 11,
            at_us: 8_003_000,
        }];
        let o = KillOutcome::of(&kill(), &runs, &announced);
        assert!(o.hit && o.left_abandoned() && !o.run_again());
        assert_eq!(
            (o.found_abandoned_ms, o.retry_claimed_ms, o.retry_started_ms),
            (None, None, None)
        );
        assert_eq!(
            (o.next_ran_ms, o.next_by_respawned),
            (Some(1_498.0), Some(true))
        );
        // A kill whose run is not in the ledger missed.
        let missed = KillOutcome::of(&kill(), &runs[1..], &announced);
        assert!(!missed.hit && !missed.left_abandoned());
        assert_eq!(missed.outcome, "missing");
    }

    #[test]
    fn summaries_count_and_spread() {
        let s = Spread::of([3.0, 1.0, 2.0, 10.0]);
        assert_eq!(
            (s.samples, s.min_ms, s.p50_ms, s.max_ms),
            (4, 1.0, 2.0, 10.0)
        );
        assert!(Spread::of([]).p50_ms.is_nan());
        let runs = vec![run(8_000, vec![attempt(1, 11, 8_001, None, "abandoned")])];
        let announced = [];
        let o = KillOutcome::of(&kill(), &runs, &announced);
        let summary = KillSummary::of(&[o.clone(), o]);
        assert_eq!((summary.kills, summary.hit, summary.run_again), (2, 2, 0));
        // No handler start was announced: not counted as left abandoned (the kill is unexplained).
        assert_eq!(summary.left_abandoned, 0);
        assert_eq!(summary.next_ran.samples, 0);
        assert_eq!(summary.into_run.p50_ms, 500.0);
    }
}
