//! Scheduler workload (issue #6), the parent side: 3 replica processes
//! (`dlock-bench sched-replica`, see [`crate::sched_replica`]) run the same 1-second cron job;
//! how late does each occurrence start, who runs it, does it run exactly once, and what does an
//! occurrence cost in Redis commands and client round trips per replica?
//!
//! One row per set of clock skews ([`SCHED_SKEWS`]: none, then −300 / 0 / +500 ms), each after a
//! `FLUSHALL`, with its own job name. The parent starts the replicas together (`GO`), lets them
//! run [`SCHED_WARMUP`] (their first occurrences load the scheduler's scripts), then opens the
//! measured window at the next whole second + 400 ms by the wall clock and closes it 20 s later
//! (at + 400 ms again): the window holds exactly the requests of the 20 occurrences whose nominal
//! instants fall inside it, since one occurrence's requests run from 500 ms before its instant (a
//! replica 500 ms ahead asks early and is told to wait) to ~300 ms after it (a replica 300 ms
//! late). Then it stops the replicas (`STOP`: graceful shutdown) and reads:
//!
//! * the run ledger (`Scheduler::history`, 100 runs kept, plenty for ~25 runs): the **fire
//!   delay** `start_delay()` = start by the Redis server's clock − nominal instant (ms
//!   resolution) of every occurrence in the window, and which replica ran it;
//! * the handler's per-occurrence counters: every occurrence of the window, and of the whole
//!   run, ran exactly once; the ledger and the counters name the same occurrences;
//! * `INFO commandstats` over the window, less the handler's `INCR`s: Redis commands and client
//!   round trips (`EVALSHA` + the `LPOP` of the `run_now` poll, the only plain command the
//!   scheduler sends while running) per occurrence per replica, and their breakdown
//!   ([`Breakdown`]).
//!
//! Its section of the report: a timing-and-correctness table and a cost table, a row per set of
//! skews, and the exactly-once target.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use dlock_scheduler::{RunOutcome, RunRecord, Scheduler};
use serde::{Deserialize, Serialize};

use crate::child::{GO, Group, STOP, args};
use crate::control::Control;
use crate::dlock::client;
use crate::redis_stats::{PerCommand, Snapshot, WindowDelta, idle_server_cpu_ms_per_s};
use crate::report::{Entry, Section, Target};
use crate::rt::{BoxError, current_thread_runtime, elapsed_ns};
use crate::sched_replica::{ReplicaReport, count_prefix};
use crate::sched_stats::{
    Breakdown, DelaySummary, OnceSummary, distribution, next_edge, seconds_between,
};
use crate::spec::{Counts, SCHED_EDGE_MS, SCHED_REPLICAS, SCHED_SKEWS, SCHED_WARMUP};
use crate::stats::{count, float, millis, ns_to_s, ratio};
use crate::subjects::Setting;
use crate::table::{Col, NONE, joined, table_of};

/// How long redis-server's idle CPU is measured before the replicas start.
const IDLE_SPAN: std::time::Duration = std::time::Duration::from_secs(2);

/// Both rows of the scheduler workload.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct SchedResult {
    pub(crate) rows: Vec<SchedRow>,
}

/// One set of replicas (one set of clock skews), measured over one window.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct SchedRow {
    pub(crate) skews_ms: Vec<i64>,
    pub(crate) job: String,
    pub(crate) window_s: f64,
    /// Occurrences whose nominal instant is inside the window.
    pub(crate) occurrences: u64,
    /// Fire delays of those occurrences (ledger).
    pub(crate) delay: DelaySummary,
    /// Who ran them (ledger): replica id → runs.
    pub(crate) winners: BTreeMap<String, u64>,
    /// How often each of them ran (counters).
    pub(crate) once: OnceSummary,
    /// The same over the whole run, from the first to the last occurrence that ran.
    pub(crate) whole_run: OnceSummary,
    /// Occurrences in the ledger but not in the counters, or the other way round (whole run).
    pub(crate) ledger_mismatches: u64,
    /// Runs of the window whose outcome is not `succeeded`.
    pub(crate) not_succeeded: u64,
    pub(crate) costs: Costs,
    /// `INFO commandstats` delta of the window, less the handler's `INCR`s.
    pub(crate) commands: PerCommand,
    /// Server time per command in the window (µs; a script's includes its inner commands').
    pub(crate) usec: PerCommand,
    pub(crate) replicas: Vec<ReplicaReport>,
}

/// What an occurrence costs, over the window.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Costs {
    pub(crate) commands_per_occurrence_per_replica: f64,
    pub(crate) round_trips_per_occurrence_per_replica: f64,
    pub(crate) breakdown: Option<Breakdown>,
    /// redis-server CPU per occurrence (all replicas' requests), µs.
    pub(crate) server_cpu_us_per_occurrence: f64,
    /// Server time in what the replicas sent per occurrence (`usec`, scripts and `LPOP`), µs.
    pub(crate) server_us_in_commands_per_occurrence: f64,
    /// redis-server CPU per second before the replicas started (nothing sent), ms/s: a
    /// baseline included in `server_cpu_us_per_occurrence` (one occurrence per second).
    pub(crate) server_idle_cpu_ms_per_s: f64,
    /// Mean CPU of one replica process per second of running (= per occurrence), ms.
    pub(crate) client_cpu_ms_per_replica_per_s: f64,
}

impl Costs {
    /// The costs of `occurrences` occurrences from the window's `commands` (less the handler's
    /// `INCR`s), its server CPU and the replicas' reports.
    fn compute(
        commands: &PerCommand,
        occurrences: u64,
        delta: &WindowDelta,
        replicas: &[ReplicaReport],
        server_idle_cpu_ms_per_s: f64,
    ) -> Self {
        let per_replica = occurrences * u64::from(SCHED_REPLICAS);
        let polls = commands.get("lpop");
        let cpu_ms_per_s: f64 = replicas
            .iter()
            .map(|r| float(r.cpu_us) / 1e3 / r.run_s)
            .sum();
        let replica_count = count(replicas.len());
        Self {
            commands_per_occurrence_per_replica: ratio(commands.total(), per_replica),
            round_trips_per_occurrence_per_replica: ratio(commands.round_trips(polls), per_replica),
            breakdown: Breakdown::infer(commands, occurrences, SCHED_REPLICAS),
            server_cpu_us_per_occurrence: ratio(delta.server_cpu_us, occurrences),
            server_us_in_commands_per_occurrence: ratio(
                delta.usec.client_usec(&["lpop"]),
                occurrences,
            ),
            server_idle_cpu_ms_per_s,
            client_cpu_ms_per_replica_per_s: cpu_ms_per_s / float(replica_count),
        }
    }
}

/// "0 / 0 / 0 ms" or "−300 / 0 / +500 ms".
fn skew_label(skews_ms: &[i64]) -> String {
    let one = |s: &i64| match *s {
        0 => "0".to_owned(),
        s if s > 0 => format!("+{s}"),
        s => format!("−{}", s.unsigned_abs()),
    };
    format!("{} ms", joined(skews_ms, " / ", one))
}

/// Runs one row per set of skews.
pub(crate) fn run(s: &Setting) -> Result<Entry, BoxError> {
    let (url, counts) = (s.url.as_str(), &s.counts);
    let mut rows = Vec::new();
    for (i, skews) in SCHED_SKEWS.iter().enumerate() {
        eprintln!("  replicas with clock skews {skews:?} ms …");
        rows.push(run_row(url, counts, skews, &format!("tick{i}"))?);
    }
    Entry::new("sched", SchedResult { rows })
}

/// What the parent gathered for one row, before the figures are computed.
pub(crate) struct Observed {
    skews_ms: Vec<i64>,
    job: String,
    /// The window's edges, Unix ms (wall clock).
    pub(crate) window_ms: (u64, u64),
    window_ns: u64,
    delta: WindowDelta,
    server_idle_cpu_ms_per_s: f64,
    replicas: Vec<ReplicaReport>,
    /// The job's ledger after the replicas stopped.
    pub(crate) history: Vec<RunRecord>,
    counters: BTreeMap<i64, u64>,
}

fn run_row(url: &str, counts: &Counts, skews: &[i64], job: &str) -> Result<SchedRow, BoxError> {
    Ok(summarize(observe(url, counts, skews, job, &[])?))
}

/// One row's run: replicas with clock `skews` run `job` (`replica_args`: more arguments of
/// every `sched-replica`, e.g. its delivery) through one measured window.
pub(crate) fn observe(
    url: &str,
    counts: &Counts,
    skews: &[i64],
    job: &str,
    replica_args: &[&str],
) -> Result<Observed, BoxError> {
    let runtime = current_thread_runtime()?;
    let mut control = runtime.block_on(Control::fresh(url))?;
    let server_idle_cpu_ms_per_s =
        runtime.block_on(idle_server_cpu_ms_per_s(&mut control, IDLE_SPAN))?;
    let mut replicas = Group::ready(skews.iter().enumerate().map(|(replica, skew)| {
        let (replica, skew) = (replica.to_string(), skew.to_string());
        let mut extra = vec!["--process", &replica, "--skew-ms", &skew, "--job", job];
        extra.extend_from_slice(replica_args);
        args("sched-replica", url, &Counts::FULL, &extra)
    }))?;
    replicas.send(GO)?;
    let start_ms = next_edge(wall_ms()? + millis(SCHED_WARMUP), SCHED_EDGE_MS);
    sleep_until_wall(start_ms)?;
    let before = runtime.block_on(Snapshot::take(&mut control))?;
    let start = Instant::now();
    let end_ms = start_ms + counts.sched_occurrences * 1_000;
    sleep_until_wall(end_ms)?;
    let window_ns = elapsed_ns(start);
    let delta = runtime.block_on(before.delta(&mut control))?;
    replicas.send(STOP)?;
    let replicas = replicas.results::<ReplicaReport>()?;
    let (history, counters) = runtime.block_on(read_outcome(url, &mut control, job))?;
    Ok(Observed {
        skews_ms: skews.to_vec(),
        job: job.to_owned(),
        window_ms: (start_ms, end_ms),
        window_ns,
        delta,
        server_idle_cpu_ms_per_s,
        replicas,
        history,
        counters,
    })
}

/// The job's ledger and its per-occurrence counters (occurrence ms → runs).
pub(crate) async fn read_outcome(
    url: &str,
    control: &mut Control,
    job: &str,
) -> Result<(Vec<RunRecord>, BTreeMap<i64, u64>), BoxError> {
    let history = Scheduler::builder(client(url)?).build()?;
    let history = history.history(job).await?;
    let prefix = count_prefix(job);
    let mut counters = BTreeMap::new();
    for (key, runs) in control.int_keys(&format!("{prefix}*")).await? {
        let occurrence: i64 = key
            .strip_prefix(&prefix)
            .and_then(|ms| ms.parse().ok())
            .ok_or_else(|| format!("unexpected counter key `{key}`"))?;
        counters.insert(occurrence, runs);
    }
    Ok((history, counters))
}

/// The figures of one row.
pub(crate) fn summarize(o: Observed) -> SchedRow {
    let seconds = seconds_between(o.window_ms.0, o.window_ms.1);
    let in_window: BTreeSet<i64> = seconds.iter().copied().collect();
    let scheduled: Vec<&RunRecord> = o.history.iter().filter(|r| !r.manual).collect();
    let window_runs: Vec<&RunRecord> = scheduled
        .iter()
        .copied()
        .filter(|r| in_window.contains(&r.occurrence.timestamp_millis()))
        .collect();
    let delays: Vec<Option<u64>> = window_runs
        .iter()
        .map(|r| r.start_delay().map(millis))
        .collect();
    let (first, last) = (seconds.first().copied(), seconds.last().copied());
    let once = OnceSummary::of(&o.counters, first.unwrap_or(0), last.unwrap_or(-1));
    let whole_run = match (o.counters.keys().next(), o.counters.keys().last()) {
        (Some(&a), Some(&b)) => OnceSummary::of(&o.counters, a, b),
        _ => OnceSummary::default(),
    };
    let ledger: BTreeSet<i64> = scheduled
        .iter()
        .map(|r| r.occurrence.timestamp_millis())
        .collect();
    let counted: BTreeSet<i64> = o.counters.keys().copied().collect();
    let handler_incr: u64 = seconds.iter().filter_map(|s| o.counters.get(s)).sum();
    let mut commands = o.delta.commands.clone();
    commands.subtract("incr", handler_incr);
    let occurrences = count(seconds.len());
    let not_succeeded = window_runs
        .iter()
        .filter(|r| r.outcome != RunOutcome::Succeeded)
        .count();
    SchedRow {
        costs: Costs::compute(
            &commands,
            occurrences,
            &o.delta,
            &o.replicas,
            o.server_idle_cpu_ms_per_s,
        ),
        skews_ms: o.skews_ms,
        job: o.job,
        window_s: ns_to_s(o.window_ns),
        occurrences,
        delay: DelaySummary::of(&delays),
        winners: distribution(window_runs.iter().map(|r| r.replica.as_str())),
        once,
        whole_run,
        ledger_mismatches: count(ledger.symmetric_difference(&counted).count()),
        not_succeeded: count(not_succeeded),
        commands,
        usec: o.delta.usec,
        replicas: o.replicas,
    }
}

/// The scheduler section's introduction.
const INTRO: &str = "3 replica processes (`Scheduler`, default options, replica ids r0 r1 r2), one \
    job `* * * * * *` (UTC) whose handler does one `INCR`. Window: the occurrences whose nominal \
    instant falls inside it, edges at whole second + 400 ms. Fire delay = \
    `RunRecord::start_delay()` (start by the Redis server's clock − nominal instant, ms \
    resolution).";

impl Section for SchedResult {
    /// Timing and correctness per row, then cost per row, then each row's commands.
    fn details(&self, out: &mut String) {
        let _ = writeln!(out, "### Scheduler: 3 replicas, 1-second cron (issue #6)\n");
        let _ = writeln!(out, "{INTRO}\n");
        table_of(out, "lrrrlrrl", &TIMING, &self.rows);
        table_of(out, "lrrrrrrrrr", &COSTS, &self.rows);
        for row in &self.rows {
            let _ = writeln!(
                out,
                "Commands in the window ({}, less the handler's `INCR`): {}  ",
                skew_label(&row.skews_ms),
                row.commands.summary()
            );
        }
        out.push('\n');
    }

    fn targets(&self) -> Vec<Target> {
        let once = joined(&self.rows, ", ", |r| {
            format!("{} of {}", r.once.once, r.once.occurrences)
        });
        let ok = !self.rows.is_empty()
            && self.rows.iter().all(|r| {
                r.once.exact()
                    && r.whole_run.repeated == 0
                    && r.whole_run.missed == 0
                    && r.ledger_mismatches == 0
            });
        let name = "scheduler: occurrences run exactly once (each row)";
        vec![Target::new(name, "all", once, ok)]
    }
}

/// The scheduler's timing-and-correctness table, a row per set of skews.
const TIMING: [Col<SchedRow>; 8] = [
    ("replica clock skews (r0 / r1 / r2)", |r| {
        skew_label(&r.skews_ms)
    }),
    ("occurrences", |r| r.occurrences.to_string()),
    ("fire delay p50 / p99 / max ms", |r| {
        let d = &r.delay;
        format!("{:.0} / {:.0} / {:.0}", d.p50_ms, d.p99_ms, d.max_ms)
    }),
    ("started early", |r| r.delay.early.to_string()),
    ("ran by r0 / r1 / r2", |r| {
        joined(&["r0", "r1", "r2"], " / ", |id| {
            r.winners.get(*id).copied().unwrap_or(0).to_string()
        })
    }),
    ("ran exactly once (window)", |r| {
        format!("{} of {}", r.once.once, r.once.occurrences)
    }),
    ("whole run: once / more / missed", |r| {
        let w = &r.whole_run;
        format!("{} / {} / {}", w.once, w.repeated, w.missed)
    }),
    ("ledger = counters", agreement),
];

/// Whether the ledger and the counters name the same occurrences, and every run succeeded.
pub(crate) fn agreement(row: &SchedRow) -> String {
    let mut text = if row.ledger_mismatches == 0 {
        "yes".to_owned()
    } else {
        format!("**no** ({} differ)", row.ledger_mismatches)
    };
    if row.not_succeeded > 0 {
        text.push_str(&format!("; **{} runs did not succeed**", row.not_succeeded));
    }
    text
}

/// The scheduler's cost table, a row per set of skews.
const COSTS: [Col<SchedRow>; 10] = [
    ("replica clock skews", |r| skew_label(&r.skews_ms)),
    ("Redis commands / occurrence / replica", |r| {
        format!("{:.2}", r.costs.commands_per_occurrence_per_replica)
    }),
    ("client round trips / occurrence / replica", |r| {
        format!("{:.2}", r.costs.round_trips_per_occurrence_per_replica)
    }),
    ("winner's round trips / occurrence", |r| {
        breakdown(r, |b| b.winner_per_occurrence)
    }),
    ("each loser's claims / occurrence", |r| {
        breakdown(r, |b| b.loser_per_occurrence)
    }),
    ("too-early claims / occurrence", |r| {
        breakdown(r, |b| b.too_early_per_occurrence)
    }),
    ("`run_now` polls / replica / occurrence", |r| {
        breakdown(r, |b| b.polls_per_replica_per_occurrence)
    }),
    ("µs in commands / occurrence", |r| {
        format!("{:.1}", r.costs.server_us_in_commands_per_occurrence)
    }),
    ("redis-server CPU µs / occurrence (idle: per s)", |r| {
        let c = &r.costs;
        format!(
            "{:.0} ({:.0})",
            c.server_cpu_us_per_occurrence,
            c.server_idle_cpu_ms_per_s * 1e3
        )
    }),
    ("CPU of a replica, ms/s", |r| {
        format!("{:.2}", r.costs.client_cpu_ms_per_replica_per_s)
    }),
];

/// A figure of the row's [`Breakdown`], or `—` where the counts did not fit the scripts' shape.
fn breakdown(row: &SchedRow, f: fn(&Breakdown) -> f64) -> String {
    let b = row.costs.breakdown.as_ref();
    b.map_or_else(|| NONE.to_owned(), |b| format!("{:.2}", f(b)))
}

/// Wall-clock time, Unix ms: occurrences are wall-clock instants.
fn wall_ms() -> Result<u64, BoxError> {
    Ok(u64::try_from(
        SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis(),
    )?)
}

fn sleep_until_wall(at_ms: u64) -> Result<(), BoxError> {
    let now = wall_ms()?;
    if at_ms > now {
        std::thread::sleep(std::time::Duration::from_millis(at_ms - now));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skew_labels_sign_their_offsets() {
        assert_eq!(skew_label(&[-300, 0, 500]), "−300 / 0 / +500 ms");
        assert_eq!(skew_label(&[0, 0, 0]), "0 / 0 / 0 ms");
    }
}
