//! Scheduler one-off stage (issue #31, `--only sched-oneoff`), the parent side: a burst of
//! [`Counts::sched_oneoff_jobs`] one-off jobs (10,000; `--quick`: 1,000) all due at the same
//! instant T, across the 3 replica processes of the scale stage
//! ([`crate::sched_scale_replica`]: one handler registered by name, default options, so at most
//! 64 one-off runs at a time each). How long until the last one ran, does each run exactly
//! once, how are they shared, and what does one cost Redis and the replicas?
//!
//! After a `FLUSHALL` and 2 s of redis-server idle CPU the replicas start together (`GO`); a
//! few warm-up one-offs load the scripts. Then:
//!
//! * **enqueue**: an admin `Scheduler` of this process (the handler registered, never run)
//!   calls `run_at(handler, T, &i)` for i = 0 … N − 1, one after the other; T is the first whole
//!   second [`SCHED_ONEOFF_LEAD`] + [`SCHED_ONEOFF_BUDGET_PER_JOB`] × N after the enqueue starts,
//!   and the enqueue must end [`SCHED_ONEOFF_MARGIN`] before T (else the stage fails: the burst
//!   would overlap it). Its time, rate and Redis cost are measured apart.
//! * **the burst**: the measured window opens 300 ms before T and closes when no one-off is
//!   pending or running any more: this process polls `ZCARD` of the hidden job's `retries` set
//!   (pending and running runs; `finish.lua` removes a run when it records its end) every
//!   [`END_POLL`] from T; its polls are left out of the command counts.
//! * **the trim tail**: the replicas then trim the hidden job's ledger back to its `history`
//!   runs (`once_trim.lua`, at most 1,000 runs per look, a look per `request_poll`); measured
//!   apart, until the ledger is trimmed or [`TRIM_WAIT`].
//! * **the profile burst**: N / [`SCHED_ONEOFF_PROFILE_DIVISOR`] more one-offs due at one
//!   instant, with redis-server logging every command (`SLOWLOG`, threshold 0) from 100 ms
//!   before their instant until [`PROFILE_TAIL`] after none is left: `EVALSHA` time by script.
//!
//! Start − T is the handler's start by the wall clock (CLOCK_REALTIME, the Redis server's
//! clock on this machine) − T, as the scale stage measures the fire delay.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use dlock_scheduler::chrono::{DateTime, Utc};
use dlock_scheduler::{DEFAULT_HISTORY, DEFAULT_ONE_OFF_CONCURRENCY, Scheduler};
use serde::{Deserialize, Serialize};

use crate::child::{GO, Group, STOP, args};
use crate::control::Control;
use crate::redis_stats::{PerCommand, Snapshot, WindowDelta, idle_server_cpu_ms_per_s};
use crate::report::{Entry, Section, Target};
use crate::rt::{BoxError, current_thread_runtime, elapsed_ns, wall_us};
use crate::sched_oneoff_stats::{Burst, burst};
use crate::sched_scale::{
    admin, cpu_of, profile_line, script_names, sleep_until_wall, slowlog_collect,
    slowlog_everything, wall_ms,
};
use crate::sched_scale_replica::{ONE_OFF_JOB, ScaleReplicaReport};
use crate::sched_scale_stats::{Cost, profile, share_pct};
use crate::spec::{
    Counts, SCHED_ONEOFF_BUDGET_PER_JOB, SCHED_ONEOFF_LEAD, SCHED_ONEOFF_MARGIN,
    SCHED_ONEOFF_PROFILE_DIVISOR, SCHED_REPLICAS, SCHED_SCALE_HANDLER,
};
use crate::stats::{float, millis, ns_to_s, ratio};
use crate::subjects::Setting;
use crate::table::{Col, joined, table_of};

/// How long redis-server's idle CPU is measured before the replicas start.
const IDLE_SPAN: Duration = Duration::from_secs(2);
/// Warm-up one-offs, due at once, before the enqueue (the replicas load their scripts).
const WARMUP_JOBS: u32 = 30;
/// The measured window opens this long before T.
const BEFORE_T: Duration = Duration::from_millis(300);
/// How often the end of a burst is polled (`ZCARD` of the pending and running runs).
const END_POLL: Duration = Duration::from_millis(5);
/// How long a burst may take before the stage gives up.
const BURST_LIMIT: Duration = Duration::from_secs(120);
/// How often, and how long at most, the trim of the ledger is waited for.
const TRIM_POLL: Duration = Duration::from_millis(100);
const TRIM_WAIT: Duration = Duration::from_secs(40);
/// The profile window goes on this long after the profile burst ended (the trims that end a
/// burst's looks).
const PROFILE_TAIL: Duration = Duration::from_millis(200);

/// The one-off stage: one burst.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct SchedOneOffResult {
    pub(crate) jobs: u64,
    /// Each replica's one-off concurrency (the default).
    pub(crate) concurrency: usize,
    pub(crate) enqueue: Enqueue,
    pub(crate) burst: Burst,
    /// The end of the last run as the ledger has it: the first poll that found no one-off
    /// pending or running, its reply's wall clock − T (ms; [`END_POLL`] apart).
    pub(crate) ended_ms: f64,
    /// Runs of other jobs, manual runs, or one-offs without an index (0 expected).
    pub(crate) foreign_runs: u64,
    pub(crate) costs: BurstCosts,
    /// `INFO commandstats` over the burst window: calls and server time (µs).
    pub(crate) commands: PerCommand,
    pub(crate) usec: PerCommand,
    pub(crate) trim: TrimTail,
    /// The profile burst: its size, how long until its last start, and the server time in what
    /// the clients sent by script and command (and in what the scripts called), most first.
    pub(crate) profile_jobs: u64,
    pub(crate) profile_last_start_ms: f64,
    pub(crate) profile: Profile,
    pub(crate) profile_in_scripts: Profile,
}

/// The enqueue of the burst: `run_at` one after the other.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Enqueue {
    pub(crate) seconds: f64,
    pub(crate) per_s: f64,
    /// redis-server CPU (`INFO cpu`) and server time in commands per one-off enqueued, µs.
    pub(crate) server_cpu_us_per_job: f64,
    pub(crate) us_in_commands_per_job: f64,
    /// From the end of the enqueue to T, s.
    pub(crate) slack_s: f64,
}

/// What the burst cost, over its window (T − 300 ms until none was pending or running).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct BurstCosts {
    pub(crate) window_s: f64,
    pub(crate) server_cpu_us_per_job: f64,
    /// redis-server CPU over the window, % of one core.
    pub(crate) server_cpu_pct: f64,
    pub(crate) server_idle_cpu_ms_per_s: f64,
    pub(crate) us_in_commands_per_job: f64,
    pub(crate) commands_per_job: f64,
    /// Scripts and other client-only commands per one-off (client round trips).
    pub(crate) scripts_per_job: f64,
    pub(crate) evalsha_per_job: f64,
    /// CPU of each replica over the window, ms, in replica order.
    pub(crate) replica_cpu_ms: Vec<f64>,
    pub(crate) replicas_cpu_us_per_job: f64,
    /// redis-server and the replicas together, % of the machine's 2 vCPUs over the window.
    pub(crate) machine_busy_pct: f64,
}

/// The trim of the ledger after the burst.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct TrimTail {
    /// Whether the ledger was back to `history` runs within [`TRIM_WAIT`], and how long after
    /// the burst that took.
    pub(crate) trimmed: bool,
    pub(crate) seconds: f64,
    pub(crate) runs_left: u64,
    pub(crate) server_cpu_us_per_job: f64,
    pub(crate) trim_calls: u64,
}

/// Runs the burst.
pub(crate) fn run(s: &Setting) -> Result<Entry, BoxError> {
    let jobs = s.counts.sched_oneoff_jobs;
    eprintln!("  {jobs} one-off jobs due at the same instant …");
    Entry::new("sched-oneoff", run_burst(&s.url, &s.counts, jobs)?)
}

/// The hidden job's keys the parent reads: its pending and running runs, and its ledger's runs.
struct Keys {
    retries: String,
    runs: String,
}

fn run_burst(url: &str, counts: &Counts, jobs: u64) -> Result<SchedOneOffResult, BoxError> {
    let n = u32::try_from(jobs)?;
    let runtime = current_thread_runtime()?;
    runtime.block_on(Control::fresh(url))?;
    let mut control = runtime.block_on(Control::patient(url))?;
    let idle_ms_per_s = runtime.block_on(idle_server_cpu_ms_per_s(&mut control, IDLE_SPAN))?;
    let mut replicas = Group::ready((0..SCHED_REPLICAS).map(|replica| {
        let replica = replica.to_string();
        args("sched-scale-replica", url, counts, &["--process", &replica])
    }))?;
    let pids = replicas.pids();
    replicas.send(GO)?;
    let (admin, keys) = runtime.block_on(async { Ok::<_, BoxError>((admin(url)?, keys(url)?)) })?;
    let profile_n = u32::try_from(jobs / SCHED_ONEOFF_PROFILE_DIVISOR)?.max(1);
    // Warm-up: due now, indexes after both bursts'.
    let warm_from = n + profile_n;
    let now_ms = i64::try_from(wall_ms()?)?;
    runtime.block_on(enqueue(&admin, warm_from..warm_from + WARMUP_JOBS, now_ms))?;
    runtime.block_on(wait_until_empty(&mut control, &keys.retries))?;

    // The enqueue.
    let due_ms = due_after(jobs)?;
    let before = runtime.block_on(Snapshot::take(&mut control))?;
    let started = Instant::now();
    runtime.block_on(enqueue(&admin, 0..n, due_ms))?;
    let enqueue_ns = elapsed_ns(started);
    let enqueued = before.until(&runtime.block_on(Snapshot::take(&mut control))?);
    let slack_ms = due_ms - i64::try_from(wall_ms()?)?;
    if slack_ms < i64::try_from(millis(SCHED_ONEOFF_MARGIN))? {
        return Err(format!(
            "the enqueue of {jobs} one-offs ended {slack_ms} ms before they were due (wanted \
             {SCHED_ONEOFF_MARGIN:?}): the machine is too busy for this stage"
        )
        .into());
    }

    // The burst.
    let due = u64::try_from(due_ms)?;
    sleep_until_wall(due - millis(BEFORE_T))?;
    let cpu0 = cpu_of(&pids)?;
    let s0 = runtime.block_on(Snapshot::take(&mut control))?;
    let start = Instant::now();
    sleep_until_wall(due)?;
    let (ended_us, polls) = runtime.block_on(wait_until_empty(&mut control, &keys.retries))?;
    let s1 = runtime.block_on(Snapshot::take(&mut control))?;
    let window_ns = elapsed_ns(start);
    let cpu1 = cpu_of(&pids)?;
    let mut delta = s0.until(&s1);
    delta.subtract_calls("zcard", polls);

    // The trim tail.
    let started = Instant::now();
    let (trimmed, runs_left, trim_polls) =
        runtime.block_on(wait_for_trim(&mut control, &keys.runs))?;
    let tail_ns = elapsed_ns(started);
    let mut tail = s1.until(&runtime.block_on(Snapshot::take(&mut control))?);
    tail.subtract_calls("zcard", trim_polls);

    // The profile burst.
    let profile_due = due_after(u64::from(profile_n))?;
    runtime.block_on(enqueue(&admin, n..n + profile_n, profile_due))?;
    let profile_due = u64::try_from(profile_due)?;
    sleep_until_wall(profile_due - 100)?;
    runtime.block_on(slowlog_everything(&mut control))?;
    sleep_until_wall(profile_due)?;
    runtime.block_on(wait_until_empty(&mut control, &keys.retries))?;
    std::thread::sleep(PROFILE_TAIL);
    let logged = runtime.block_on(slowlog_collect(&mut control))?;
    let names = script_names();

    replicas.send(STOP)?;
    let reports = replicas.results::<ScaleReplicaReport>()?;
    let observed = Observed {
        jobs,
        due_ms,
        enqueue_ns,
        enqueued,
        slack_ms,
        ended_us,
        window_ns,
        delta,
        idle_ms_per_s,
        replica_cpu_us: cpu1.iter().zip(&cpu0).map(|(a, b)| a - b.min(a)).collect(),
        trim: (trimmed, runs_left, tail_ns, tail),
        profile_n,
        profile_due_ms: i64::try_from(profile_due)?,
        logged: (
            profile(&logged, &names, false),
            profile(&logged, &names, true),
        ),
        reports,
    };
    Ok(summarize(observed))
}

/// The keys of the handler's hidden job, as dlock-scheduler names them (`JobKeys` in its
/// `ledger.rs`: the hash-tagged base key of the lock `sched:<job>`). Called inside the runtime.
fn keys(url: &str) -> Result<Keys, BoxError> {
    let client = crate::dlock::client(url)?;
    let base = dlock_core::ext::base_key(&client, &format!("sched:{ONE_OFF_JOB}"))?;
    Ok(Keys {
        retries: format!("{base}:retries"),
        runs: format!("{base}:runs"),
    })
}

/// The first whole second (Unix ms) at least [`SCHED_ONEOFF_LEAD`] + the enqueue budget of
/// `jobs` one-offs from now.
fn due_after(jobs: u64) -> Result<i64, BoxError> {
    let budget = millis(SCHED_ONEOFF_LEAD) + millis(SCHED_ONEOFF_BUDGET_PER_JOB) * jobs;
    let at = wall_ms()? + budget;
    Ok(i64::try_from(at.div_ceil(1_000) * 1_000)?)
}

/// Enqueues one one-off per index, all due at `due_ms`, one after the other.
async fn enqueue(
    admin: &Scheduler,
    indexes: std::ops::Range<u32>,
    due_ms: i64,
) -> Result<(), BoxError> {
    let when: DateTime<Utc> =
        DateTime::from_timestamp_millis(due_ms).ok_or("due time out of range")?;
    for i in indexes {
        admin.run_at(SCHED_SCALE_HANDLER, when, &i).await?;
    }
    Ok(())
}

/// Polls `ZCARD retries` every [`END_POLL`] until it is 0; returns the wall clock (µs) of that
/// reply and the number of polls.
async fn wait_until_empty(control: &mut Control, retries: &str) -> Result<(u64, u64), BoxError> {
    let limit = Instant::now() + BURST_LIMIT;
    let mut polls = 0;
    loop {
        let left: u64 = redis::cmd("ZCARD")
            .arg(retries)
            .query_async(control.conn())
            .await?;
        polls += 1;
        if left == 0 {
            return Ok((wall_us()?, polls));
        }
        if Instant::now() > limit {
            return Err(format!("{left} one-offs still pending after {BURST_LIMIT:?}").into());
        }
        tokio::time::sleep(END_POLL).await;
    }
}

/// Polls `ZCARD runs` until the ledger is back to [`DEFAULT_HISTORY`] runs, or [`TRIM_WAIT`];
/// returns whether it was, the runs left, and the polls.
async fn wait_for_trim(control: &mut Control, runs: &str) -> Result<(bool, u64, u64), BoxError> {
    let limit = Instant::now() + TRIM_WAIT;
    let mut polls = 0;
    loop {
        let left: u64 = redis::cmd("ZCARD")
            .arg(runs)
            .query_async(control.conn())
            .await?;
        polls += 1;
        if left <= u64::try_from(DEFAULT_HISTORY)? || Instant::now() > limit {
            return Ok((left <= u64::try_from(DEFAULT_HISTORY)?, left, polls));
        }
        tokio::time::sleep(TRIM_POLL).await;
    }
}

/// Server time by script or command, most first ([`profile`]).
type Profile = Vec<(String, Cost)>;

/// What the parent gathered, before the figures are computed.
struct Observed {
    jobs: u64,
    due_ms: i64,
    enqueue_ns: u64,
    enqueued: WindowDelta,
    slack_ms: i64,
    ended_us: u64,
    window_ns: u64,
    delta: WindowDelta,
    idle_ms_per_s: f64,
    replica_cpu_us: Vec<u64>,
    /// Trimmed, runs left, its length (ns), its counters.
    trim: (bool, u64, u64, WindowDelta),
    profile_n: u32,
    profile_due_ms: i64,
    /// The profile of what the clients sent, and of what the scripts called.
    logged: (Profile, Profile),
    reports: Vec<ScaleReplicaReport>,
}

fn summarize(o: Observed) -> SchedOneOffResult {
    let runs: Vec<(String, Vec<_>)> = o
        .reports
        .iter()
        .map(|r| (r.id.clone(), r.one_offs.clone()))
        .collect();
    let n = u32::try_from(o.jobs).unwrap_or(u32::MAX);
    let measured = burst(&runs, 0, n, o.due_ms);
    let profiled = burst(&runs, n, o.profile_n, o.profile_due_ms);
    let window_s = ns_to_s(o.window_ns);
    let d = &o.delta;
    let replicas_us: u64 = o.replica_cpu_us.iter().sum();
    let costs = BurstCosts {
        window_s,
        server_cpu_us_per_job: ratio(d.server_cpu_us, o.jobs),
        server_cpu_pct: float(d.server_cpu_us) / 1e4 / window_s,
        server_idle_cpu_ms_per_s: o.idle_ms_per_s,
        us_in_commands_per_job: ratio(d.usec.client_usec(&[]), o.jobs),
        commands_per_job: ratio(d.commands.total(), o.jobs),
        scripts_per_job: ratio(d.commands.round_trips(0), o.jobs),
        evalsha_per_job: ratio(d.commands.get("evalsha"), o.jobs),
        replica_cpu_ms: o.replica_cpu_us.iter().map(|us| float(*us) / 1e3).collect(),
        replicas_cpu_us_per_job: ratio(replicas_us, o.jobs),
        machine_busy_pct: float(d.server_cpu_us + replicas_us) / 1e4 / window_s / 2.0,
    };
    let (trimmed, runs_left, tail_ns, tail) = o.trim;
    let ended_ms = (i64::try_from(o.ended_us).unwrap_or(i64::MAX) - o.due_ms * 1_000) as f64 / 1e3;
    SchedOneOffResult {
        jobs: o.jobs,
        concurrency: DEFAULT_ONE_OFF_CONCURRENCY,
        enqueue: Enqueue {
            seconds: ns_to_s(o.enqueue_ns),
            per_s: float(o.jobs) / ns_to_s(o.enqueue_ns),
            server_cpu_us_per_job: ratio(o.enqueued.server_cpu_us, o.jobs),
            us_in_commands_per_job: ratio(o.enqueued.usec.client_usec(&[]), o.jobs),
            slack_s: o.slack_ms as f64 / 1e3,
        },
        burst: measured,
        ended_ms,
        foreign_runs: o.reports.iter().map(|r| r.foreign).sum(),
        costs,
        commands: d.commands.clone(),
        usec: d.usec.clone(),
        trim: TrimTail {
            trimmed,
            seconds: ns_to_s(tail_ns),
            runs_left,
            server_cpu_us_per_job: ratio(tail.server_cpu_us, o.jobs),
            trim_calls: tail.commands.get("evalsha"),
        },
        profile_jobs: u64::from(o.profile_n),
        profile_last_start_ms: profiled.last_start_ms,
        profile: o.logged.0,
        profile_in_scripts: o.logged.1,
    }
}

/// The section's introduction.
const INTRO: &str = "3 replica processes (`Scheduler`, default options: at most 64 one-off \
    runs at a time each; ids r0 r1 r2), each registering one handler by name; an admin \
    `Scheduler` enqueues N one-offs with `run_at(handler, T, &i)`, one after the other, all due \
    at the same whole second T a few seconds after the enqueue ends. The handler sends nothing \
    to Redis; it records its start and end by the wall clock (CLOCK_REALTIME: the Redis \
    server's clock on this machine). Start − T: handler start − T (µs resolution, shown in ms). \
    Ended (ledger): the first 5 ms poll of the hidden job's pending and running runs (`ZCARD`) \
    that found none, its reply − T. Burst window: T − 300 ms until then. Client CPU from \
    /proc/<pid>/stat (10 ms ticks). Profile: a second burst of N/10 with `SLOWLOG` at threshold \
    0, EVALSHA split by SHA1.";

impl Section for SchedOneOffResult {
    fn details(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "### Scheduler one-off burst: N one-off jobs due at the same instant, 3 replicas (issue #31)\n"
        );
        let _ = writeln!(out, "{INTRO}\n");
        let rows = std::slice::from_ref(self);
        table_of(out, "rrrrrrrr", &TIMING, rows);
        table_of(out, "rlrrrrrr", &RUNS, rows);
        table_of(out, "rrrrrrrrr", &COSTS, rows);
        let t = &self.trim;
        let _ = writeln!(
            out,
            "Trim tail (the ledger back to {DEFAULT_HISTORY} runs): {} after {:.1} s ({} runs \
             left), redis-server CPU {:.1} µs per one-off, {} script calls.  ",
            if t.trimmed { "done" } else { "not done" },
            t.seconds,
            t.runs_left,
            t.server_cpu_us_per_job,
            t.trim_calls
        );
        let _ = writeln!(
            out,
            "Profile burst ({} one-offs, last start {:.1} ms after their instant), server time \
             in what the clients sent: µs per one-off · calls per one-off · share: {}  ",
            self.profile_jobs,
            self.profile_last_start_ms,
            profile_line(&self.profile, self.profile_jobs)
        );
        let _ = writeln!(
            out,
            "… and inside those scripts, by command: {}  ",
            profile_line(&self.profile_in_scripts, self.profile_jobs)
        );
        let _ = writeln!(
            out,
            "Commands in the burst window: {}\n",
            self.commands.summary()
        );
    }

    fn targets(&self) -> Vec<Target> {
        let b = &self.burst;
        let measured = format!("{} of {}", b.once, b.expected);
        let ok = b.exact() && self.foreign_runs == 0;
        let name = "scheduler one-off burst: every one-off ran exactly once";
        vec![Target::new(name, "all", measured, ok)]
    }
}

/// Enqueue and timing.
const TIMING: [Col<SchedOneOffResult>; 8] = [
    ("one-offs", |r| r.jobs.to_string()),
    ("enqueue s (per s)", |r| {
        format!("{:.2} ({:.0})", r.enqueue.seconds, r.enqueue.per_s)
    }),
    ("Redis CPU · µs in commands per enqueue", |r| {
        format!(
            "{:.1} · {:.1}",
            r.enqueue.server_cpu_us_per_job, r.enqueue.us_in_commands_per_job
        )
    }),
    ("first start − T ms", |r| {
        format!("{:.1}", r.burst.first_start_ms)
    }),
    ("start − T p50 / p99 ms", |r| {
        format!("{:.1} / {:.1}", r.burst.p50_ms, r.burst.p99_ms)
    }),
    ("last start − T ms", |r| {
        format!("{:.1}", r.burst.last_start_ms)
    }),
    ("last handler end · ended (ledger) − T ms", |r| {
        format!("{:.1} · {:.1}", r.burst.last_end_ms, r.ended_ms)
    }),
    ("runs / s", |r| format!("{:.0}", r.burst.starts_per_s())),
];

/// Exactly once and the share.
const RUNS: [Col<SchedOneOffResult>; 8] = [
    ("one-offs", |r| r.jobs.to_string()),
    ("runs r0 / r1 / r2 (share)", |r| {
        let total: u64 = r.burst.share.values().sum();
        joined(&["r0", "r1", "r2"], " / ", |id| {
            let n = r.burst.share.get(*id).copied().unwrap_or(0);
            format!("{n} ({:.0} %)", share_pct(n, total))
        })
    }),
    ("ran once", |r| {
        format!("{} of {}", r.burst.once, r.burst.expected)
    }),
    ("missing / duplicated", |r| {
        format!("{} / {}", r.burst.missing, r.burst.duplicated)
    }),
    ("started early", |r| r.burst.early.to_string()),
    ("other runs", |r| r.foreign_runs.to_string()),
    ("gap between a replica's starts p50 µs r0 / r1 / r2", |r| {
        joined(&["r0", "r1", "r2"], " / ", |id| {
            r.burst
                .gap_p50_us
                .get(*id)
                .map_or_else(|| "—".to_owned(), |g| format!("{g:.0}"))
        })
    }),
    ("slack: enqueue end → T s", |r| {
        format!("{:.1}", r.enqueue.slack_s)
    }),
];

/// Costs over the burst window.
const COSTS: [Col<SchedOneOffResult>; 9] = [
    ("burst window s", |r| format!("{:.2}", r.costs.window_s)),
    ("redis-server CPU µs / one-off (idle ms/s)", |r| {
        let c = &r.costs;
        format!(
            "{:.1} ({:.1})",
            c.server_cpu_us_per_job, c.server_idle_cpu_ms_per_s
        )
    }),
    ("redis-server CPU, % of a core", |r| {
        format!("{:.0}", r.costs.server_cpu_pct)
    }),
    ("µs in commands / one-off", |r| {
        format!("{:.1}", r.costs.us_in_commands_per_job)
    }),
    ("commands / one-off", |r| {
        format!("{:.1}", r.costs.commands_per_job)
    }),
    ("scripts + client-only calls (EVALSHA) / one-off", |r| {
        format!(
            "{:.2} ({:.2})",
            r.costs.scripts_per_job, r.costs.evalsha_per_job
        )
    }),
    ("replica CPU ms r0 / r1 / r2", |r| {
        joined(&r.costs.replica_cpu_ms, " / ", |v| format!("{v:.0}"))
    }),
    ("replicas' CPU µs / one-off", |r| {
        format!("{:.0}", r.costs.replicas_cpu_us_per_job)
    }),
    ("Redis + replicas, % of 2 vCPUs", |r| {
        format!("{:.0}", r.costs.machine_busy_pct)
    }),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hidden_job_is_the_handlers() {
        assert_eq!(ONE_OFF_JOB, format!("once:{SCHED_SCALE_HANDLER}"));
    }

    #[test]
    fn the_burst_is_due_on_a_whole_second_past_the_budget() {
        let now = i64::try_from(wall_ms().unwrap()).unwrap();
        let due = due_after(10_000).unwrap();
        assert_eq!(due % 1_000, 0);
        assert!(due >= now + 12_000 && due <= now + 13_100, "{due} vs {now}");
    }
}
