//! The attempt protocol (`dlock_model::attempts`) in lockstep with the shipped scripts: each
//! walk starts from one of the model's starts — a scheduled run (claimed by `claim.lua`) or a
//! one-off job (enqueued by `once.lua`, its first attempt taken by `take_retry.lua`) — and
//! takes the model's steps, each drawn from the steps the model offers in its state (or a fixed
//! walk's). A step that is a script call in the scheduler is sent as the scheduler sends it;
//! its reply is checked against what the model's step did, and then the run's records (its
//! claim, end record, earlier attempts and place in `retries`) against the model's `Records`.
//!
//! Not scripts, so model-only here: the run's dlock mutex (`Lock`, and its lease in `Renew`),
//! which the lock scripts' conformance covers, and the adversary's kills and pauses (a replica
//! that stops calling). One step is the driver's own: `Resend` repeats the last `finish.lua`
//! call (a reply that was lost), which must answer the same and change nothing.

use dlock_model::attempts::{
    AttemptAction, AttemptModel, AttemptState, BACKOFF, End, LEASE, MAX_ATTEMPTS, ONE_OFF_DUE,
    Outcome, Task,
};
use dlock_scheduler::__private::conformance::Script;
use redis::Value;
use stateright::Model;

use super::{Counts, Dice, Keys, Sched, UNIT, ints, ok, text};

/// The scheduled run's id and nominal occurrence (ms).
const SCHEDULED_ID: &str = "1000";
/// The one-off job's run id (once.lua: "o" + 16 hex digits).
const ONE_OFF_ID: &str = "o00000000000000a1";
/// The one-off job's arguments.
const ARGS: &str = "{\"n\":1}";
/// The longest walk.
const MAX_STEPS: usize = 60;

/// A model token as the attempt token the scheduler sends (0: once.lua's attempt 0, none).
fn token(t: u8) -> String {
    if t == 0 {
        String::new()
    } else {
        format!("t{t}")
    }
}

/// One walk's state on both sides.
struct Walk<'a> {
    sched: &'a mut Sched,
    model: AttemptModel,
    state: AttemptState,
    keys: Keys,
    id: &'static str,
    /// The last finish.lua call (arguments) and its reply, for `Resend`.
    last_finish: Option<(Vec<String>, Value)>,
    trail: Vec<String>,
}

/// Every walk: `walks` random ones from each start, then the fixed ones.
pub(super) fn run(
    sched: &mut Sched,
    walks: usize,
    seed: u64,
    counts: &mut Counts,
) -> Result<(), String> {
    let mut dice = Dice::new(seed ^ 0xa77e_4d75);
    for n in 0..walks {
        for one_off in [false, true] {
            let mut walk = Walk::start(sched, one_off)?;
            let steps = walk.random(&mut dice).map_err(|e| walk.failed(n, &e))?;
            counts.walks += 1;
            counts.steps += steps;
        }
    }
    for (name, one_off, steps) in fixed() {
        let mut walk = Walk::start(sched, one_off)?;
        for step in steps {
            walk.take(*step)
                .map_err(|e| format!("fixed walk `{name}`: {}", walk.failed(0, &e)))?;
        }
        counts.walks += 1;
        counts.steps += steps.len();
    }
    Ok(())
}

/// A step of a walk: the model's, or the driver's `Resend`.
#[derive(Clone, Copy, Debug)]
enum Step {
    Model(AttemptAction),
    /// finish.lua again, as a replica whose reply was lost sends it.
    Resend,
}

/// The fixed walks for the hard states (the steps must be the model's own, in order).
fn fixed() -> Vec<(&'static str, bool, &'static [Step])> {
    use AttemptAction::*;
    use Step::{Model as M, Resend};
    vec![
        (
            // A replica dies while its attempt runs: the lease lapses, another settles it
            // abandoned and takes the retry, which succeeds; the dead attempt's late records
            // are refused.
            "a running attempt's replica dies",
            false,
            &[
                M(Claim(0)),
                M(Lock(0)),
                M(RecordRunning(0)),
                M(Kill(0)),
                M(Tick),
                M(Tick),
                M(TakeRetry(1)),
                M(Tick),
                M(TakeRetry(1)),
                M(Lock(1)),
                M(RecordRunning(1)),
                M(Tick),
                M(Finish(1, true)),
                Resend,
            ],
        ),
        (
            // A paused replica wakes up superseded: its renewal and records are refused.
            "a paused attempt wakes up superseded",
            true,
            &[
                M(Tick),
                M(TakeRetry(0)),
                M(Lock(0)),
                M(RecordRunning(0)),
                M(Pause(0)),
                M(Tick),
                M(Tick),
                M(TakeRetry(1)),
                M(Tick),
                M(TakeRetry(1)),
                M(Resume(0)),
                M(Renew(0)),
            ],
        ),
        (
            // The same, but the woken attempt ends its handler before it renews: its end is
            // refused (another attempt holds the run).
            "a superseded attempt records its end",
            true,
            &[
                M(Tick),
                M(TakeRetry(0)),
                M(Lock(0)),
                M(RecordRunning(0)),
                M(Pause(0)),
                M(Tick),
                M(Tick),
                M(TakeRetry(1)),
                M(Tick),
                M(TakeRetry(1)),
                M(Resume(0)),
                M(Finish(0, true)),
            ],
        ),
        (
            // A paused attempt is found abandoned, then wakes and ends before the retry is
            // claimed: its end is refused (the run is recorded abandoned).
            "an abandoned attempt records its end",
            false,
            &[
                M(Claim(0)),
                M(Lock(0)),
                M(RecordRunning(0)),
                M(Pause(0)),
                M(Tick),
                M(Tick),
                M(TakeRetry(1)),
                M(Resume(0)),
                M(Finish(0, true)),
            ],
        ),
        (
            // The same, but the woken attempt renews first: refused, though the run waits in
            // `retries` for its next attempt (the renewal must not move that time).
            "an abandoned attempt renews",
            false,
            &[
                M(Claim(0)),
                M(Lock(0)),
                M(RecordRunning(0)),
                M(Pause(0)),
                M(Tick),
                M(Tick),
                M(TakeRetry(1)),
                M(Resume(0)),
                M(Renew(0)),
            ],
        ),
        (
            // Both attempts fail: the run ends final after the last, and a resent end
            // changes nothing.
            "every attempt fails",
            false,
            &[
                M(Claim(0)),
                M(Lock(0)),
                M(RecordRunning(0)),
                M(Tick),
                M(Finish(0, false)),
                Resend,
                M(Tick),
                M(TakeRetry(1)),
                M(Lock(1)),
                M(RecordRunning(1)),
                M(Tick),
                M(Finish(1, false)),
                Resend,
            ],
        ),
    ]
}

impl<'a> Walk<'a> {
    /// A clean server and the model's start; a one-off job is enqueued by once.lua first.
    fn start(sched: &'a mut Sched, one_off: bool) -> Result<Self, String> {
        sched.reset()?;
        let model = if one_off {
            AttemptModel::one_off(None)
        } else {
            AttemptModel::new(None)
        };
        let state = model
            .init_states()
            .into_iter()
            .next()
            .ok_or("the model has no start")?;
        let mut walk = Self {
            sched,
            model,
            state,
            keys: Keys::new(),
            id: if one_off { ONE_OFF_ID } else { SCHEDULED_ID },
            last_finish: None,
            trail: Vec::new(),
        };
        if one_off {
            walk.trail.push("once.lua".into());
            walk.enqueue()?;
        }
        walk.compare()?;
        Ok(walk)
    }

    /// Why the walk failed, with its steps so far.
    fn failed(&self, n: usize, why: &str) -> String {
        format!(
            "attempt walk {n} ({}): {why}\n  steps: {}",
            if self.id == ONE_OFF_ID {
                "one-off"
            } else {
                "scheduled"
            },
            self.trail.join(", ")
        )
    }

    /// Random steps among those the model offers, until none is left or the walk is long.
    fn random(&mut self, dice: &mut Dice) -> Result<usize, String> {
        let mut steps = 0;
        while steps < MAX_STEPS {
            let mut offered = Vec::new();
            self.model.actions(&self.state, &mut offered);
            let over = matches!(self.state.redis.end, End::Ended { next: None, .. })
                && self
                    .state
                    .replicas
                    .iter()
                    .all(|r| r.task == Task::Idle && !r.paused);
            if over || offered.is_empty() {
                break;
            }
            // The adversary's faults are drawn rarely (one step in eight when any is offered),
            // so that the walks also reach the attempts that end by themselves before a fault
            // (a first attempt that fails and is retried).
            let (faults, mut choices): (Vec<Step>, Vec<Step>) =
                offered.into_iter().map(Step::Model).partition(|s| {
                    matches!(
                        s,
                        Step::Model(AttemptAction::Kill(_) | AttemptAction::Pause(_))
                    )
                });
            if self.last_finish.is_some() {
                choices.push(Step::Resend);
            }
            let pick = if !faults.is_empty() && (choices.is_empty() || dice.below(8) == 0) {
                faults
            } else {
                choices
            };
            self.take(pick[dice.below(pick.len())])?;
            steps += 1;
        }
        Ok(steps)
    }

    /// One step on both sides, then the comparison.
    fn take(&mut self, step: Step) -> Result<(), String> {
        self.trail.push(format!("{step:?}"));
        match step {
            Step::Resend => self.resend()?,
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
                // A resend follows its finish.lua call at once (the retry of a lost reply).
                self.last_finish = None;
                self.send(action, &before)?;
            }
        }
        self.compare()
    }

    /// once.lua, as `Scheduler::run_in` sends it (due in ONE_OFF_DUE ticks).
    fn enqueue(&mut self) -> Result<(), String> {
        let k = &self.keys;
        let keys = [&k.claims, &k.runs, &k.ledger, &k.retries].map(String::as_str);
        let args = [
            ONE_OFF_ID.into(),
            String::new(),
            String::new(),
            (u64::from(ONE_OFF_DUE) * UNIT).to_string(),
            "r9".into(),
            "host".into(),
            "1".into(),
            ARGS.into(),
            (100 * UNIT).to_string(),
            k.wake.clone(),
            "once:h".into(),
            "PUBLISH".into(),
        ];
        let reply = ok(self.sched.call(Script::Once, &keys, &args)?, "once.lua")?;
        let got = ints(&reply);
        let Value::Array(items) = &reply else {
            return Err(format!("once.lua: {reply:?}"));
        };
        let due = got.get(2).copied().flatten().ok_or("once.lua: no due")?;
        if got.first() != Some(&Some(1))
            || items.get(1).and_then(text).as_deref() != Some(ONE_OFF_ID)
            || self.sched.tick_of(due)? != ONE_OFF_DUE
        {
            return Err(format!(
                "once.lua answered {reply:?}; the model enqueues {ONE_OFF_ID} due at tick \
                 {ONE_OFF_DUE}"
            ));
        }
        Ok(())
    }

    /// Sends the scripts the scheduler sends for `action` (taken from `before`); checks the
    /// replies against what the model's step did.
    fn send(&mut self, action: AttemptAction, before: &AttemptState) -> Result<(), String> {
        use AttemptAction::*;
        match action {
            Tick => self.sched.tick(),
            Lock(_) | Kill(_) | Pause(_) | Resume(_) => Ok(()),
            Claim(r) => self.claim(r),
            TakeRetry(r) => self.take_retry(r, before),
            RecordRunning(r) => {
                let (tok, fence) = locked(before, r)?;
                let accepted = current(before, tok);
                let reply = self.finish(tok, "running", fence, false)?;
                expect("finish.lua running", &reply, &[i64::from(accepted)])
            }
            Renew(r) => self.renew(r, before),
            Finish(r, succeeded) => {
                let Task::Running { token, fence, .. } = before.replicas[r].task else {
                    return Err("Finish of a replica not running".into());
                };
                let accepted = current(before, token);
                let outcome = if succeeded { "succeeded" } else { "failed" };
                let reply = self.finish(token, outcome, fence, !succeeded)?;
                self.expect_end(accepted, &reply)
            }
        }
    }

    /// claim.lua (at least once: with the attempt lease), by replica `r`.
    fn claim(&mut self, r: usize) -> Result<(), String> {
        let tok =
            task_token(self.state.replicas[r].task).ok_or("the model's claim gave no token")?;
        let k = &self.keys;
        let keys = [
            &k.claims,
            &k.runs,
            &k.ledger,
            &k.paused,
            &k.replicas,
            &k.turn,
            &k.retries,
        ]
        .map(String::as_str);
        let args = [
            SCHEDULED_ID.into(),
            SCHEDULED_ID.into(),
            format!("r{r}"),
            "host".into(),
            "1".into(),
            token(tok),
            (100 * UNIT).to_string(),
            "10".into(),
            "0".into(),
            "0".into(),
            (u64::from(LEASE) * UNIT).to_string(),
            (u64::from(LEASE) * UNIT).to_string(),
        ];
        let reply = ok(self.sched.call(Script::Claim, &keys, &args)?, "claim.lua")?;
        let got = ints(&reply);
        let due = got.get(3).copied().flatten();
        let want_due = self.state.redis.retries;
        if got.first() != Some(&Some(1))
            || due.map(|d| self.sched.tick_of(d)).transpose()? != want_due
        {
            return Err(format!(
                "claim.lua answered {reply:?}; the model claims, first retry due at tick \
                 {want_due:?}"
            ));
        }
        Ok(())
    }

    /// take_retry.lua by replica `r`: the model either settled a lapsed attempt or claimed
    /// the next one.
    fn take_retry(&mut self, r: usize, before: &AttemptState) -> Result<(), String> {
        // Settling hands out no token; the scheduler sends a fresh one all the same.
        let claimed = task_token(self.state.replicas[r].task);
        let new_token = claimed.unwrap_or(before.next_token + 1);
        let claimed = claimed.is_some();
        let k = &self.keys;
        let keys = [&k.runs, &k.ledger, &k.paused, &k.retries].map(String::as_str);
        let args = [
            format!("r{r}"),
            "host".into(),
            "1".into(),
            token(new_token),
            (u64::from(LEASE) * UNIT).to_string(),
            MAX_ATTEMPTS.to_string(),
            (u64::from(BACKOFF) * UNIT).to_string(),
        ];
        let reply = ok(
            self.sched.call(Script::TakeRetry, &keys, &args)?,
            "take_retry.lua",
        )?;
        let got = ints(&reply);
        if !claimed {
            return match got.first() {
                Some(Some(3)) => Ok(()),
                _ => Err(format!(
                    "take_retry.lua answered {reply:?}; the model settled the run ({{3, now}})"
                )),
            };
        }
        let (attempt, _) = self.state.redis.claim.ok_or("no claim after a retry")?;
        let Value::Array(items) = &reply else {
            return Err(format!("take_retry.lua: {reply:?}"));
        };
        let one_off = self.id == ONE_OFF_ID;
        let args_ok = if one_off {
            items.get(5).and_then(text).as_deref() == Some(ARGS)
        } else {
            matches!(items.get(5), Some(Value::Nil) | None)
        };
        if got.first() != Some(&Some(1))
            || items.get(1).and_then(text).as_deref() != Some(self.id)
            || got.get(2) != Some(&Some(i64::from(attempt)))
            || got.get(4) != Some(&Some(i64::from(one_off)))
            || !args_ok
        {
            return Err(format!(
                "take_retry.lua answered {reply:?}; the model claims attempt {attempt} of {} \
                 (manual {one_off}, args {})",
                self.id,
                if one_off { ARGS } else { "nil" }
            ));
        }
        Ok(())
    }

    /// renew_attempt.lua by replica `r`, and finish.lua "failed" when the model's attempt lost
    /// its lock's lease.
    fn renew(&mut self, r: usize, before: &AttemptState) -> Result<(), String> {
        let tok = task_token(before.replicas[r].task).ok_or("Renew of an idle replica")?;
        let renewed = current(before, tok) && before.redis.retries.is_some();
        let k = &self.keys;
        let keys = [&k.ledger, &k.retries].map(String::as_str);
        let args = [
            self.id.into(),
            token(tok),
            (u64::from(LEASE) * UNIT).to_string(),
        ];
        let reply = ok(
            self.sched.call(Script::RenewAttempt, &keys, &args)?,
            "renew_attempt.lua",
        )?;
        if ints(&reply).first() != Some(&Some(i64::from(renewed))) {
            return Err(format!(
                "renew_attempt.lua answered {reply:?}; the model {}",
                if renewed { "renews" } else { "refuses" }
            ));
        }
        let lost = matches!(
            self.state.redis.end,
            End::Ended {
                outcome: Outcome::Failed,
                ..
            }
        ) && before.redis.end != self.state.redis.end;
        if lost {
            let fence = match before.replicas[r].task {
                Task::Locked { fence, .. } | Task::Running { fence, .. } => fence,
                _ => 0,
            };
            let reply = self.finish(tok, "failed", fence, true)?;
            self.expect_end(true, &reply)?;
        }
        Ok(())
    }

    /// finish.lua with `outcome`, retried (the base backoff) when `retried`.
    fn finish(
        &mut self,
        tok: u8,
        outcome: &str,
        fence: u8,
        retried: bool,
    ) -> Result<Value, String> {
        let args = vec![
            self.id.into(),
            token(tok),
            outcome.into(),
            fence.to_string(),
            String::new(),
            if retried {
                (u64::from(BACKOFF) * UNIT).to_string()
            } else {
                String::new()
            },
            MAX_ATTEMPTS.to_string(),
            self.keys.wake.clone(),
            "j".into(),
            "PUBLISH".into(),
            String::new(),
        ];
        let reply = self.finish_with(&args)?;
        if outcome != "running" {
            self.last_finish = Some((args, reply.clone()));
        }
        Ok(reply)
    }

    fn finish_with(&mut self, args: &[String]) -> Result<Value, String> {
        let k = &self.keys;
        let keys = [k.ledger.clone(), k.retries.clone()];
        let keys = keys.each_ref().map(String::as_str);
        ok(self.sched.call(Script::Finish, &keys, args)?, "finish.lua")
    }

    /// The last end sent again: the same reply, nothing changed (the model's state stays).
    fn resend(&mut self) -> Result<(), String> {
        let (args, first) = self.last_finish.clone().ok_or("nothing to resend")?;
        let again = self.finish_with(&args)?;
        if again != first {
            return Err(format!(
                "finish.lua sent again answered {again:?}, the first time {first:?}"
            ));
        }
        Ok(())
    }

    /// finish.lua's reply to an end: `{0}` when refused; else `{2, due}` when the model
    /// schedules the next attempt (at its tick), `{1}` when the run is final.
    fn expect_end(&self, accepted: bool, reply: &Value) -> Result<(), String> {
        let got = ints(reply);
        let want = match (accepted, self.state.redis.end) {
            (false, _) => "{0}".to_owned(),
            (true, End::Ended { next: Some(t), .. }) => format!("{{2, tick {t}}}"),
            (true, _) => "{1}".to_owned(),
        };
        let matches = match (accepted, self.state.redis.end) {
            (false, _) => got == [Some(0)],
            (true, End::Ended { next: Some(t), .. }) => {
                got.first() == Some(&Some(2))
                    && got
                        .get(1)
                        .copied()
                        .flatten()
                        .map(|d| self.sched.tick_of(d))
                        .transpose()?
                        == Some(t)
            }
            (true, _) => got == [Some(1)],
        };
        if matches {
            Ok(())
        } else {
            Err(format!("finish.lua answered {reply:?}; the model: {want}"))
        }
    }

    /// The run's records in Redis against the model's.
    fn compare(&mut self) -> Result<(), String> {
        let ledger = self.keys.ledger.clone();
        let (claim, end, attempts): (Option<String>, Option<String>, Option<String>) =
            self.sched.read(
                redis::cmd("HMGET")
                    .arg(&ledger)
                    .arg(format!("{}:claim", self.id))
                    .arg(format!("{}:end", self.id))
                    .arg(format!("{}:attempts", self.id)),
            )?;
        let retries: Option<i64> = self
            .sched
            .read(redis::cmd("ZSCORE").arg(&self.keys.retries).arg(self.id))?;
        let real = Decoded {
            claim: claim.as_deref().map(decode_claim).transpose()?,
            end: end
                .as_deref()
                .map(|e| decode_end(e, self.sched))
                .transpose()?,
            retries: retries.map(|ms| self.sched.tick_of(ms)).transpose()?,
            earlier: attempts.map_or(0, |a| a.split('\x1e').count()),
        };
        let m = &self.state.redis;
        let want = Decoded {
            claim: m.claim,
            end: match m.end {
                End::None => None,
                other => Some(other),
            },
            retries: m.retries,
            earlier: m
                .claim
                .map_or(0, |(attempt, _)| usize::from(attempt.saturating_sub(1))),
        };
        if real != want {
            return Err(format!(
                "after the step, Redis holds {real:?}; the model {want:?}"
            ));
        }
        Ok(())
    }
}

/// A run's records as the model sees them.
#[derive(Debug, PartialEq, Eq)]
struct Decoded {
    /// (attempt, token).
    claim: Option<(u8, u8)>,
    /// The end record (`None`: absent).
    end: Option<End>,
    /// The score in `retries`, in ticks.
    retries: Option<u8>,
    /// How many earlier attempts are kept.
    earlier: usize,
}

/// A claim record: (attempt, model token).
fn decode_claim(record: &str) -> Result<(u8, u8), String> {
    let f: Vec<&str> = record.split('\x1f').collect();
    let bad = || format!("a claim record the model cannot read: {record:?}");
    if f.first() != Some(&"1") || f.len() != 8 {
        return Err(bad());
    }
    let attempt = f[7].parse().map_err(|_| bad())?;
    let tok = match f[6] {
        "" => 0,
        t => t
            .strip_prefix('t')
            .and_then(|t| t.parse().ok())
            .ok_or_else(bad)?,
    };
    Ok((attempt, tok))
}

/// An end record as the model's `End`.
fn decode_end(record: &str, sched: &Sched) -> Result<End, String> {
    let f: Vec<&str> = record.split('\x1f').collect();
    let bad = || format!("an end record the model cannot read: {record:?}");
    if f.first() != Some(&"1") || f.len() < 6 {
        return Err(bad());
    }
    let outcome = match f[1] {
        "running" => return Ok(End::Running),
        "succeeded" => Outcome::Succeeded,
        "failed" => Outcome::Failed,
        "abandoned" => Outcome::Abandoned,
        "scheduled" => Outcome::Scheduled,
        _ => return Err(bad()),
    };
    let next = match f[4] {
        "" => None,
        ms => Some(sched.tick_of(ms.parse().map_err(|_| bad())?)?),
    };
    Ok(End::Ended { outcome, next })
}

/// Whether `token` is the run's current attempt and not over (the model's test).
fn current(s: &AttemptState, token: u8) -> bool {
    s.redis.claim.is_some_and(|(_, t)| t == token)
        && matches!(s.redis.end, End::None | End::Running)
}

/// The token and fence of replica `r`, which holds the run's lock.
fn locked(s: &AttemptState, r: usize) -> Result<(u8, u8), String> {
    match s.replicas[r].task {
        Task::Locked { token, fence, .. } => Ok((token, fence)),
        other => Err(format!("RecordRunning of a replica in {other:?}")),
    }
}

/// A reply of integers only.
fn expect(what: &str, reply: &Value, want: &[i64]) -> Result<(), String> {
    let got = ints(reply);
    if got.iter().copied().eq(want.iter().map(|w| Some(*w))) {
        Ok(())
    } else {
        Err(format!("{what} answered {reply:?}; the model: {want:?}"))
    }
}

/// The token of a replica's attempt (the model's own accessor is private).
fn task_token(task: Task) -> Option<u8> {
    match task {
        Task::Idle => None,
        Task::Claimed { token, .. } | Task::Locked { token, .. } | Task::Running { token, .. } => {
            Some(token)
        }
    }
}
