//! What the pair workloads (W1, W1 1-CPU, W2, the last two on either runtime) share: the figures of one measured window for one
//! subject ([`PairResult`]), the timed loop of sequential pairs, and how a pair workload shows in
//! the report ([`PairRun`]: a column and ratios per figure, a command row per subject, and the
//! throughput targets).

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::redis_stats::{PerCommand, PerOp, Plain, WindowDelta};
use crate::report::{Column, CommandRow, Entry, Figure, Section, Target};
use crate::rt::{BoxError, elapsed_ns};
use crate::stats::{count, ns_to_s, p50_p99_us, per_second};
use crate::subject::{Fence, Subject};
use crate::subjects::Kind;
use crate::table::{int, times};

/// Measures each of `subjects` `rounds` times with `one` and keeps, for each, the round with its
/// median rate. Round `r` starts at the `r`-th subject and wraps around, so every subject runs in
/// every position; a drift of the machine (another process, the CPU's clock) over a stage then
/// falls on every subject alike instead of on whichever runs last. Results keep `subjects`' order.
///
/// # Errors
/// The first error of `one`.
pub(crate) fn median_of_rounds(
    subjects: &[Kind],
    rounds: usize,
    mut one: impl FnMut(Kind) -> Result<PairResult, BoxError>,
) -> Result<Vec<PairResult>, BoxError> {
    let mut by_subject: Vec<Vec<PairResult>> = subjects.iter().map(|_| Vec::new()).collect();
    for round in 0..rounds.max(1) {
        for i in (0..subjects.len()).map(|i| (i + round) % subjects.len()) {
            by_subject[i].push(one(subjects[i])?);
        }
    }
    Ok(by_subject.into_iter().map(median_by_rate).collect())
}

/// The result with the median rate (the lower median of an even count).
fn median_by_rate(mut results: Vec<PairResult>) -> PairResult {
    results.sort_by(|a, b| a.pairs_per_s.total_cmp(&b.pairs_per_s));
    results.swap_remove((results.len() - 1) / 2)
}

/// The measured window of a pair workload (W1, W2) for one subject.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct PairResult {
    pub(crate) subject: Kind,
    pub(crate) pairs: u64,
    pub(crate) elapsed_s: f64,
    pub(crate) pairs_per_s: f64,
    /// Latency of one pair (acquire + release), nearest rank.
    pub(crate) p50_us: f64,
    pub(crate) p99_us: f64,
    /// Commands, round trips, server and client CPU per pair.
    pub(crate) per_pair: PerOp,
    /// `INFO commandstats` delta of the window.
    pub(crate) commands: PerCommand,
    /// Server time per command in the window (µs; a script's includes its inner commands').
    pub(crate) usec: PerCommand,
}

impl PairResult {
    /// Builds the result of `subject` from per-pair latencies (ns), the window's length and its
    /// counters; `own_plain` is the subject's [`Subject::OWN_PLAIN`].
    pub(crate) fn new(
        subject: Kind,
        own_plain: Plain,
        latencies: &mut [u64],
        window_ns: u64,
        window: WindowDelta,
    ) -> PairResult {
        let pairs = count(latencies.len());
        let (p50_us, p99_us) = p50_p99_us(latencies);
        PairResult {
            subject,
            pairs,
            elapsed_s: ns_to_s(window_ns),
            pairs_per_s: per_second(pairs, window_ns),
            p50_us,
            p99_us,
            per_pair: PerOp::of(&window, pairs, own_plain),
            commands: window.commands,
            usec: window.usec,
        }
    }
}

/// The timed loop of the pair workloads: one pair per name (reading the fence if `fence` says so) (formatted before the window opens),
/// one after the other. Returns each pair's latency (ns) in `latencies`, which the caller
/// allocates beforehand so that no allocation of the benchmark's own falls inside the window.
pub(crate) async fn timed_pairs<S: Subject>(
    subject: &S,
    names: &[String],
    fence: Fence,
    mut latencies: Vec<u64>,
) -> Result<Vec<u64>, BoxError> {
    for name in names {
        let t = Instant::now();
        subject.pair(name, fence).await?;
        latencies.push(elapsed_ns(t));
    }
    Ok(latencies)
}

/// The names `{prefix}{i}` for `i` in `range`, and room for as many latencies: what
/// [`timed_pairs`] needs, made before the window opens.
pub(crate) fn names(prefix: &str, range: std::ops::Range<u64>) -> (Vec<String>, Vec<u64>) {
    let names: Vec<String> = range.map(|i| format!("{prefix}{i}")).collect();
    let latencies = Vec::with_capacity(names.len());
    (names, latencies)
}

/// The result of `kind` among `results`.
pub(crate) fn of(results: &[PairResult], kind: Kind) -> Option<&PairResult> {
    results.iter().find(|r| r.subject == kind)
}

/// How a pair workload shows in the report.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    /// The workload's name in the report ("W1", "W1 1-CPU", "W2 current-thread" …).
    pub(crate) label: &'static str,
    /// Whether the report shows the latency percentiles (W1: one pair at a time).
    pub(crate) latency: bool,
    /// The targets on the subject under test's pairs/s ÷ another subject's.
    pub(crate) targets: &'static [RateTarget],
}

/// A target on subject `of`'s pairs/s ÷ those of subject `to`: what is wanted, and the least
/// ratio that meets it. Checked only when both subjects ran.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RateTarget {
    pub(crate) of: Kind,
    pub(crate) to: Kind,
    pub(crate) wanted: &'static str,
    pub(crate) least: f64,
}

/// Issue #13's target for the uncontended workloads: at least rslock's rate in the same run.
pub(crate) const AT_LEAST_RSLOCK: RateTarget = RateTarget {
    of: Kind::UNDER_TEST,
    to: Kind::Rslock,
    wanted: "≥ 1 × rslock",
    least: 1.0,
};

impl Shape {
    /// The results of this workload, under `key` in results.json.
    pub(crate) fn entry(
        self,
        key: &'static str,
        results: Vec<PairResult>,
    ) -> Result<Entry, BoxError> {
        Entry::new(
            key,
            PairRun {
                shape: self,
                results,
            },
        )
    }
}

/// One pair workload (W1, W1 1-CPU, W2 …) measured for every subject, as the report shows it.
#[derive(Debug, Serialize)]
pub(crate) struct PairRun {
    #[serde(skip)]
    shape: Shape,
    results: Vec<PairResult>,
}

impl PairRun {
    fn cells(&self, f: impl Fn(&PairResult) -> String) -> Vec<(Kind, String)> {
        self.results.iter().map(|r| (r.subject, f(r))).collect()
    }

    fn figure(&self, name: &str, f: impl Fn(&PairResult) -> f64) -> Figure {
        let values = self.results.iter().map(|r| (r.subject, f(r))).collect();
        let name = format!("{} {name}", self.shape.label);
        Figure { name, values }
    }
}

impl Section for PairRun {
    fn columns(&self) -> Vec<Column> {
        let label = self.shape.label;
        let mut columns = vec![Column::new(
            format!("{label} pairs/s"),
            self.cells(|r| int(r.pairs_per_s)),
        )];
        if self.shape.latency {
            let cells = self.cells(|r| format!("{:.1} / {:.1}", r.p50_us, r.p99_us));
            columns.push(Column::new(format!("{label} p50/p99 µs"), cells));
        }
        columns
    }

    fn figures(&self) -> Vec<Figure> {
        let mut figures = vec![self.figure("pairs/s", |r| r.pairs_per_s)];
        if self.shape.latency {
            figures.push(self.figure("p50 latency", |r| r.p50_us));
            figures.push(self.figure("p99 latency", |r| r.p99_us));
        }
        figures
    }

    fn command_rows(&self) -> Vec<CommandRow> {
        let row = |r: &PairResult| CommandRow {
            workload: format!("{} (per pair)", self.shape.label),
            subject: r.subject,
            per_op: r.per_pair.clone(),
            commands: r.commands.clone(),
        };
        self.results.iter().map(row).collect()
    }

    fn targets(&self) -> Vec<Target> {
        let rate = |kind| of(&self.results, kind).map(|r| r.pairs_per_s);
        let check = |t: &RateTarget| {
            let ratio = rate(t.of)? / rate(t.to)?;
            let name = if t.of == Kind::UNDER_TEST {
                format!("{} pairs/s ÷ {}", self.shape.label, t.to.label())
            } else {
                let of = t.of.label();
                format!("{} pairs/s of {of} ÷ {}", self.shape.label, t.to.label())
            };
            Some(Target::new(
                name,
                t.wanted,
                times(Some(ratio)),
                ratio >= t.least,
            ))
        };
        self.shape.targets.iter().filter_map(check).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(subject: Kind, pairs_per_s: f64) -> PairResult {
        let mut latencies = [1_000, 3_000];
        let window = WindowDelta::default();
        PairResult {
            pairs_per_s,
            ..PairResult::new(subject, Plain::NONE, &mut latencies, 1, window)
        }
    }

    const W2: Shape = Shape {
        label: "W2",
        latency: false,
        targets: &[
            AT_LEAST_RSLOCK,
            RateTarget {
                of: Kind::UNDER_TEST,
                to: Kind::Floor,
                wanted: "≥ 0.8 × floor",
                least: 0.8,
            },
        ],
    };

    #[test]
    fn rounds_rotate_the_order_and_keep_each_subjects_median() {
        let subjects = [Kind::Floor, Kind::Rslock, Kind::Dlock];
        let mut order = Vec::new();
        // Each subject's rate grows by 10 per round it has run, plus its own offset.
        let mut runs = [0.0; 3];
        let results = median_of_rounds(&subjects, 3, |kind| {
            order.push(kind);
            let i = subjects.iter().position(|&k| k == kind).unwrap();
            let rate = [100.0, 50.0, 10.0][i] + [30.0, 0.0, 60.0][runs[i] as usize];
            runs[i] += 1.0;
            Ok(result(kind, rate))
        })
        .unwrap();
        use Kind::{Dlock, Floor, Rslock};
        let expected_order = [
            [Floor, Rslock, Dlock],
            [Rslock, Dlock, Floor],
            [Dlock, Floor, Rslock],
        ];
        assert_eq!(order, expected_order.concat());
        let kept: Vec<(Kind, f64)> = results.iter().map(|r| (r.subject, r.pairs_per_s)).collect();
        assert_eq!(kept, [(Floor, 130.0), (Rslock, 80.0), (Dlock, 40.0)]);
    }

    #[test]
    fn one_round_is_the_measurement_itself() {
        let results = median_of_rounds(&[Kind::Dlock], 1, |kind| Ok(result(kind, 7.0))).unwrap();
        assert_eq!(results.len(), 1);
        assert_eq!(results[0].pairs_per_s, 7.0);
    }

    fn w2(dlock: f64) -> PairRun {
        let results = vec![result(Kind::Floor, 100.0), result(Kind::Dlock, dlock)];
        PairRun { shape: W2, results }
    }

    #[test]
    fn targets_are_ratios_to_the_subjects_they_name_when_both_ran() {
        // rslock did not run: only the floor's target is checked.
        let met = w2(85.0).targets();
        assert_eq!(met.len(), 1);
        assert_eq!(met[0].name, "W2 pairs/s ÷ raw floor (redis defaults)");
        assert_eq!(met[0].measured, "0.85×");
        assert!(met[0].met);
        assert!(!w2(75.0).targets()[0].met);
        let mut run = w2(85.0);
        run.results.push(result(Kind::Rslock, 90.0));
        let checked: Vec<(String, bool)> = run
            .targets()
            .into_iter()
            .map(|t| (t.measured, t.met))
            .collect();
        assert_eq!(checked, [("0.94×".into(), false), ("0.85×".into(), true)]);
    }

    #[test]
    fn latency_columns_only_where_asked() {
        let run = w2(90.0);
        assert_eq!(run.columns().len(), 1);
        assert_eq!(run.figures()[0].name, "W2 pairs/s");
        let shape = Shape {
            label: "W1",
            latency: true,
            targets: &[],
        };
        let w1 = PairRun { shape, ..run };
        let headers: Vec<String> = w1.columns().into_iter().map(|c| c.header).collect();
        assert_eq!(headers, ["W1 pairs/s", "W1 p50/p99 µs"]);
        assert_eq!(w1.figures().len(), 3);
        assert_eq!(w1.command_rows().len(), 2);
        assert!(w1.targets().is_empty());
    }
}
