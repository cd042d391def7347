//! What the lock-family workloads share (W4 read-write lock, W5 semaphore; issue #14): worker
//! processes whose tasks take tickets and hold one lock, an observer that counts who is inside,
//! and one run's figures and commands.
//!
//! **The run.** After a `FLUSHALL`, 2 worker processes (`dlock-bench <workload>-worker <lock>
//! --process P`) each build one dlock `Client` and one plain connection, warm up (connections,
//! scripts) on private names, print `READY`, and start 8 tasks on `GO`. Each task loops, as W3's:
//!
//! 1. `INCR <w>:tickets` outside the lock; stop when the result is past the limit; the ticket
//!    says the operation ([`Op::of_ticket`]: W4 makes every tenth a write).
//! 2. Acquire the lock `<w>:<lock>` for the operation (a read, a write, a permit), waiting up to
//!    30 s (a timeout is counted and the ticket is lost); its wait is the time from the call to
//!    its return (request to grant).
//! 3. Enter the observer; hold: a read pauses 1 ms (`spawn_blocking(|| sleep(1 ms))`, as W3); a
//!    write does `GET <w>:counter`, the pause, `SET <w>:counter value+1`; leave the observer.
//! 4. Release, and record the hold (task, operation, wait, what the observer saw).
//!
//! The parent reads `INFO commandstats` and redis-server's CPU around the window (from `GO` to
//! the last result), subtracts the workload's own commands (the tickets' `INCR`, the writes'
//! `GET`/`SET`, the observer's `EVALSHA` and its inner `HINCRBY`/`HMGET`), reads the counter, and
//! merges the holds ([`crate::family_stats`]).
//!
//! **The observer** is one small script on the plain connection ([`OBSERVER_LUA`]): on entering,
//! a holder adds 1 to the field of its role (`r` shared, `w` exclusive) of the hash `<w>:inside`
//! and gets both fields back; on leaving it takes the 1 away. A holder enters after its acquire
//! returned and leaves before it releases, so what the observer sees inside is at most what the
//! lock let in: a writer that finds anyone else, or more holders than permits, is a real breach.

use std::future::Future;
use std::sync::{Arc, LazyLock};
use std::time::Instant;

use dlock_core::{Client, ReleaseOutcome};
use redis::aio::MultiplexedConnection;
use serde::{Deserialize, Serialize};

use crate::child::{GO, Group, args, print_result, ready_then_wait_for_go};
use crate::cli::ChildArgs;
use crate::control::{Control, raw_connection};
use crate::family_stats::{Hold, HoldFigures, Inside, Op, Role, lost_updates};
use crate::redis_stats::{PerCommand, PerOp, Plain, Snapshot, WindowDelta};
use crate::report::CommandRow;
use crate::rt::{BoxError, current_thread_runtime, elapsed_ns, monotonic_ns, multi_thread_runtime};
use crate::spec::{Counts, FAMILY_PROCESSES, FAMILY_TASKS, W3_PAUSE};
use crate::stats::count;
use crate::subjects::Kind;
use crate::table::Col;

/// Tickets each worker process runs through on its private names before `READY`: a few holds
/// per task, writes among them, so that every script is loaded and every connection open.
const WARMUP_TICKETS: u64 = 40;

/// The observer: `KEYS[1]` the hash of who is inside, `ARGV[1]` the holder's field (`r` shared,
/// `w` exclusive), `ARGV[2]` `1` on entering or `-1` on leaving. Returns `{r, w}` after the
/// change.
pub(crate) const OBSERVER_LUA: &str = "\
redis.call('HINCRBY', KEYS[1], ARGV[1], ARGV[2])
local inside = redis.call('HMGET', KEYS[1], 'r', 'w')
return {tonumber(inside[1]) or 0, tonumber(inside[2]) or 0}";

static OBSERVER: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(OBSERVER_LUA));

/// A workload of the family: its key prefix, its worker subcommand, and its mix of operations.
#[derive(Debug)]
pub(crate) struct Plan {
    /// `w4`: every key is `w4:…`.
    pub(crate) prefix: &'static str,
    /// The subcommand of its worker processes.
    pub(crate) worker: &'static str,
    /// Every how-manyth ticket is a write (0: none is).
    pub(crate) write_every: u64,
}

/// A lock of the family as the worker tasks drive it, through dlock's public API.
pub(crate) trait Lock: Sized + Send + Sync + 'static {
    /// The lock's name after the workload's prefix (`w4:rw`), and the worker's mode argument.
    const NAME: &'static str;
    /// Its name in the report.
    const LABEL: &'static str;
    /// A hold.
    type Guard: Send;

    /// The handle on the lock called `name`, with every lock's options (TTL 10 s).
    fn open(client: &Client, name: &str) -> Result<Self, BoxError>;

    /// How operation `op` holds this lock.
    fn role(op: Op) -> Role;

    /// A hold for `op`, waiting up to 30 s; `Ok(None)` when the wait ran out.
    fn acquire(&self, op: Op)
    -> impl Future<Output = Result<Option<Self::Guard>, BoxError>> + Send;

    /// Gives the hold back; `Ok(false)` when its lease was already gone.
    fn release(guard: Self::Guard) -> impl Future<Output = Result<bool, BoxError>> + Send;
}

/// The result of a waiting acquire as [`Lock::acquire`] returns it: `Busy` (the wait ran out)
/// is `None`.
pub(crate) fn granted<G>(result: dlock_core::Result<G>) -> Result<Option<G>, BoxError> {
    match result {
        Ok(guard) => Ok(Some(guard)),
        Err(e) if e.is_busy() => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The result of a release as [`Lock::release`] returns it.
pub(crate) fn released(result: dlock_core::Result<ReleaseOutcome>) -> Result<bool, BoxError> {
    Ok(result?.was_held())
}

/// The workload's own commands, subtracted from the window's counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Own {
    incr: u64,
    get: u64,
    set: u64,
    /// Observer calls (entries and exits): one `EVALSHA`, `HINCRBY` and `HMGET` each.
    observer: u64,
}

/// What tasks report: every hold, and what went wrong.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Tally {
    holds: Vec<Hold>,
    /// Acquires that gave up after 30 s.
    timeouts: u64,
    /// Releases that found the lease gone.
    not_held_at_release: u64,
    own: Own,
}

impl Tally {
    fn absorb(&mut self, other: Tally) {
        self.holds.extend(other.holds);
        self.timeouts += other.timeouts;
        self.not_held_at_release += other.not_held_at_release;
        self.own.incr += other.own.incr;
        self.own.get += other.own.get;
        self.own.set += other.own.set;
        self.own.observer += other.own.observer;
    }
}

/// What one worker process reports to the parent.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct WorkerReport {
    /// CLOCK_MONOTONIC ns when its tasks started (after `GO`), and when the last one ended.
    start_ns: u64,
    end_ns: u64,
    tally: Tally,
}

/// The figures of one lock under one workload.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct FamilyRun {
    /// [`Lock::LABEL`].
    pub(crate) lock: String,
    pub(crate) processes: u32,
    /// Tasks in all processes.
    pub(crate) tasks: u32,
    /// Tickets handed out: each should become one hold.
    pub(crate) tickets: u64,
    pub(crate) figures: HoldFigures,
    pub(crate) timeouts: u64,
    pub(crate) not_held_at_release: u64,
    /// Writes among the tickets, the counter at the end, and the difference: must be 0.
    pub(crate) expected_counter: u64,
    pub(crate) final_counter: u64,
    pub(crate) lost_updates: i64,
    /// Per hold: the lock's commands and client requests, less the workload's own; no client
    /// CPU (the parent reads the window, not the workers).
    pub(crate) per_op: PerOp,
    /// `INFO commandstats` delta of the window, less the workload's own commands.
    pub(crate) commands: PerCommand,
}

impl FamilyRun {
    /// Its row of the command table.
    pub(crate) fn command_row(&self, workload: &str) -> CommandRow {
        CommandRow {
            workload: format!(
                "{workload} {} (per hold, less the workload's INCR/GET/SET and observer)",
                self.lock
            ),
            subject: Kind::Dlock,
            per_op: self.per_op.clone(),
            commands: self.commands.clone(),
        }
    }
}

/// Columns both workloads' details tables show.
pub(crate) const LOCK_COL: Col<FamilyRun> = ("lock", |r| r.lock.clone());
pub(crate) const FAIRNESS_COL: Col<FamilyRun> = ("holds per task min–max", |r| {
    format!("{}–{}", r.figures.fairness_min, r.figures.fairness_max)
});
pub(crate) const TIMEOUTS_COL: Col<FamilyRun> = ("timeouts", |r| r.timeouts.to_string());
pub(crate) const ROUND_TRIPS_COL: Col<FamilyRun> = ("round trips/hold", |r| {
    format!("{:.2}", r.per_op.round_trips)
});

/// Runs `plan` on lock `L` in its worker processes: `tickets` holds in all.
pub(crate) fn run<L: Lock>(
    plan: &Plan,
    url: &str,
    counts: &Counts,
    tickets: u64,
) -> Result<FamilyRun, BoxError> {
    let runtime = current_thread_runtime()?;
    let mut control = runtime.block_on(Control::fresh(url))?;
    let mut workers = Group::ready((0..FAMILY_PROCESSES).map(|process| {
        let process = process.to_string();
        args(plan.worker, url, counts, &[L::NAME, "--process", &process])
    }))?;
    let before = runtime.block_on(Snapshot::take(&mut control))?;
    workers.send(GO)?;
    let reports = workers.results::<WorkerReport>()?;
    let window = runtime.block_on(before.delta(&mut control))?;
    let counter = runtime.block_on(control.get_u64(&Keys::new(plan.prefix).counter))?;
    let expected = Op::writes_in(tickets, plan.write_every);
    Ok(summarize(
        L::LABEL,
        reports,
        window,
        tickets,
        expected,
        counter,
    ))
}

/// Merges the workers' reports into the figures of one run.
fn summarize(
    lock: &str,
    reports: Vec<WorkerReport>,
    mut window: WindowDelta,
    tickets: u64,
    expected_counter: u64,
    final_counter: u64,
) -> FamilyRun {
    let start = reports.iter().map(|r| r.start_ns).min().unwrap_or(0);
    let end = reports.iter().map(|r| r.end_ns).max().unwrap_or(0);
    let mut tally = Tally::default();
    reports.into_iter().for_each(|r| tally.absorb(r.tally));
    let own = tally.own;
    // The observer's script: one `EVALSHA` per call, and its inner `HINCRBY` and `HMGET`.
    let workloads_own = [
        ("incr", own.incr),
        ("get", own.get),
        ("set", own.set),
        ("evalsha", own.observer),
        ("hincrby", own.observer),
        ("hmget", own.observer),
    ];
    for (name, calls) in workloads_own {
        window.subtract_calls(name, calls);
    }
    let tasks = FAMILY_PROCESSES * FAMILY_TASKS;
    let figures = HoldFigures::of(&tally.holds, tasks, end.saturating_sub(start));
    let holds = count(tally.holds.len());
    FamilyRun {
        lock: lock.to_owned(),
        processes: FAMILY_PROCESSES,
        tasks,
        tickets,
        figures,
        timeouts: tally.timeouts,
        not_held_at_release: tally.not_held_at_release,
        expected_counter,
        final_counter,
        lost_updates: lost_updates(expected_counter, final_counter),
        per_op: PerOp::of(&window, holds, Plain::NONE).server_side(),
        commands: window.commands,
    }
}

/// The keys of one workload (or of one process's warm-up).
#[derive(Debug)]
struct Keys {
    prefix: String,
    tickets: String,
    counter: String,
    inside: String,
}

impl Keys {
    fn new(prefix: &str) -> Keys {
        Keys {
            prefix: prefix.to_owned(),
            tickets: format!("{prefix}:tickets"),
            counter: format!("{prefix}:counter"),
            inside: format!("{prefix}:inside"),
        }
    }
}

/// What every task of a worker process shares.
struct Worker<L> {
    lock: L,
    conn: MultiplexedConnection,
    keys: Keys,
    write_every: u64,
}

impl<L: Lock> Worker<L> {
    fn new(
        plan: &Plan,
        client: &Client,
        conn: MultiplexedConnection,
        prefix: &str,
    ) -> Result<Self, BoxError> {
        let keys = Keys::new(prefix);
        Ok(Worker {
            lock: L::open(client, &format!("{}:{}", keys.prefix, L::NAME))?,
            conn,
            keys,
            write_every: plan.write_every,
        })
    }
}

/// Entry point of a worker process, `dlock-bench <plan.worker> <L::NAME> --url URL --process P`:
/// warm up, `READY`, then on `GO` run the tasks until `tickets` are handed out, and print the
/// result.
pub(crate) fn worker_main<L: Lock>(
    plan: &Plan,
    args: &ChildArgs,
    tickets: u64,
) -> Result<(), BoxError> {
    let process = args.process()?;
    let runtime = multi_thread_runtime()?;
    let worker = runtime.block_on(set_up::<L>(plan, &args.url, process))?;
    ready_then_wait_for_go()?;
    let report = runtime.block_on(run_tasks(Arc::new(worker), process, tickets))?;
    print_result(&report)
}

/// A worker process's client (built inside its runtime) and plain connection, warmed up on the
/// process's private names by [`WARMUP_TICKETS`] holds.
async fn set_up<L: Lock>(plan: &Plan, url: &str, process: u32) -> Result<Worker<L>, BoxError> {
    let client = crate::dlock::client(url)?;
    let conn = raw_connection(url).await?;
    let warm_prefix = format!("{}:warm:{process}", plan.prefix);
    let warm = Worker::<L>::new(plan, &client, conn.clone(), &warm_prefix)?;
    run_tasks(Arc::new(warm), process, WARMUP_TICKETS).await?;
    Worker::new(plan, &client, conn, plan.prefix)
}

/// Runs the process's tasks until the tickets run out.
async fn run_tasks<L: Lock>(
    worker: Arc<Worker<L>>,
    process: u32,
    tickets: u64,
) -> Result<WorkerReport, BoxError> {
    let start_ns = monotonic_ns()?;
    let handles: Vec<_> = (0..FAMILY_TASKS)
        .map(|task| {
            let id = process * FAMILY_TASKS + task;
            tokio::spawn(run_task(worker.clone(), id, tickets))
        })
        .collect();
    let mut tally = Tally::default();
    for handle in handles {
        tally.absorb(handle.await??);
    }
    let end_ns = monotonic_ns()?;
    Ok(WorkerReport {
        start_ns,
        end_ns,
        tally,
    })
}

/// One task's loop (steps 1–4 of the module's docs).
async fn run_task<L: Lock>(
    worker: Arc<Worker<L>>,
    task: u32,
    limit: u64,
) -> Result<Tally, BoxError> {
    let mut conn = worker.conn.clone();
    let keys = &worker.keys;
    let mut tally = Tally::default();
    loop {
        let ticket: u64 = redis::cmd("INCR")
            .arg(&keys.tickets)
            .query_async(&mut conn)
            .await?;
        tally.own.incr += 1;
        if ticket > limit {
            return Ok(tally);
        }
        let op = Op::of_ticket(ticket, worker.write_every);
        let asked = Instant::now();
        let Some(guard) = worker
            .lock
            .acquire(op)
            .await
            .map_err(|e| format!("task {task}: {e}"))?
        else {
            tally.timeouts += 1;
            continue;
        };
        let wait_ns = elapsed_ns(asked);
        let role = L::role(op);
        let inside = observe(&mut conn, &keys.inside, role, 1).await?;
        hold(&mut conn, &keys.counter, op, &mut tally.own).await?;
        observe(&mut conn, &keys.inside, role, -1).await?;
        tally.own.observer += 2;
        if !L::release(guard).await? {
            tally.not_held_at_release += 1;
        }
        tally.holds.push(Hold {
            task,
            op,
            wait_ns,
            inside,
        });
    }
}

/// Inside the lock: the pause, and for a write the counter's read and write around it.
async fn hold(
    conn: &mut MultiplexedConnection,
    counter: &str,
    op: Op,
    own: &mut Own,
) -> Result<(), BoxError> {
    let pause = || tokio::task::spawn_blocking(|| std::thread::sleep(W3_PAUSE));
    if op == Op::Read {
        return Ok(pause().await?);
    }
    let value: Option<u64> = redis::cmd("GET").arg(counter).query_async(conn).await?;
    own.get += 1;
    pause().await?;
    redis::cmd("SET")
        .arg(counter)
        .arg(value.unwrap_or(0) + 1)
        .query_async::<()>(conn)
        .await?;
    own.set += 1;
    Ok(())
}

/// Enters (`step` 1) or leaves (`step` -1) the observer in `role`; returns who is inside after.
async fn observe(
    conn: &mut MultiplexedConnection,
    inside: &str,
    role: Role,
    step: i8,
) -> Result<Inside, BoxError> {
    let field = match role {
        Role::Shared => "r",
        Role::Exclusive => "w",
    };
    let (shared, exclusive): (u64, u64) = OBSERVER
        .key(inside)
        .arg(field)
        .arg(step)
        .invoke_async(conn)
        .await?;
    Ok(Inside { shared, exclusive })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_share_the_workloads_prefix() {
        let keys = Keys::new("w4");
        assert_eq!(
            (
                keys.tickets.as_str(),
                keys.counter.as_str(),
                keys.inside.as_str()
            ),
            ("w4:tickets", "w4:counter", "w4:inside")
        );
    }

    #[test]
    fn the_workloads_own_commands_are_taken_out_of_the_window() {
        let hold = |task, op, shared, exclusive| Hold {
            task,
            op,
            wait_ns: 1_000,
            inside: Inside { shared, exclusive },
        };
        let report = |start_ns, end_ns, holds: Vec<Hold>, writes| WorkerReport {
            start_ns,
            end_ns,
            tally: Tally {
                own: Own {
                    incr: 1 + u64::try_from(holds.len()).unwrap(),
                    get: writes,
                    set: writes,
                    observer: 2 * u64::try_from(holds.len()).unwrap(),
                },
                holds,
                ..Tally::default()
            },
        };
        let reports = vec![
            report(2_000, 1_000_000_000, vec![hold(0, Op::Write, 0, 1)], 1),
            report(1_000, 500_000_000, vec![hold(8, Op::Read, 1, 0)], 0),
        ];
        let text = "cmdstat_incr:calls=4,usec=4\r\ncmdstat_get:calls=1,usec=1\r\n\
                    cmdstat_set:calls=1,usec=1\r\ncmdstat_evalsha:calls=10,usec=100\r\n\
                    cmdstat_hincrby:calls=4,usec=4\r\ncmdstat_hmget:calls=4,usec=4\r\n\
                    cmdstat_zadd:calls=2,usec=2\r\n";
        let window = WindowDelta {
            commands: PerCommand::parse(text, "calls="),
            usec: PerCommand::parse(text, "usec="),
            ..WindowDelta::default()
        };
        let run = summarize("RwLock", reports, window, 2, 1, 1);
        // Left: the lock's 6 script calls and its 2 ZADDs inside them.
        assert_eq!(run.commands.summary(), "evalsha=6 zadd=2");
        assert!((run.per_op.round_trips - 3.0).abs() < 1e-9);
        assert!((run.per_op.commands - 4.0).abs() < 1e-9);
        assert_eq!(run.lost_updates, 0);
        assert_eq!((run.figures.reads.count, run.figures.writes.count), (1, 1));
        // From the first start to the last end.
        assert!((run.figures.window_s - 0.999_999).abs() < 1e-9);
    }

    #[test]
    fn tallies_add_up() {
        let mut a = Tally {
            timeouts: 1,
            own: Own {
                incr: 3,
                get: 1,
                set: 1,
                observer: 4,
            },
            ..Tally::default()
        };
        let b = Tally {
            not_held_at_release: 2,
            own: Own {
                incr: 2,
                observer: 2,
                ..Own::default()
            },
            ..Tally::default()
        };
        a.absorb(b);
        assert_eq!((a.timeouts, a.not_held_at_release), (1, 2));
        assert_eq!(
            a.own,
            Own {
                incr: 5,
                get: 1,
                set: 1,
                observer: 6
            }
        );
    }
}
