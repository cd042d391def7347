//! Scheduler scale stage (issue #31, `--only sched-scale`), the parent side: N run-time
//! schedules on a 1-second cron (`* * * * * *`, UTC) across 3 replica processes
//! (`dlock-bench sched-scale-replica`, [`crate::sched_scale_replica`]), for each N of
//! [`Counts::sched_scale_jobs`] (100, 300, 1,000). Does the fire delay grow with N, does every
//! occurrence still run exactly once, and what does an occurrence cost Redis and the replicas?
//!
//! Per N, after a `FLUSHALL`: the 3 replicas start together (`GO`), each registering the
//! handler; an admin `Scheduler` of this process (the handler registered, never run) adds the N
//! schedules `scale:<i>` with `add_schedule`, one after the other; after
//! [`SCHED_SCALE_WARMUP`] the measured window opens at the next whole second + 400 ms by the
//! wall clock and closes [`Counts::sched_scale_window_s`] seconds later (at + 400 ms again: one
//! occurrence's winning claim at its instant, the other replicas' claims half a second later,
//! so each edge cuts one occurrence's requests in two and the window holds as many as it has
//! occurrences). Then:
//!
//! * a **profile window** of [`SCHED_SCALE_PROFILE_S`] s in which redis-server logs every command
//!   with its duration (`SLOWLOG`, threshold 0, after the measured window so the logging's own
//!   cost stays out of it): `EVALSHA` time split by script, named by SHA1 (dlock-core's scripts
//!   from `dlock_core::ext::scripts`, dlock-scheduler's assembled here as its `scripts/mod.rs`
//!   does);
//! * the schedules are removed (`remove_schedule`), the replicas stopped (`STOP`) and their runs
//!   merged ([`crate::sched_scale_stats::merge`]).
//!
//! Figures per N: fire delay p50 / p99 / max (handler start by the wall clock, which is the
//! Redis server's clock on this machine, − nominal instant), exactly once per (schedule,
//! occurrence) of the window, runs per replica; `INFO commandstats` / `INFO cpu` over the window
//! per occurrence (schedules × seconds) and redis-server CPU as a share of one core; each
//! replica's CPU from `/proc/<pid>/stat` over the window.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dlock_scheduler::{JobContext, Scheduler};
use redis::Value;
use serde::{Deserialize, Serialize};

use crate::child::{GO, Group, STOP, args};
use crate::control::Control;
use crate::dlock::client;
use crate::redis_stats::{PerCommand, Snapshot, WindowDelta, idle_server_cpu_ms_per_s};
use crate::report::{Entry, Section, Target};
use crate::rt::{BoxError, current_thread_runtime, elapsed_ns};
use crate::sched_scale_replica::{ScaleReplicaReport, schedule_name};
use crate::sched_scale_stats::{Cost, Logged, Merged, merge, proc_cpu_us, profile, share_pct};
use crate::sched_stats::{next_edge, seconds_between};
use crate::spec::{
    Counts, SCHED_CRON, SCHED_EDGE_MS, SCHED_REPLICAS, SCHED_SCALE_HANDLER, SCHED_SCALE_PROFILE_S,
    SCHED_SCALE_WARMUP, SCHED_TZ,
};
use crate::stats::{count, float, ns_to_s, ratio};
use crate::subjects::Setting;
use crate::table::{Col, joined, table_of};

/// How long redis-server's idle CPU is measured before the replicas start.
const IDLE_SPAN: Duration = Duration::from_secs(2);
/// After the schedules are removed, before the replicas are stopped: every replica stops their
/// loops within a heartbeat.
const REMOVED_SETTLE: Duration = Duration::from_secs(2);
/// `USER_HZ`: the unit of `/proc/<pid>/stat`'s CPU times on Linux.
const TICKS_PER_S: u64 = 100;
/// Redis' defaults, restored after the profile window.
const SLOWLOG_DEFAULT_US: &str = "10000";
const SLOWLOG_DEFAULT_LEN: &str = "128";
/// Commands of the benchmark's own control connection, left out of the profile.
const OWN_COMMANDS: [&str; 3] = ["config", "slowlog", "info"];
/// How many entries of the profile the report shows per N.
const PROFILE_ROWS: usize = 8;

/// The scale stage: one row per number of schedules.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct SchedScaleResult {
    pub(crate) rows: Vec<ScaleRow>,
}

/// N schedules, one measured window and one profile window.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct ScaleRow {
    pub(crate) jobs: u64,
    pub(crate) window_s: f64,
    /// Schedules × seconds of the window.
    pub(crate) occurrences: u64,
    pub(crate) runs: Merged,
    /// Runs of a schedule not named `scale:<i>`, or manual (0 expected), over the whole run.
    pub(crate) foreign_runs: u64,
    /// Time to add the N schedules one after the other, and to remove them.
    pub(crate) add_s: f64,
    pub(crate) remove_s: f64,
    pub(crate) costs: ScaleCosts,
    /// `INFO commandstats` over the window: calls, and server time (µs; a script's includes the
    /// commands it calls, which are also listed on their own).
    pub(crate) commands: PerCommand,
    pub(crate) usec: PerCommand,
    /// The profile window: server time in what the clients sent, by script (`EVALSHA`) and
    /// by command, most first.
    pub(crate) profile: Vec<(String, Cost)>,
    /// The same for the commands the scripts called (their time is part of their script's).
    pub(crate) profile_in_scripts: Vec<(String, Cost)>,
    pub(crate) profile_s: f64,
    /// The profile window's occurrences (schedules × its seconds).
    pub(crate) profile_occurrences: u64,
}

/// What an occurrence costs over the window.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct ScaleCosts {
    /// redis-server CPU (`INFO cpu`, user + system) per occurrence, µs.
    pub(crate) server_cpu_us_per_occurrence: f64,
    /// redis-server CPU over the window, % of one core.
    pub(crate) server_cpu_pct: f64,
    /// redis-server CPU before the replicas started, ms/s.
    pub(crate) server_idle_cpu_ms_per_s: f64,
    /// Server time in what the clients sent (scripts with their inner commands, pub/sub, …)
    /// per occurrence, µs.
    pub(crate) server_us_in_commands_per_occurrence: f64,
    /// Every command Redis ran (Lua-internal calls included), per occurrence.
    pub(crate) commands_per_occurrence: f64,
    /// Scripts and other client-only commands per occurrence (client round trips, less the
    /// few plain `GET`s / `HGETALL`s of the schedules' revision).
    pub(crate) scripts_per_occurrence: f64,
    /// CPU of each replica over the window, ms per s, in replica order.
    pub(crate) replica_cpu_ms_per_s: Vec<f64>,
    /// CPU of all replicas per occurrence, µs.
    pub(crate) replicas_cpu_us_per_occurrence: f64,
}

/// Runs one row per number of schedules (0: not run).
pub(crate) fn run(s: &Setting) -> Result<Entry, BoxError> {
    let mut rows = Vec::new();
    for jobs in s.counts.sched_scale_jobs.into_iter().filter(|&n| n > 0) {
        eprintln!("  {jobs} run-time schedules on a 1-second cron …");
        rows.push(run_row(&s.url, &s.counts, jobs)?);
    }
    Entry::new("sched-scale", SchedScaleResult { rows })
}

/// What the parent gathered for one N, before the figures are computed.
struct Observed {
    jobs: u64,
    window_ms: (u64, u64),
    window_ns: u64,
    delta: WindowDelta,
    idle_ms_per_s: f64,
    replica_cpu_us: Vec<u64>,
    add_ns: u64,
    remove_ns: u64,
    logged: Vec<Logged>,
    profile_ns: u64,
    profile_seconds: u64,
    reports: Vec<ScaleReplicaReport>,
}

fn run_row(url: &str, counts: &Counts, jobs: u64) -> Result<ScaleRow, BoxError> {
    let runtime = current_thread_runtime()?;
    runtime.block_on(Control::fresh(url))?;
    // No response timeout: a busy server may answer `INFO` late, and `SLOWLOG GET` of a whole
    // profile window is a large reply.
    let mut control = runtime.block_on(Control::patient(url))?;
    let idle_ms_per_s = runtime.block_on(idle_server_cpu_ms_per_s(&mut control, IDLE_SPAN))?;
    let mut replicas = Group::ready((0..SCHED_REPLICAS).map(|replica| {
        let replica = replica.to_string();
        args("sched-scale-replica", url, counts, &["--process", &replica])
    }))?;
    let pids = replicas.pids();
    replicas.send(GO)?;
    let admin = runtime.block_on(async { admin(url) })?;
    let started = Instant::now();
    runtime.block_on(add_all(&admin, jobs))?;
    let add_ns = elapsed_ns(started);
    let start_ms = next_edge(
        wall_ms()? + crate::stats::millis(SCHED_SCALE_WARMUP),
        SCHED_EDGE_MS,
    );
    let end_ms = start_ms + counts.sched_scale_window_s * 1_000;
    sleep_until_wall(start_ms)?;
    let cpu_before = cpu_of(&pids)?;
    let before = runtime.block_on(Snapshot::take(&mut control))?;
    let start = Instant::now();
    sleep_until_wall(end_ms)?;
    let window_ns = elapsed_ns(start);
    let delta = runtime.block_on(before.delta(&mut control))?;
    let cpu_after = cpu_of(&pids)?;
    let (logged, profile_ns) = runtime.block_on(profile_window(&mut control))?;
    let started = Instant::now();
    runtime.block_on(remove_all(&admin, jobs))?;
    let remove_ns = elapsed_ns(started);
    std::thread::sleep(REMOVED_SETTLE);
    replicas.send(STOP)?;
    let reports = replicas.results::<ScaleReplicaReport>()?;
    let replica_cpu_us = cpu_after
        .iter()
        .zip(&cpu_before)
        .map(|(a, b)| a.saturating_sub(*b))
        .collect();
    Ok(summarize(Observed {
        jobs,
        window_ms: (start_ms, end_ms),
        window_ns,
        delta,
        idle_ms_per_s,
        replica_cpu_us,
        add_ns,
        remove_ns,
        logged,
        profile_ns,
        profile_seconds: SCHED_SCALE_PROFILE_S,
        reports,
    }))
}

/// The admin client: a `Scheduler` with the handler registered (`add_schedule` checks that the
/// handler exists), never run, so it claims nothing. Called inside the runtime (the client
/// spawns its tasks there).
pub(crate) fn admin(url: &str) -> Result<Scheduler, BoxError> {
    let noop = |_: JobContext| async { Ok::<(), BoxError>(()) };
    Ok(Scheduler::builder(client(url)?)
        .replica_id("admin")
        .handler(SCHED_SCALE_HANDLER, noop)
        .build()?)
}

async fn add_all(admin: &Scheduler, jobs: u64) -> Result<(), BoxError> {
    for i in 0..jobs {
        let name = schedule_name(i);
        admin
            .add_schedule(&name, SCHED_SCALE_HANDLER, SCHED_CRON, SCHED_TZ, &())
            .await?;
    }
    Ok(())
}

async fn remove_all(admin: &Scheduler, jobs: u64) -> Result<(), BoxError> {
    for i in 0..jobs {
        if !admin.remove_schedule(&schedule_name(i)).await? {
            return Err(format!(
                "schedule {} was gone before it was removed",
                schedule_name(i)
            )
            .into());
        }
    }
    Ok(())
}

/// User + system CPU of each process so far, µs.
pub(crate) fn cpu_of(pids: &[u32]) -> Result<Vec<u64>, BoxError> {
    pids.iter()
        .map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
            proc_cpu_us(&stat, TICKS_PER_S)
                .ok_or_else(|| format!("unreadable /proc/{pid}/stat: {stat}").into())
        })
        .collect()
}

/// The profile window: from the next edge, [`SCHED_SCALE_PROFILE_S`] seconds of every command
/// in the slow log; returns its entries (the benchmark's own left out) and its length (ns).
async fn profile_window(control: &mut Control) -> Result<(Vec<Logged>, u64), BoxError> {
    let start_ms = next_edge(wall_ms()?, SCHED_EDGE_MS);
    tokio::time::sleep(Duration::from_millis(start_ms.saturating_sub(wall_ms()?))).await;
    slowlog_everything(control).await?;
    let start = Instant::now();
    tokio::time::sleep(Duration::from_secs(SCHED_SCALE_PROFILE_S)).await;
    // Before the collect: its `SLOWLOG GET` (a large reply) is not part of the window.
    let profile_ns = elapsed_ns(start);
    let logged = slowlog_collect(control).await?;
    Ok((logged, profile_ns))
}

/// From now on, redis-server logs every command with its duration (`SLOWLOG`, threshold 0,
/// room for 2,000,000 entries, emptied first).
pub(crate) async fn slowlog_everything(control: &mut Control) -> Result<(), BoxError> {
    config_set(control, "slowlog-max-len", "2000000").await?;
    config_set(control, "slowlog-log-slower-than", "0").await?;
    redis::cmd("SLOWLOG")
        .arg("RESET")
        .query_async::<()>(control.conn())
        .await?;
    Ok(())
}

/// Stops [`slowlog_everything`] (Redis' defaults back) and returns what was logged, the
/// benchmark's own commands left out.
pub(crate) async fn slowlog_collect(control: &mut Control) -> Result<Vec<Logged>, BoxError> {
    config_set(control, "slowlog-log-slower-than", SLOWLOG_DEFAULT_US).await?;
    let entries: Value = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(-1)
        .query_async(control.conn())
        .await?;
    redis::cmd("SLOWLOG")
        .arg("RESET")
        .query_async::<()>(control.conn())
        .await?;
    config_set(control, "slowlog-max-len", SLOWLOG_DEFAULT_LEN).await?;
    Ok(parse_slowlog(&entries)?
        .into_iter()
        .filter(|e| {
            e.args
                .first()
                .is_some_and(|c| !OWN_COMMANDS.contains(&c.to_ascii_lowercase().as_str()))
        })
        .collect())
}

async fn config_set(control: &mut Control, name: &str, value: &str) -> Result<(), BoxError> {
    redis::cmd("CONFIG")
        .arg("SET")
        .arg(name)
        .arg(value)
        .query_async::<()>(control.conn())
        .await
        .map_err(|e| format!("CONFIG SET {name} {value}: {e}").into())
}

/// `SLOWLOG GET` entries: `[id, unix s, duration µs, [args…], client, name]`.
fn parse_slowlog(reply: &Value) -> Result<Vec<Logged>, BoxError> {
    let Value::Array(entries) = reply else {
        return Err(format!("SLOWLOG GET: not an array: {reply:?}").into());
    };
    let text = |v: &Value| match v {
        Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Value::SimpleString(s) => s.clone(),
        other => format!("{other:?}"),
    };
    entries
        .iter()
        .map(|entry| match entry {
            Value::Array(fields) => match (fields.get(2), fields.get(3)) {
                (Some(Value::Int(usec)), Some(Value::Array(args))) => Ok(Logged {
                    usec: u64::try_from(*usec)?,
                    args: args.iter().map(text).collect(),
                    client: fields.get(4).map(text).unwrap_or_default(),
                }),
                _ => Err(format!("SLOWLOG GET: unexpected entry {entry:?}").into()),
            },
            other => Err(format!("SLOWLOG GET: unexpected entry {other:?}").into()),
        })
        .collect()
}

/// SHA1 → script name, for every script dlock-core and dlock-scheduler send.
pub(crate) fn script_names() -> HashMap<String, String> {
    let mut names: HashMap<String, String> = dlock_core::ext::scripts()
        .map(|script| (script.sha1.to_owned(), script.name.to_owned()))
        .collect();
    for (name, text) in scheduler_scripts() {
        names.insert(
            redis::Script::new(&text).get_hash().to_owned(),
            format!("sched {name}"),
        );
    }
    names
}

/// dlock-scheduler's scripts as its `scripts/mod.rs` assembles them (`common.lua` first where it
/// says so); a script assembled differently shows as an unknown SHA in the profile.
fn scheduler_scripts() -> Vec<(&'static str, String)> {
    macro_rules! script {
        ($name:literal) => {
            (
                $name,
                include_str!(concat!("../../dlock-scheduler/src/scripts/", $name)).to_owned(),
            )
        };
        (common $name:literal) => {
            (
                $name,
                concat!(
                    include_str!("../../dlock-scheduler/src/scripts/common.lua"),
                    include_str!(concat!("../../dlock-scheduler/src/scripts/", $name))
                )
                .to_owned(),
            )
        };
    }
    vec![
        script!(common "claim.lua"),
        script!(common "take_request.lua"),
        script!(common "withdraw.lua"),
        script!(common "finish.lua"),
        script!(common "renew_attempt.lua"),
        script!(common "take_retry.lua"),
        script!(common "once.lua"),
        script!(common "once_cancel.lua"),
        script!("once_trim.lua"),
        script!("request.lua"),
        script!("resume.lua"),
        script!("schedule.lua"),
        script!("heartbeat.lua"),
        script!("register.lua"),
    ]
}

/// The figures of one N.
fn summarize(o: Observed) -> ScaleRow {
    let seconds: Vec<i64> = seconds_between(o.window_ms.0, o.window_ms.1)
        .into_iter()
        .map(|ms| ms / 1_000)
        .collect();
    let occurrences = o.jobs * count(seconds.len());
    let replicas: Vec<(String, Vec<_>)> = o
        .reports
        .iter()
        .map(|r| (r.id.clone(), r.runs.clone()))
        .collect();
    let runs = merge(&replicas, o.jobs, &seconds);
    let names = script_names();
    let window_s = ns_to_s(o.window_ns);
    let d = &o.delta;
    let replica_cpu_ms_per_s = o
        .replica_cpu_us
        .iter()
        .map(|us| float(*us) / 1e3 / window_s)
        .collect();
    let costs = ScaleCosts {
        server_cpu_us_per_occurrence: ratio(d.server_cpu_us, occurrences),
        server_cpu_pct: float(d.server_cpu_us) / 1e4 / window_s,
        server_idle_cpu_ms_per_s: o.idle_ms_per_s,
        server_us_in_commands_per_occurrence: ratio(d.usec.client_usec(&[]), occurrences),
        commands_per_occurrence: ratio(d.commands.total(), occurrences),
        scripts_per_occurrence: ratio(d.commands.round_trips(0), occurrences),
        replica_cpu_ms_per_s,
        replicas_cpu_us_per_occurrence: ratio(o.replica_cpu_us.iter().sum(), occurrences),
    };
    ScaleRow {
        jobs: o.jobs,
        window_s,
        occurrences,
        runs,
        foreign_runs: o.reports.iter().map(|r| r.foreign).sum(),
        add_s: ns_to_s(o.add_ns),
        remove_s: ns_to_s(o.remove_ns),
        costs,
        commands: d.commands.clone(),
        usec: d.usec.clone(),
        profile: profile(&o.logged, &names, false),
        profile_in_scripts: profile(&o.logged, &names, true),
        profile_s: ns_to_s(o.profile_ns),
        profile_occurrences: o.jobs * o.profile_seconds,
    }
}

/// The section's introduction.
const INTRO: &str = "3 replica processes (`Scheduler`, default options, ids r0 r1 r2), each \
    registering one handler by name (`builder.handler`); an admin client adds N run-time \
    schedules `scale:<i>` on `* * * * * *` (UTC) with `add_schedule`, one after the other, and \
    removes them after the windows. The handler sends nothing to Redis; it records its start by \
    the wall clock (CLOCK_REALTIME: the Redis server's clock on this machine). Fire delay = \
    handler start − nominal instant (µs resolution, shown in ms). Occurrences = schedules × \
    seconds of the window (edges at whole second + 400 ms). Client CPU from /proc/<pid>/stat \
    (10 ms ticks). Script profile: a separate window with `SLOWLOG` at threshold 0, EVALSHA \
    split by SHA1.";

impl Section for SchedScaleResult {
    fn details(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "### Scheduler at scale: N run-time schedules, 1-second cron, 3 replicas (issue #31)\n"
        );
        let _ = writeln!(out, "{INTRO}\n");
        table_of(out, "rrrrrrlr", &TIMING, &self.rows);
        table_of(out, "rrrrrrrlr", &COSTS, &self.rows);
        for row in &self.rows {
            let _ = writeln!(
                out,
                "Profile, {} schedules ({:.1} s, {} occurrences), server time in what the \
                 clients sent: µs per occurrence · calls per occurrence · share: {}  ",
                row.jobs,
                row.profile_s,
                row.profile_occurrences,
                profile_line(&row.profile, row.profile_occurrences)
            );
            let _ = writeln!(
                out,
                "… and inside those scripts, by command: {}  ",
                profile_line(&row.profile_in_scripts, row.profile_occurrences)
            );
        }
        out.push('\n');
        for row in &self.rows {
            let _ = writeln!(
                out,
                "Commands in the window ({} schedules): {}  ",
                row.jobs,
                row.commands.summary()
            );
        }
        out.push('\n');
    }

    fn targets(&self) -> Vec<Target> {
        let measured = joined(&self.rows, ", ", |r| {
            format!(
                "{}: {} of {}",
                r.jobs, r.runs.once.once, r.runs.once.expected
            )
        });
        let ok = !self.rows.is_empty()
            && self
                .rows
                .iter()
                .all(|r| r.runs.once.exact() && r.foreign_runs == 0 && r.runs.delays.early == 0);
        let name = "scheduler at scale: every (schedule, occurrence) ran exactly once (each N)";
        vec![Target::new(name, "all", measured, ok)]
    }
}

/// The first [`PROFILE_ROWS`] entries of a profile, per one of `per` (occurrences, one-off
/// jobs): µs · calls · share of the total time.
pub(crate) fn profile_line(profile: &[(String, Cost)], per: u64) -> String {
    let total: u64 = profile.iter().map(|(_, c)| c.usec).sum();
    let each = |n: u64| ratio(n, per);
    let shown = profile.iter().take(PROFILE_ROWS);
    let parts: Vec<String> = shown
        .map(|(name, c)| {
            format!(
                "{name} {:.1} · {:.2} · {:.0} %",
                each(c.usec),
                each(c.calls),
                share_pct(c.usec, total)
            )
        })
        .collect();
    format!("total {:.1} µs; {}", each(total), parts.join("; "))
}

/// Timing and correctness, a row per N.
const TIMING: [Col<ScaleRow>; 8] = [
    ("schedules", |r| r.jobs.to_string()),
    ("occurrences", |r| r.occurrences.to_string()),
    ("fire delay p50 / p99 / max ms", |r| {
        let d = &r.runs.delays;
        format!("{:.1} / {:.1} / {:.1}", d.p50_ms, d.p99_ms, d.max_ms)
    }),
    ("started early", |r| r.runs.delays.early.to_string()),
    ("ran once", |r| {
        format!("{} of {}", r.runs.once.once, r.runs.once.expected)
    }),
    ("missing / duplicated", |r| {
        let o = &r.runs.once;
        format!("{} / {}", o.missing, o.duplicated)
    }),
    ("runs r0 / r1 / r2 (share)", |r| {
        let total: u64 = r.runs.share.values().sum();
        joined(&["r0", "r1", "r2"], " / ", |id| {
            let n = r.runs.share.get(*id).copied().unwrap_or(0);
            format!("{n} ({:.0} %)", share_pct(n, total))
        })
    }),
    ("add N schedules s", |r| format!("{:.2}", r.add_s)),
];

/// Costs, a row per N.
const COSTS: [Col<ScaleRow>; 9] = [
    ("schedules", |r| r.jobs.to_string()),
    ("redis-server CPU µs / occurrence (idle ms/s)", |r| {
        let c = &r.costs;
        format!(
            "{:.1} ({:.1})",
            c.server_cpu_us_per_occurrence, c.server_idle_cpu_ms_per_s
        )
    }),
    ("redis-server CPU, % of a core", |r| {
        format!("{:.1}", r.costs.server_cpu_pct)
    }),
    ("µs in commands / occurrence", |r| {
        format!("{:.1}", r.costs.server_us_in_commands_per_occurrence)
    }),
    ("commands / occurrence", |r| {
        format!("{:.1}", r.costs.commands_per_occurrence)
    }),
    ("scripts + pub/sub calls / occurrence", |r| {
        format!("{:.2}", r.costs.scripts_per_occurrence)
    }),
    ("EVALSHA µs / occurrence", |r| {
        format!("{:.1}", ratio(r.usec.get("evalsha"), r.occurrences))
    }),
    ("replica CPU ms/s r0 / r1 / r2", |r| {
        joined(&r.costs.replica_cpu_ms_per_s, " / ", |v| format!("{v:.0}"))
    }),
    ("replicas' CPU µs / occurrence", |r| {
        format!("{:.0}", r.costs.replicas_cpu_us_per_occurrence)
    }),
];

/// Wall-clock time, Unix ms: occurrences are wall-clock instants.
pub(crate) fn wall_ms() -> Result<u64, BoxError> {
    Ok(u64::try_from(
        SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis(),
    )?)
}

pub(crate) fn sleep_until_wall(at_ms: u64) -> Result<(), BoxError> {
    let now = wall_ms()?;
    if at_ms > now {
        std::thread::sleep(Duration::from_millis(at_ms - now));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scheduler_and_core_script_has_a_distinct_name() {
        let names = script_names();
        let core = dlock_core::ext::scripts().count();
        assert_eq!(names.len(), core + scheduler_scripts().len());
        assert!(names.values().any(|n| n == "sched claim.lua"));
        assert!(names.values().any(|n| n == "acquire.lua"));
    }

    #[test]
    fn slowlog_entries_parse() {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let reply = Value::Array(vec![Value::Array(vec![
            Value::Int(7),
            Value::Int(1_700_000_000),
            Value::Int(12),
            Value::Array(vec![bulk("EVALSHA"), bulk("abc"), bulk("1")]),
            bulk("127.0.0.1:5"),
            bulk(""),
        ])]);
        let parsed = parse_slowlog(&reply).unwrap();
        assert_eq!(parsed.len(), 1);
        assert_eq!(parsed[0].usec, 12);
        assert_eq!(parsed[0].args, ["EVALSHA", "abc", "1"]);
        assert!(parse_slowlog(&Value::Nil).is_err());
    }
}
