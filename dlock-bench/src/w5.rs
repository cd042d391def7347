//! W5: dlock's semaphore (issue #14). 2 worker processes (`dlock-bench w5-worker sem`) × 8
//! tasks share `client.semaphore("w5:sem", 4)` until 4,000 acquisitions in all
//! ([`crate::family`]): each `acquire_timeout(1, 30 s)`, holds 1 ms, and releases. The observer
//! counts the holders inside: never more than the 4 permits.
//!
//! dlock only: rslock has no semaphore. Its section of the report: a details table, a command
//! row, and the W5 targets.

use std::fmt::Write as _;

use dlock_core::{Client, Permit, Semaphore};
use serde::{Deserialize, Serialize};

use crate::cli::ChildArgs;
use crate::dlock::mutex_options;
use crate::family::{
    self, FAIRNESS_COL, FamilyRun, LOCK_COL, Lock, Plan, ROUND_TRIPS_COL, TIMEOUTS_COL, granted,
    released,
};
use crate::family_stats::{Op, Role};
use crate::report::{Check, CommandRow, Entry, Section, Target, checked};
use crate::rt::BoxError;
use crate::spec::{ACQUIRE_WAIT, W5_PERMITS};
use crate::stats::float;
use crate::subjects::Setting;
use crate::table::{Col, int, table_of};

/// The workload: every acquisition a 1 ms hold, no writes.
const PLAN: Plan = Plan {
    prefix: "w5",
    worker: "w5-worker",
    write_every: 0,
};

/// dlock's semaphore of [`W5_PERMITS`] permits, one permit per acquisition.
struct Sem(Semaphore);

impl Lock for Sem {
    const NAME: &'static str = "sem";
    const LABEL: &'static str = "Semaphore";
    type Guard = Permit;

    fn open(client: &Client, name: &str) -> Result<Self, BoxError> {
        let options = mutex_options(false)?;
        Ok(Sem(client.semaphore_with(name, W5_PERMITS, options)?))
    }

    fn role(_: Op) -> Role {
        Role::Shared
    }

    async fn acquire(&self, _: Op) -> Result<Option<Permit>, BoxError> {
        granted(self.0.acquire_timeout(1, ACQUIRE_WAIT).await)
    }

    async fn release(permit: Permit) -> Result<bool, BoxError> {
        released(permit.release().await)
    }
}

/// W5's figures.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct W5 {
    pub(crate) permits: u32,
    pub(crate) semaphore: FamilyRun,
}

/// Runs W5.
pub(crate) fn run(s: &Setting) -> Result<Entry, BoxError> {
    let (url, counts) = (s.url.as_str(), &s.counts);
    let semaphore = family::run::<Sem>(&PLAN, url, counts, counts.w5_acquisitions)?;
    Entry::new(
        "w5",
        W5 {
            permits: W5_PERMITS,
            semaphore,
        },
    )
}

/// Entry point of the worker process, `dlock-bench w5-worker sem --url URL --process P`.
pub(crate) fn child_main(args: &ChildArgs) -> Result<(), BoxError> {
    match args.probe()? {
        Sem::NAME => family::worker_main::<Sem>(&PLAN, args, args.counts.w5_acquisitions),
        other => Err(format!("w5-worker: unknown lock `{other}`; use sem").into()),
    }
}

/// The details table.
const COLUMNS: [Col<FamilyRun>; 7] = [
    LOCK_COL,
    ("acquisitions/s", |r| int(r.figures.reads.per_s)),
    ("wait p50/p99 µs", |r| {
        let w = &r.figures.reads;
        format!("{:.0} / {:.0}", w.wait_p50_us, w.wait_p99_us)
    }),
    ("max holders inside", |r| r.figures.max_shared.to_string()),
    FAIRNESS_COL,
    TIMEOUTS_COL,
    ROUND_TRIPS_COL,
];

/// Issue #14's W5 targets.
const CHECKS: [Check<W5>; 3] = [
    (
        "W5 max holders inside at once",
        "≤ 4 (the permits)",
        |w| {
            let most = w.semaphore.figures.max_shared;
            (most.to_string(), most <= u64::from(w.permits))
        },
    ),
    ("W5 fairness", "min ≥ 0.5 × max", |w| {
        (FAIRNESS_COL.1(&w.semaphore), w.semaphore.figures.fair())
    }),
    ("W5 timeouts", "0", |w| {
        let timeouts = w.semaphore.timeouts;
        (timeouts.to_string(), timeouts == 0)
    }),
];

impl Section for W5 {
    fn command_rows(&self) -> Vec<CommandRow> {
        vec![self.semaphore.command_row("W5")]
    }

    fn details(&self, out: &mut String) {
        let r = &self.semaphore;
        let _ = writeln!(out, "### W5: semaphore (issue #14)\n");
        let _ = writeln!(
            out,
            "dlock only (rslock has no semaphore). {} processes × {} tasks, {} acquisitions of \
             `client.semaphore(\"w5:sem\", {})`, each `acquire_timeout(1, 30 s)`, a 1 ms hold, \
             `release`. Waits: from the acquire call to its return. Holders inside: an observer \
             script on a plain connection, entered after the grant and left before the release; \
             releases that found the lease gone: {}.\n",
            r.processes,
            r.tasks / r.processes.max(1),
            int(float(r.tickets)),
            self.permits,
            r.not_held_at_release,
        );
        table_of(out, "lrrrrrr", &COLUMNS, std::slice::from_ref(r));
    }

    fn targets(&self) -> Vec<Target> {
        checked(self, &CHECKS)
    }
}
