//! Conformance of the scheduler's Lua scripts (`dlock-scheduler/src/scripts/*.lua`, issue 46) to
//! the scheduler's models in `dlock-model`: the model's own steps, drawn at random from the
//! steps it offers in each state (and fixed walks for the hard states), are sent to a real
//! `redis-server` with a movable clock as the scheduler sends them (the scripts' texts from
//! `dlock_scheduler::__private::conformance`), and after every step the replies and the decoded
//! Redis state are compared with the model's.
//!
//! - `attempts.rs`: the attempt protocol (`attempts.rs` of the model): `claim.lua`'s
//!   at-least-once claim, `take_retry.lua`, `renew_attempt.lua`, `finish.lua`, and a one-off
//!   job's start (`once.lua`).
//! - `schedules.rs`: run-time schedules (`schedules.rs` of the model): `schedule.lua` and the
//!   replicas' reads of the revision and the record.
//! - `coverage.rs`: every reply path of every scheduler script, and how often the run reached
//!   it (the same debugger-based count as the lock scripts', `../coverage.rs`).
//! - `mutants.rs`: protocol bugs in the scheduler's scripts, for `make model-mutants`.
//!
//! The scripts without a model step yet (issue 46's first item, modelled in another branch)
//! are listed in the coverage report with their paths unreached and the reason.

mod attempts;
mod coverage;
mod job;
pub(crate) mod mutants;
mod schedules;

use std::collections::BTreeMap;
use std::time::Duration;

use dlock_scheduler::__private::conformance::Script;
use dlock_testkit::{RedisServer, ServerOptions};
use redis::Value;

use crate::mutants::Mutant;
use crate::redis_side::{Answer, answer, debug};

pub(crate) use coverage::Tally;

/// One model tick in ms of the server's clock: far longer than a walk runs, so real time never
/// moves a deadline past a tick; only jumps do.
pub(crate) const UNIT: u64 = 100_000;

/// What the scheduler's part of a run did.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counts {
    /// Walks (random and fixed).
    pub walks: usize,
    /// Model steps taken.
    pub steps: usize,
    /// Script calls compared.
    pub calls: usize,
    /// How long the part took.
    pub seconds: f64,
}

/// The real side: one server with a movable clock, the scripts (as loaded: mutated, with a
/// mutant), and the paths reached when they are counted.
pub(crate) struct Sched {
    server: RedisServer,
    con: redis::Connection,
    texts: BTreeMap<Script, String>,
    /// The reply paths reached (`coverage.rs`): each call then runs under the debugger.
    pub tally: Option<Tally>,
    /// The server's time (ms) when the walk started: tick 0.
    t0: u64,
    /// The ticks the clock was moved since.
    ticks: u64,
    /// Calls made.
    pub calls: usize,
}

impl Sched {
    /// Starts the server; `mutant` changes the scripts' texts (`mutants.rs`).
    pub(crate) fn start(mutant: Option<Mutant>, count_paths: bool) -> Result<Self, String> {
        let server = RedisServer::start_with(ServerOptions::new().movable_clock())
            .map_err(|e| format!("redis-server: {e}"))?;
        let con = server.connection().map_err(|e| format!("connect: {e}"))?;
        let mut texts = BTreeMap::new();
        for script in Script::ALL {
            let text = script.text().to_owned();
            let text = match mutant {
                Some(m) => m.swap(text),
                None => text,
            };
            texts.insert(script, text);
        }
        let tally = if count_paths {
            Some(Tally::new()?)
        } else {
            None
        };
        Ok(Self {
            server,
            con,
            texts,
            tally,
            t0: 0,
            ticks: 0,
            calls: 0,
        })
    }

    /// A clean slate for the next walk: no keys; tick 0 is now.
    pub(crate) fn reset(&mut self) -> Result<(), String> {
        redis::cmd("FLUSHALL")
            .exec(&mut self.con)
            .map_err(|e| format!("FLUSHALL: {e}"))?;
        self.t0 = self.now_ms()?;
        self.ticks = 0;
        Ok(())
    }

    /// The server's time in ms.
    pub(crate) fn now_ms(&mut self) -> Result<u64, String> {
        let (s, us): (u64, u64) = redis::cmd("TIME")
            .query(&mut self.con)
            .map_err(|e| format!("TIME: {e}"))?;
        Ok(s * 1000 + us / 1000)
    }

    /// The server's time (ms) when the walk began.
    pub(crate) fn t0(&self) -> u64 {
        self.t0
    }

    /// Moves the server clock one tick (and 2 ms, so that no deadline is met exactly: the
    /// model counts a deadline reached as passed).
    pub(crate) fn tick(&mut self) -> Result<(), String> {
        self.ticks += 1;
        self.server
            .jump_clock(Duration::from_millis(UNIT + 2))
            .map_err(|e| format!("jump_clock: {e}"))
    }

    /// The tick of a server time in ms (a deadline or a due time the scripts wrote).
    pub(crate) fn tick_of(&self, ms: i64) -> Result<u8, String> {
        let since = u64::try_from(ms)
            .ok()
            .and_then(|ms| ms.checked_sub(self.t0))
            .ok_or_else(|| format!("the time {ms} is before the walk began ({})", self.t0))?;
        u8::try_from(since / UNIT).map_err(|_| format!("the time {ms} is beyond the walk"))
    }

    /// Runs `script` with `keys` and `args` (under the debugger when paths are counted).
    pub(crate) fn call(
        &mut self,
        script: Script,
        keys: &[&str],
        args: &[String],
    ) -> Result<Answer, String> {
        self.calls += 1;
        let text = self.texts.get(&script).ok_or("script missing")?.clone();
        if let Some(lines) = self.tally.as_ref().map(|t| t.breakpoints(script)) {
            let (reply, hits) = debug::run(&self.server, &text, keys, args, &lines)?;
            if let Some(tally) = &mut self.tally {
                tally.record(script, &hits);
            }
            return Ok(reply);
        }
        let script = redis::Script::new(&text);
        let mut invocation = script.prepare_invoke();
        for key in keys {
            invocation.key(*key);
        }
        for arg in args {
            invocation.arg(arg.as_str());
        }
        answer(invocation.invoke::<Value>(&mut self.con))
    }

    /// A plain command's reply (a read of the decoded state).
    pub(crate) fn read<T: redis::FromRedisValue>(&mut self, cmd: &redis::Cmd) -> Result<T, String> {
        cmd.query(&mut self.con)
            .map_err(|e| format!("{cmd:?}: {e}"))
    }

    /// A new connection (a subscriber).
    pub(crate) fn connection(&self) -> Result<redis::Connection, String> {
        self.server
            .connection()
            .map_err(|e| format!("connect: {e}"))
    }
}

/// A reply's integers (`Value::Int` and numeric bulk strings), `None` for others.
pub(crate) fn ints(reply: &Value) -> Vec<Option<i64>> {
    match reply {
        Value::Array(items) => items.iter().map(int).collect(),
        other => vec![int(other)],
    }
}

/// One integer reply element.
pub(crate) fn int(value: &Value) -> Option<i64> {
    match value {
        Value::Int(n) => Some(*n),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

/// One text reply element.
pub(crate) fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

/// A reply that is not an error, or why.
pub(crate) fn ok(answer: Answer, what: &str) -> Result<Value, String> {
    answer.map_err(|(code, detail)| format!("{what} answered the error {code} {detail}"))
}

/// A tiny deterministic generator (splitmix64): the walks are the same every run for a seed.
pub(crate) struct Dice(u64);

impl Dice {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// A number below `n` (`n` > 0).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z % n as u64) as usize
    }
}

/// The coverage report as printed, and the paths that fail its check.
pub(crate) type Report = (String, Vec<String>);

/// Runs the scheduler's part: every walk, on scripts with `mutant` applied (`None`: as
/// shipped), counting paths when `count_paths`. The counts and the coverage report (with the
/// paths that fail its check), or the first difference.
pub(crate) fn run(
    mutant: Option<Mutant>,
    walks: usize,
    seed: u64,
    count_paths: bool,
) -> Result<(Counts, Option<Report>), String> {
    let mut sched = Sched::start(mutant, count_paths)?;
    let mut counts = Counts::default();
    attempts::run(&mut sched, walks, seed, &mut counts)?;
    schedules::run(&mut sched, walks, seed, &mut counts)?;
    job::run(&mut sched, walks, seed, &mut counts)?;
    counts.calls = sched.calls;
    let report = sched.tally.take().map(|t| t.report());
    Ok((counts, report))
}

/// The job's keys (as `ledger.rs` names them) and the registry's, for every driver here.
pub(super) struct Keys {
    pub(super) claims: String,
    pub(super) runs: String,
    pub(super) ledger: String,
    pub(super) paused: String,
    pub(super) replicas: String,
    pub(super) turn: String,
    pub(super) retries: String,
    pub(super) requests: String,
    pub(super) wake: String,
    pub(super) index: String,
}

impl Keys {
    pub(super) fn new() -> Self {
        let key = |k: &str| format!("cf:{{sched:j}}:{k}");
        Self {
            claims: key("claims"),
            runs: key("runs"),
            ledger: key("ledger"),
            paused: key("paused"),
            replicas: key("replicas"),
            turn: key("turn"),
            retries: key("retries"),
            requests: key("requests"),
            wake: key("wake"),
            index: "cf:{sched:}:registry".into(),
        }
    }

    /// An instance's registry entry.
    pub(super) fn entry(&self, token: &str) -> String {
        format!("{}:{token}", self.index)
    }
}
