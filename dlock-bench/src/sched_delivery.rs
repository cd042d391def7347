//! The scheduler's delivery comparison (issue #30), run by `--only sched` after the scheduler
//! workload's rows: the same 3 replica processes and 1-second cron, the job with a 1 s run
//! lease, once per delivery mode ([`SchedDelivery`]: at most once; at least once, 3 attempts,
//! 200 ms backoff).
//!
//! * **Without faults** ([`crate::sched::observe`], clocks in step): the fire delay of every
//!   occurrence of a 20-occurrence window (its first attempt's `start_delay()`), exactly once,
//!   later attempts (must be none) and the Redis commands and round trips per occurrence per
//!   replica, as the scheduler workload's rows measure them.
//! * **Kills** ([`crate::sched_kills`]): the replica running a long run is SIGKILLed and
//!   started again 2 s later ([`crate::spec::SCHED_RESTART_AFTER`]), several times per mode; what became of each killed run
//!   ([`crate::sched_faults`]): at least once, when its attempt was found abandoned and when the
//!   next attempt was claimed and started; at most once, that it was left abandoned; in both,
//!   when the next later occurrence ran.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::report::{Entry, Section, Target};
use crate::rt::BoxError;
use crate::sched::{Observed, SchedRow, agreement, observe, summarize};
use crate::sched_faults::{KillOutcome, Spread};
use crate::sched_kills::{self, KillRun};
use crate::sched_stats::seconds_between;
use crate::spec::{
    SCHED_DELIVERY_LEASE, SCHED_KILL_AFTER, SCHED_LONG_EVERY_S, SCHED_LONG_RUN,
    SCHED_RESTART_AFTER, SCHED_RETRY_BACKOFF, SchedDelivery,
};
use crate::stats::{count, millis};
use crate::subjects::Setting;
use crate::table::{Col, NONE, joined, table_of};

/// Both parts of the delivery comparison.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct DeliveryResult {
    /// One row per delivery mode, without faults.
    pub(crate) quiet: Vec<QuietRow>,
    /// One kill phase per delivery mode.
    pub(crate) kills: Vec<KillRun>,
}

/// One delivery mode without faults.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct QuietRow {
    pub(crate) delivery: SchedDelivery,
    /// Runs of the window with more than one attempt: must be 0 without faults.
    pub(crate) later_attempts: u64,
    pub(crate) row: SchedRow,
}

/// Runs both parts, each mode after the other.
pub(crate) fn run(s: &Setting) -> Result<Entry, BoxError> {
    let (url, counts) = (s.url.as_str(), &s.counts);
    let mut quiet = Vec::new();
    for delivery in SchedDelivery::ALL {
        eprintln!("  {}, no faults …", delivery.label());
        let job = format!("quiet-{}", delivery.name());
        let extra = ["--delivery", delivery.name()];
        let observed = observe(url, counts, &[0, 0, 0], &job, &extra)?;
        quiet.push(QuietRow {
            delivery,
            later_attempts: later_attempts(&observed),
            row: summarize(observed),
        });
    }
    let mut kills = Vec::new();
    for delivery in SchedDelivery::ALL {
        eprintln!("  {}, {} kills …", delivery.label(), counts.sched_kills);
        let job = format!("kill-{}", delivery.name());
        kills.push(sched_kills::run(url, counts, delivery, &job)?);
    }
    Entry::new("sched_delivery", DeliveryResult { quiet, kills })
}

/// Runs of the window that made more than one attempt.
fn later_attempts(o: &Observed) -> u64 {
    let seconds: BTreeSet<i64> = seconds_between(o.window_ms.0, o.window_ms.1)
        .into_iter()
        .collect();
    let retried = o.history.iter().filter(|r| {
        !r.manual && seconds.contains(&r.occurrence.timestamp_millis()) && r.attempt > 1
    });
    count(retried.count())
}

impl Section for DeliveryResult {
    fn details(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "### Scheduler: delivery modes, 3 replicas, 1-second cron (issue #30)\n"
        );
        let _ = writeln!(out, "{}\n", quiet_intro());
        table_of(out, "lrrrrlrrrr", &QUIET, &self.quiet);
        for q in &self.quiet {
            let _ = writeln!(
                out,
                "Commands in the window ({}, less the handler's `INCR`): {}  ",
                q.delivery.label(),
                q.row.commands.summary()
            );
        }
        out.push('\n');
        let _ = writeln!(out, "{}\n", kills_intro());
        table_of(out, "lrlrrrrrrrr", &KILLS, &self.kills);
        let each: Vec<(SchedDelivery, KillOutcome)> = self
            .kills
            .iter()
            .flat_map(|k| k.kills.iter().map(|o| (k.delivery, o.clone())))
            .collect();
        table_of(out, "lrlrrrrrrl", &EACH_KILL, &each);
    }

    fn targets(&self) -> Vec<Target> {
        let quiet_ok = |q: &QuietRow| {
            let r = &q.row;
            r.once.exact()
                && r.whole_run.repeated == 0
                && r.whole_run.missed == 0
                && r.ledger_mismatches == 0
                && r.not_succeeded == 0
                && q.later_attempts == 0
        };
        let quiet = Target::new(
            "scheduler delivery, no faults: exactly once, on the first attempt (each mode, #30)",
            "all",
            joined(&self.quiet, ", ", |q| {
                format!(
                    "{} of {} · {} later",
                    q.row.once.once, q.row.once.occurrences, q.later_attempts
                )
            }),
            !self.quiet.is_empty() && self.quiet.iter().all(quiet_ok),
        );
        let kill_ok = |k: &KillRun| {
            let s = &k.summary;
            let expected = match k.delivery {
                SchedDelivery::AtLeastOnce => s.run_again,
                SchedDelivery::AtMostOnce => s.left_abandoned,
            };
            s.kills > 0 && s.hit == s.kills && expected == s.kills && k.completed_twice == 0
        };
        let kills = Target::new(
            "scheduler delivery, killed runs: run again (at least once) · left abandoned (at most once) (#30)",
            "all · all",
            joined(&self.kills, " · ", |k| {
                let s = &k.summary;
                let done = match k.delivery {
                    SchedDelivery::AtLeastOnce => s.run_again,
                    SchedDelivery::AtMostOnce => s.left_abandoned,
                };
                format!("{done} of {}", s.kills)
            }),
            !self.kills.is_empty() && self.kills.iter().all(kill_ok),
        );
        vec![quiet, kills]
    }
}

/// The introduction of the part without faults.
fn quiet_intro() -> String {
    format!(
        "The job of the scheduler workload (one `INCR`, clocks in step) with a {} ms run lease, \
         per delivery mode; nothing fails. Fire delay = the first attempt's \
         `RunRecord::start_delay()` (claim by the Redis server's clock − nominal instant, ms).",
        SCHED_DELIVERY_LEASE.as_millis()
    )
}

/// The introduction of the kill phase, with what the design predicts.
fn kills_intro() -> String {
    let lease = millis(SCHED_DELIVERY_LEASE);
    let renewal = lease / 3;
    let backoff = millis(SCHED_RETRY_BACKOFF);
    let (long_s, first_kill) = (SCHED_LONG_RUN.as_secs(), millis(SCHED_KILL_AFTER));
    let down = millis(SCHED_RESTART_AFTER);
    format!(
        "**Kills.** The same job with `--faults`: every run announces its start (a Redis list), \
         and the first attempt of each occurrence on a multiple of {SCHED_LONG_EVERY_S} s works \
         {long_s} s. The parent SIGKILLs the replica running it, {first_kill}–{} ms into the run (the kills \
         spread over one renewal interval, lease / 3 = {renewal} ms), and starts that replica \
         again {down} ms later (same id, a new process), after the retry is due, so that the \
         surviving replicas take it. Times are from the kill (the parent's wall \
         clock just before SIGKILL) to the ledger's instants (the Redis server's `TIME`, ms) or \
         a handler's announcement: one clock on this machine. **Expected from the design**: the \
         run's leases (its lock's, and at least once its attempt's in the ledger) lapse \
         {}–{lease} ms after the kill (one lease after the last renewal). At least once, the \
         first replica to look after that records the attempt abandoned and schedules the next \
         one after the backoff ({backoff} ms): claimed {}–{} ms after the kill, plus how late \
         the replica that takes it looks (at once: every replica learns when a pending run is \
         due from its claim and heartbeat replies, not only at its 5 s fallback poll). At most once, the killed occurrence \
         is recorded abandoned and not run again; the next occurrence after the lock's lapse \
         runs (with a 1 s cron, the first whole second after it).",
        first_kill + renewal,
        lease - renewal,
        lease - renewal + backoff,
        lease + backoff,
    )
}

/// The part without faults, a row per delivery mode.
const QUIET: [Col<QuietRow>; 10] = [
    ("delivery", |q| q.delivery.label()),
    ("occurrences", |q| q.row.occurrences.to_string()),
    ("fire delay p50 / p99 / max ms", |q| {
        let d = &q.row.delay;
        format!("{:.0} / {:.0} / {:.0}", d.p50_ms, d.p99_ms, d.max_ms)
    }),
    (
        "ran exactly once (window) · whole run once / more / missed",
        |q| {
            let (o, w) = (&q.row.once, &q.row.whole_run);
            format!(
                "{} of {} · {} / {} / {}",
                o.once, o.occurrences, w.once, w.repeated, w.missed
            )
        },
    ),
    ("runs with later attempts", |q| q.later_attempts.to_string()),
    ("ledger = counters", |q| agreement(&q.row)),
    ("Redis commands / occurrence / replica", |q| {
        format!("{:.2}", q.row.costs.commands_per_occurrence_per_replica)
    }),
    ("client round trips / occurrence / replica", |q| {
        format!("{:.2}", q.row.costs.round_trips_per_occurrence_per_replica)
    }),
    ("µs in commands / occurrence", |q| {
        format!("{:.1}", q.row.costs.server_us_in_commands_per_occurrence)
    }),
    ("CPU of a replica, ms/s", |q| {
        format!("{:.2}", q.row.costs.client_cpu_ms_per_replica_per_s)
    }),
];

/// "p50 / max (min …)" of a spread, ms.
fn spread(s: &Spread) -> String {
    if s.samples == 0 {
        return NONE.to_owned();
    }
    format!("{:.0} / {:.0} (min {:.0})", s.p50_ms, s.max_ms, s.min_ms)
}

/// "min–max" of a spread, ms.
fn range(s: &Spread) -> String {
    if s.samples == 0 {
        return NONE.to_owned();
    }
    format!("{:.0}–{:.0}", s.min_ms, s.max_ms)
}

/// The kill phase, a row per delivery mode.
const KILLS: [Col<KillRun>; 11] = [
    ("delivery", |k| k.delivery.label()),
    ("kills (hit the long run)", |k| {
        format!("{} ({})", k.summary.kills, k.summary.hit)
    }),
    ("killed occurrence afterwards", |k| {
        let s = &k.summary;
        match k.delivery {
            SchedDelivery::AtLeastOnce => format!("run again: {} of {}", s.run_again, s.kills),
            SchedDelivery::AtMostOnce => {
                format!("left abandoned: {} of {}", s.left_abandoned, s.kills)
            }
        }
    }),
    ("kill into the run, ms", |k| range(&k.summary.into_run)),
    ("→ attempt found abandoned, ms p50 / max", |k| {
        spread(&k.summary.found_abandoned)
    }),
    ("→ next attempt claimed, ms p50 / max", |k| {
        spread(&k.summary.retry_claimed)
    }),
    ("→ its handler started, ms p50 / max", |k| {
        spread(&k.summary.retry_started)
    }),
    ("next attempts by the respawned replica", |k| {
        let s = &k.summary;
        if s.retry_claimed.samples == 0 {
            NONE.to_owned()
        } else {
            format!("{} of {}", s.retries_by_respawned, s.retry_claimed.samples)
        }
    }),
    ("→ next occurrence ran, ms p50 / max", |k| {
        spread(&k.summary.next_ran)
    }),
    ("occurrences skipped as overlaps", |k| {
        k.summary.skipped.to_string()
    }),
    ("→ respawned replica running, ms p50 / max", |k| {
        spread(&k.summary.respawn)
    }),
];

/// One ms figure, or `—`.
fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| NONE.to_owned(), |v| format!("{v:.0}"))
}

/// Every kill, a row each.
const EACH_KILL: [Col<(SchedDelivery, KillOutcome)>; 10] = [
    ("delivery", |(d, _)| d.name().to_owned()),
    ("occurrence (s of the minute)", |(_, o)| {
        (o.kill.occurrence_ms / 1_000 % 60).to_string()
    }),
    ("killed", |(_, o)| {
        let hit = if o.hit { "" } else { " (**missed**)" };
        format!("{}{hit}", o.kill.replica)
    }),
    ("into the run, ms", |(_, o)| format!("{:.0}", o.into_run_ms)),
    ("→ found abandoned", |(_, o)| ms(o.found_abandoned_ms)),
    ("→ next attempt claimed", |(_, o)| {
        let by = match o.retry_by_respawned {
            Some(true) => " (respawned)",
            Some(false) => " (survivor)",
            None => "",
        };
        format!("{}{by}", ms(o.retry_claimed_ms))
    }),
    ("→ its handler started", |(_, o)| ms(o.retry_started_ms)),
    ("→ next occurrence ran", |(_, o)| ms(o.next_ran_ms)),
    ("skipped", |(_, o)| o.skipped.to_string()),
    ("outcome (attempts; handler starts)", |(_, o)| {
        format!("{} ({}; {})", o.outcome, o.attempts, o.handler_starts)
    }),
];
