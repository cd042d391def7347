//! W4: read-mostly, on dlock's read-write lock (issue #14). 2 worker processes
//! (`dlock-bench w4-worker rw|mutex`) × 8 tasks hold one lock until 20,000 operations in all
//! ([`crate::family`]): the tickets divisible by 10 are writes (`GET`/pause 1 ms/`SET` of
//! `w4:counter`), the others reads (a 1 ms pause). First on `client.rw_lock("w4:rw")` (reads
//! with `read_timeout`, writes with `write_timeout`, 30 s), then the same work, after a
//! `FLUSHALL`, on `client.mutex("w4:mutex")`, where every operation is exclusive: the ratio of
//! their rates is what the read-write lock buys.
//!
//! dlock only: rslock has no read-write lock. Its section of the report: a details table (a row
//! per lock), two command rows, and the W4 targets.

use std::fmt::Write as _;

use dlock_core::{Client, Mutex, MutexGuard, ReadGuard, RwLock, WriteGuard};
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
use crate::spec::{ACQUIRE_WAIT, W4_WRITE_EVERY};
use crate::stats::float;
use crate::subjects::Setting;
use crate::table::{Col, int, table_of};

/// The workload.
const PLAN: Plan = Plan {
    prefix: "w4",
    worker: "w4-worker",
    write_every: W4_WRITE_EVERY,
};

/// dlock's read-write lock: reads shared, writes exclusive.
struct Rw(RwLock);

/// A hold of [`Rw`].
enum RwGuard {
    Read(ReadGuard),
    Write(WriteGuard),
}

impl Lock for Rw {
    const NAME: &'static str = "rw";
    const LABEL: &'static str = "RwLock";
    type Guard = RwGuard;

    fn open(client: &Client, name: &str) -> Result<Self, BoxError> {
        Ok(Rw(client.rw_lock_with(name, mutex_options(false)?)?))
    }

    fn role(op: Op) -> Role {
        match op {
            Op::Read => Role::Shared,
            Op::Write => Role::Exclusive,
        }
    }

    async fn acquire(&self, op: Op) -> Result<Option<RwGuard>, BoxError> {
        Ok(match op {
            Op::Read => granted(self.0.read_timeout(ACQUIRE_WAIT).await)?.map(RwGuard::Read),
            Op::Write => granted(self.0.write_timeout(ACQUIRE_WAIT).await)?.map(RwGuard::Write),
        })
    }

    async fn release(guard: RwGuard) -> Result<bool, BoxError> {
        released(match guard {
            RwGuard::Read(read) => read.release().await,
            RwGuard::Write(write) => write.release().await,
        })
    }
}

/// dlock's mutex: every operation exclusive.
struct Exclusive(Mutex);

impl Lock for Exclusive {
    const NAME: &'static str = "mutex";
    const LABEL: &'static str = "Mutex";
    type Guard = MutexGuard;

    fn open(client: &Client, name: &str) -> Result<Self, BoxError> {
        Ok(Exclusive(client.mutex_with(name, mutex_options(false)?)?))
    }

    fn role(_: Op) -> Role {
        Role::Exclusive
    }

    async fn acquire(&self, _: Op) -> Result<Option<MutexGuard>, BoxError> {
        granted(self.0.acquire_timeout(ACQUIRE_WAIT).await)
    }

    async fn release(guard: MutexGuard) -> Result<bool, BoxError> {
        released(guard.release().await)
    }
}

/// W4's figures: the read-write lock, and the mutex on the same work.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct W4 {
    pub(crate) rwlock: FamilyRun,
    pub(crate) mutex: FamilyRun,
    /// Operations per second, RwLock ÷ mutex.
    pub(crate) rwlock_to_mutex: f64,
}

/// Runs W4 on the read-write lock, then on the mutex.
pub(crate) fn run(s: &Setting) -> Result<Entry, BoxError> {
    let (url, counts) = (s.url.as_str(), &s.counts);
    eprintln!("  RwLock …");
    let rwlock = family::run::<Rw>(&PLAN, url, counts, counts.w4_ops)?;
    eprintln!("  the same work under the mutex …");
    let mutex = family::run::<Exclusive>(&PLAN, url, counts, counts.w4_ops)?;
    let rwlock_to_mutex = rwlock.figures.ops_per_s / mutex.figures.ops_per_s;
    Entry::new(
        "w4",
        W4 {
            rwlock,
            mutex,
            rwlock_to_mutex,
        },
    )
}

/// Entry point of the worker process, `dlock-bench w4-worker rw|mutex --url URL --process P`.
pub(crate) fn child_main(args: &ChildArgs) -> Result<(), BoxError> {
    let tickets = args.counts.w4_ops;
    match args.probe()? {
        Rw::NAME => family::worker_main::<Rw>(&PLAN, args, tickets),
        Exclusive::NAME => family::worker_main::<Exclusive>(&PLAN, args, tickets),
        other => Err(format!("w4-worker: unknown lock `{other}`; use rw, mutex").into()),
    }
}

/// The details table: a row per lock.
const COLUMNS: [Col<FamilyRun>; 11] = [
    LOCK_COL,
    ("ops/s", |r| int(r.figures.ops_per_s)),
    ("reads/s", |r| int(r.figures.reads.per_s)),
    ("writes/s", |r| int(r.figures.writes.per_s)),
    ("writer wait p50/p99 µs", |r| {
        let w = &r.figures.writes;
        format!("{:.0} / {:.0}", w.wait_p50_us, w.wait_p99_us)
    }),
    ("reader wait p50/p99 µs", |r| {
        let w = &r.figures.reads;
        format!("{:.0} / {:.0}", w.wait_p50_us, w.wait_p99_us)
    }),
    ("max readers inside", |r| r.figures.max_shared.to_string()),
    ("writer overlaps", |r| r.figures.overlaps.to_string()),
    ("lost updates", |r| r.lost_updates.to_string()),
    TIMEOUTS_COL,
    ROUND_TRIPS_COL,
];

/// A figure of both runs, shown for each; met when it is 0 in both.
fn zero_in_both(w: &W4, figure: fn(&FamilyRun) -> String) -> (String, bool) {
    let (rw, mx) = (figure(&w.rwlock), figure(&w.mutex));
    let met = rw == "0" && mx == "0";
    (format!("{rw} (RwLock), {mx} (mutex)"), met)
}

/// Issue #14's W4 targets.
const CHECKS: [Check<W4>; 3] = [
    ("W4 lost updates", "0", |w| {
        zero_in_both(w, |r| r.lost_updates.to_string())
    }),
    ("W4 writer overlaps", "0", |w| {
        zero_in_both(w, |r| r.figures.overlaps.to_string())
    }),
    ("W4 RwLock ops/s ÷ mutex ops/s", "> 1", |w| {
        let (rw, mx) = (w.rwlock.figures.ops_per_s, w.mutex.figures.ops_per_s);
        let ratio = w.rwlock_to_mutex;
        (
            format!("{ratio:.2}× ({} / {})", int(rw), int(mx)),
            ratio > 1.0,
        )
    }),
];

impl Section for W4 {
    fn command_rows(&self) -> Vec<CommandRow> {
        vec![self.rwlock.command_row("W4"), self.mutex.command_row("W4")]
    }

    fn details(&self, out: &mut String) {
        let r = &self.rwlock;
        let _ = writeln!(out, "### W4: read-mostly, read-write lock (issue #14)\n");
        let _ = writeln!(
            out,
            "dlock only (rslock has no read-write lock). {} processes × {} tasks, {} operations \
             ({} writes: every tenth ticket) on `client.rw_lock(\"w4:rw\")`, then the same work \
             on `client.mutex(\"w4:mutex\")` (every operation exclusive). A read holds 1 ms; a \
             write does `GET`/1 ms/`SET` of `w4:counter`. Waits: from the acquire call to its \
             return. Who is inside: an observer script on a plain connection, entered after the \
             grant and left before the release (a writer overlap is a writer inside with anyone \
             else).\n",
            r.processes,
            r.tasks / r.processes.max(1),
            int(float(r.tickets)),
            r.expected_counter,
        );
        table_of(
            out,
            "lrrrrrrrrrr",
            &COLUMNS,
            &[self.rwlock.clone(), self.mutex.clone()],
        );
        let _ = writeln!(
            out,
            "RwLock ops/s ÷ mutex ops/s: {:.2}×. Holds per task (min–max): RwLock {}, mutex {}; \
             releases that found the lease gone: {}, {}.\n",
            self.rwlock_to_mutex,
            FAIRNESS_COL.1(&self.rwlock),
            FAIRNESS_COL.1(&self.mutex),
            self.rwlock.not_held_at_release,
            self.mutex.not_held_at_release,
        );
    }

    fn targets(&self) -> Vec<Target> {
        checked(self, &CHECKS)
    }
}
