//! Run-time schedules (`dlock_model::schedules`) in lockstep with `schedule.lua`: the
//! operator's `Change` steps are sent as `schedule_store.rs` sends them, a replica's look and
//! read as the two reads `follow.rs` makes (the revision, then the record); after every step
//! the hash and the revision counter are compared with the model's, and so is the wake-up
//! message (one per change, carrying the new revision; none for a call that changes nothing).
//!
//! One step is the driver's own: `Again`, the last record sent again (a retried call, or an
//! operator repeating it), which the model offers no step for because it changes nothing —
//! `schedule.lua` must answer "unchanged" and publish nothing.

use std::time::Duration;

use dlock_model::schedules::{Reading, ScheduleAction, ScheduleModel, ScheduleState, Version};
use dlock_scheduler::__private::conformance::Script;
use redis::Value;
use stateright::Model;

use super::{Counts, Dice, Sched, ints, ok, text};

const HASH: &str = "cf:{sched:}:schedules";
const REV: &str = "cf:{sched:}:schedules:rev";
const WAKE: &str = "cf:{sched:}:schedules:wake";
/// The schedule's name.
const NAME: &str = "s";
/// The longest walk.
const MAX_STEPS: usize = 40;

/// The record of a version, as JSON the script stores without reading.
fn record(version: Option<Version>) -> &'static str {
    match version {
        None => "",
        Some(Version::First) => "{\"v\":1,\"cron\":\"0 * * * *\"}",
        Some(Version::Second) => "{\"v\":1,\"cron\":\"30 * * * *\"}",
    }
}

#[derive(Clone, Copy, Debug)]
enum Step {
    Model(ScheduleAction),
    /// schedule.lua with the stored record again.
    Again,
}

/// `walks` random walks, and the fixed one.
pub(super) fn run(
    sched: &mut Sched,
    walks: usize,
    seed: u64,
    counts: &mut Counts,
) -> Result<(), String> {
    let mut sub = sched.connection()?;
    sub.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| format!("read timeout: {e}"))?;
    sub.send_packed_command(&redis::cmd("SUBSCRIBE").arg(WAKE).get_packed_command())
        .map_err(|e| format!("SUBSCRIBE: {e}"))?;
    drain(&mut sub)?;
    let model = ScheduleModel::new(None);
    let mut dice = Dice::new(seed ^ 0x5c4e_d01e);
    for n in 0..walks {
        let mut walk = Walk::start(sched, &mut sub, &model)?;
        let steps = walk.random(&mut dice).map_err(|e| walk.failed(n, &e))?;
        counts.walks += 1;
        counts.steps += steps;
    }
    // A look that straddles a change: the replica reads the old revision, the operator
    // changes the schedule, the replica reads the new record under the old revision and
    // looks again at its next heartbeat.
    use ScheduleAction::*;
    let straddle = [
        Step::Model(Change(Some(Version::First))),
        Step::Model(Look(0)),
        Step::Model(Change(Some(Version::Second))),
        Step::Model(Read(0)),
        Step::Again,
        Step::Model(Lose(1)),
        Step::Model(Look(1)),
        Step::Model(Read(1)),
    ];
    let mut walk = Walk::start(sched, &mut sub, &model)?;
    for step in straddle {
        walk.take(step).map_err(|e| {
            format!(
                "fixed walk `a look straddles a change`: {}",
                walk.failed(0, &e)
            )
        })?;
    }
    counts.walks += 1;
    counts.steps += straddle.len();
    Ok(())
}

struct Walk<'a> {
    sched: &'a mut Sched,
    sub: &'a mut redis::Connection,
    model: &'a ScheduleModel,
    state: ScheduleState,
    trail: Vec<String>,
}

impl<'a> Walk<'a> {
    fn start(
        sched: &'a mut Sched,
        sub: &'a mut redis::Connection,
        model: &'a ScheduleModel,
    ) -> Result<Self, String> {
        sched.reset()?;
        let state = model
            .init_states()
            .into_iter()
            .next()
            .ok_or("the model has no start")?;
        Ok(Self {
            sched,
            sub,
            model,
            state,
            trail: Vec::new(),
        })
    }

    fn failed(&self, n: usize, why: &str) -> String {
        format!(
            "schedule walk {n}: {why}\n  steps: {}",
            self.trail.join(", ")
        )
    }

    fn random(&mut self, dice: &mut Dice) -> Result<usize, String> {
        let mut steps = 0;
        while steps < MAX_STEPS {
            let mut offered = Vec::new();
            self.model.actions(&self.state, &mut offered);
            let mut choices: Vec<Step> = offered.into_iter().map(Step::Model).collect();
            choices.push(Step::Again);
            self.take(choices[dice.below(choices.len())])?;
            steps += 1;
        }
        Ok(steps)
    }

    fn take(&mut self, step: Step) -> Result<(), String> {
        self.trail.push(format!("{step:?}"));
        let heard = match step {
            Step::Again => {
                let existed = self.state.stored.is_some();
                let reply = self.change(self.state.stored)?;
                expect_change(&reply, 0, existed)?;
                None
            }
            Step::Model(action) => {
                let mut offered = Vec::new();
                self.model.actions(&self.state, &mut offered);
                if !offered.contains(&action) {
                    return Err(format!("the model does not offer {action:?} here"));
                }
                let next = self
                    .model
                    .next_state(&self.state, action)
                    .ok_or_else(|| format!("the model refuses {action:?}"))?;
                let before = std::mem::replace(&mut self.state, next);
                self.send(action, &before)?
            }
        };
        let messages = drain(self.sub)?;
        let want: Vec<String> = heard.into_iter().collect();
        if messages != want {
            return Err(format!(
                "the wake channel carried {messages:?}; the model's step: {want:?}"
            ));
        }
        self.compare()
    }

    /// The step's scripts and reads; the wake-up message it publishes, if any.
    fn send(
        &mut self,
        action: ScheduleAction,
        before: &ScheduleState,
    ) -> Result<Option<String>, String> {
        match action {
            ScheduleAction::Tick | ScheduleAction::Lose(_) => Ok(None),
            ScheduleAction::Change(version) => {
                let reply = self.change(version)?;
                expect_change(&reply, 1, before.stored.is_some())?;
                Ok(Some(self.state.revision.to_string()))
            }
            ScheduleAction::Look(r) => {
                // follow.rs reads the revision; the model's look keeps what it read.
                let rev = self.revision()?;
                match self.state.followers[r].reading {
                    Some(Reading::Revision(want)) if want != rev => Err(format!(
                        "the replica read revision {rev}; the model's look read {want}"
                    )),
                    _ => Ok(None),
                }
            }
            ScheduleAction::Read(r) => {
                // Then the record, and its jobs follow it.
                let stored: Option<String> =
                    self.sched.read(redis::cmd("HGET").arg(HASH).arg(NAME))?;
                let f = &self.state.followers[r];
                let want = if f.has_handler { f.running } else { None };
                let got = if f.has_handler {
                    version_of(stored.as_deref())?
                } else {
                    None
                };
                if got == want {
                    Ok(None)
                } else {
                    Err(format!(
                        "the replica read {stored:?}; the model's replica runs {want:?}"
                    ))
                }
            }
        }
    }

    /// schedule.lua, as `schedule_store.rs` sends it.
    fn change(&mut self, version: Option<Version>) -> Result<Value, String> {
        let args = [NAME, record(version), WAKE, "PUBLISH"].map(String::from);
        ok(
            self.sched.call(Script::Schedule, &[HASH, REV], &args)?,
            "schedule.lua",
        )
    }

    fn revision(&mut self) -> Result<u8, String> {
        let rev: Option<u8> = self.sched.read(redis::cmd("GET").arg(REV))?;
        Ok(rev.unwrap_or(0))
    }

    /// The hash and the counter against the model's.
    fn compare(&mut self) -> Result<(), String> {
        let all: Vec<(String, String)> = self.sched.read(redis::cmd("HGETALL").arg(HASH))?;
        let rev = self.revision()?;
        let stored = match all.as_slice() {
            [] => None,
            [(name, value)] if name == NAME => version_of(Some(value))?,
            other => return Err(format!("the hash holds {other:?}")),
        };
        if (stored, rev) != (self.state.stored, self.state.revision) {
            return Err(format!(
                "Redis holds {stored:?} at revision {rev}; the model {:?} at {}",
                self.state.stored, self.state.revision
            ));
        }
        Ok(())
    }
}

/// The model's version of a stored record.
fn version_of(stored: Option<&str>) -> Result<Option<Version>, String> {
    [None, Some(Version::First), Some(Version::Second)]
        .into_iter()
        .find(|v| v.is_some() && Some(record(*v)) == stored || v.is_none() && stored.is_none())
        .ok_or_else(|| format!("a record the walk never wrote: {stored:?}"))
}

/// schedule.lua's reply `{changed, existed}`.
fn expect_change(reply: &Value, changed: i64, existed: bool) -> Result<(), String> {
    if ints(reply) == [Some(changed), Some(i64::from(existed))] {
        Ok(())
    } else {
        Err(format!(
            "schedule.lua answered {reply:?}; the model: {{{changed}, {}}}",
            i64::from(existed)
        ))
    }
}

/// The messages the subscriber received since the last drain (a PING marks the end).
pub(super) fn drain(sub: &mut redis::Connection) -> Result<Vec<String>, String> {
    sub.send_packed_command(&redis::cmd("PING").get_packed_command())
        .map_err(|e| format!("PING: {e}"))?;
    let mut out = Vec::new();
    loop {
        let value = sub
            .recv_response()
            .map_err(|e| format!("subscription: {e}"))?;
        let items = match &value {
            Value::Array(items) | Value::Push { data: items, .. } => items.as_slice(),
            _ => return Err(format!("subscription: {value:?}")),
        };
        match items.first().and_then(text).as_deref() {
            Some("pong") => return Ok(out),
            Some("subscribe") => {}
            Some("message") => out.push(items.get(2).and_then(text).unwrap_or_default()),
            _ => return Err(format!("subscription: {value:?}")),
        }
    }
}
