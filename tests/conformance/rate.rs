//! The rate limiter (rate.lua) held to its model step (`dlock_model::rate`) on real Redis.
//!
//! The server's clock cannot be set, only moved ahead (`jump_ms`), so the model is given the
//! server's own time: each reply names the `now_us` of its decision, and the model's step runs
//! at that instant on the state the previous steps left. Then the reply (admitted, wait,
//! remaining) must be equal, and so must the key: its TAT exactly (the emission interval is
//! whole microseconds here, so neither side rounds), its expiry within a millisecond (`PX`
//! counts from Redis's own millisecond clock, read a moment before `TIME`). A key whose TAT
//! was within 50 ms of the decision may be gone by the time it is read.
//!
//! Set scenarios first (a burst then a refusal, a reservation and its refund, a refund floored
//! at now, a refill after idle, several cells at once), then a fixed pseudo-random sequence of
//! tries, reservations, refunds and clock jumps — both at one cell a second and at 333333.25 µs
//! a cell (the model in quarter microseconds, so the fraction is exact on both sides) — then
//! another program's data and a limiter of a newer format version, which must be refused with
//! the key unchanged.
//! Among them a version-1 value that only looks numeric (`"1 ."`, `"1 1.2.3"`: refused as
//! foreign, once a Lua error) and a newer version whose body is not one number (`"2 123 456"`:
//! refused as newer, once as foreign).

use dlock_model::rate::{Quota, RateMode, RateOp, RateReply, RateServer, Stored, rate};
use redis::Value;

use crate::coverage::Phase;
use crate::redis_side::Real;

const KEY: &str = "cf:rl:{conform}";
/// One cell a second, a burst of three.
const Q: Quota = Quota {
    t: 1_000_000,
    burst: 3,
};
/// A key read this close after its TAT may have expired in between.
const SLACK_US: u64 = 50_000;

/// What one run covered.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Seen {
    /// Calls of rate.lua compared.
    pub calls: usize,
    admitted: usize,
    limited: usize,
    waited: usize,
    refunded: usize,
}

/// Both sides of one limiter.
struct Both<'r> {
    real: &'r mut Real,
    model: RateServer,
    /// The quota in model ticks.
    quota: Quota,
    /// Model ticks per microsecond: 1, or 4 for an emission interval with a fraction (every
    /// value then a multiple of 0.25 µs, which a double holds exactly at today's epoch times).
    scale: u64,
    seen: Seen,
}

/// `ticks` in microseconds, as the client formats a quota (`333333.25`).
fn micros(ticks: u64, scale: u64) -> String {
    format!("{}", ticks as f64 / scale as f64)
}

fn args(op: RateOp, quota: Quota, scale: u64) -> Vec<String> {
    let mode = match op.mode {
        RateMode::Try => "try",
        RateMode::Reserve { .. } => "reserve",
        RateMode::Refund => "refund",
    };
    let mut out = vec![
        mode.to_owned(),
        op.n.to_string(),
        micros(quota.t, scale),
        micros(quota.tau(), scale),
    ];
    if let RateMode::Reserve { max_wait } = op.mode {
        out.push(max_wait.to_string());
    }
    out
}

fn int(value: &Value) -> Option<u64> {
    match value {
        Value::Int(i) => u64::try_from(*i).ok(),
        _ => None,
    }
}

impl<'r> Both<'r> {
    fn start(real: &'r mut Real) -> Result<Self, String> {
        Self::start_with(real, Q, 1)
    }

    /// Ticks are `1 / scale` µs; `quota` in ticks.
    fn start_with(real: &'r mut Real, quota: Quota, scale: u64) -> Result<Self, String> {
        real.reset()?;
        Ok(Self {
            real,
            model: RateServer::new(1_000 * scale, None),
            quota,
            scale,
            seen: Seen::default(),
        })
    }

    /// One call on both sides, compared.
    fn call(&mut self, op: RateOp) -> Result<(), String> {
        let before = self.model;
        let answer = self.real.rate(KEY, &args(op, self.quota, self.scale))?;
        self.seen.calls += 1;
        let (now, real) = match &answer {
            Ok(Value::Array(items)) if items.len() == 4 => {
                let v: Vec<u64> = items.iter().filter_map(int).collect();
                let [admitted, wait, now, remaining] = v[..] else {
                    return Err(format!("{op:?}: a reply of non-integers: {answer:?}"));
                };
                let reply = RateReply::Decision {
                    admitted: admitted == 1,
                    wait,
                    now,
                    remaining,
                };
                (now, reply)
            }
            Err((code, detail)) if code == "DLOCKFOREIGN" => {
                // An error names no time: the model's step runs at the state's own.
                let reply = match detail.split("format version ").nth(1) {
                    Some(v) => RateReply::Newer {
                        version: v.split(')').next().unwrap_or("").parse().unwrap_or(0),
                    },
                    None => RateReply::Foreign,
                };
                (0, reply)
            }
            other => return Err(format!("{op:?}: an unexpected answer {other:?}")),
        };
        // The op's max wait in ticks; the reply in microseconds (a wait rounded up, as
        // rate.lua's `math.ceil`).
        let scale = self.scale;
        let mode = match op.mode {
            RateMode::Reserve { max_wait } => RateMode::Reserve {
                max_wait: max_wait * scale,
            },
            mode => mode,
        };
        let ticked = RateOp { mode, n: op.n };
        let model = match rate(&mut self.model, now * scale, self.quota, ticked) {
            RateReply::Decision {
                admitted,
                wait,
                now,
                remaining,
            } => RateReply::Decision {
                admitted,
                wait: wait.div_ceil(scale),
                now: now / scale,
                remaining,
            },
            other => other,
        };
        if model != real {
            return Err(format!(
                "{op:?} at {now} µs on {:?}: real {real:?}, model {model:?}",
                before.key
            ));
        }
        self.count(
            op,
            real,
            before.tat(now * scale),
            self.model.tat(now * scale),
        );
        self.compare_key(now * scale)
            .map_err(|e| format!("{op:?} at {now} µs (reply {real:?}): {e}"))
    }

    fn count(&mut self, op: RateOp, reply: RateReply, before: Option<u64>, after: Option<u64>) {
        let RateReply::Decision { admitted, wait, .. } = reply else {
            return;
        };
        let seen = &mut self.seen;
        match op.mode {
            RateMode::Refund if after < before => seen.refunded += 1,
            RateMode::Refund => {}
            _ if !admitted => seen.limited += 1,
            _ if wait > 0 => seen.waited += 1,
            _ => seen.admitted += 1,
        }
    }

    /// The key on both sides after a decision at `now` (ticks).
    fn compare_key(&mut self, now: u64) -> Result<(), String> {
        let value: Option<String> = self
            .real
            .raw(redis::cmd("GET").arg(KEY))
            .ok()
            .and_then(|v| match v {
                Value::BulkString(b) => String::from_utf8(b).ok(),
                Value::SimpleString(s) => Some(s),
                _ => None,
            });
        let expiry_ms = match self.real.raw(redis::cmd("PEXPIRETIME").arg(KEY))? {
            Value::Int(ms) => ms,
            other => return Err(format!("PEXPIRETIME: {other:?}")),
        };
        match (self.model.key, value) {
            (None, None) => Ok(()),
            // A key past its TAT, in its last millisecond: the same full bucket as none.
            (None, Some(value))
                if value
                    .strip_prefix("1 ")
                    .and_then(|v| v.parse::<f64>().ok())
                    .is_some_and(|tat| tat * self.scale as f64 <= now as f64) =>
            {
                Ok(())
            }
            (Some(Stored::Limiter { tat, .. }), None) if tat <= now + SLACK_US * self.scale => {
                Ok(())
            }
            (Some(Stored::Limiter { tat, expires }), Some(value)) => {
                let stored = value
                    .strip_prefix("1 ")
                    .and_then(|v| v.parse::<f64>().ok())
                    .ok_or_else(|| format!("the key holds {value:?}"))?;
                if stored * self.scale as f64 != tat as f64 {
                    return Err(format!("stored TAT {value:?}, model {tat}"));
                }
                let model_ms = i64::try_from(expires / (1_000 * self.scale)).unwrap_or(i64::MAX);
                if (expiry_ms - model_ms).abs() > 1 {
                    return Err(format!(
                        "the key expires at {expiry_ms} ms, the model's at {model_ms} ms"
                    ));
                }
                Ok(())
            }
            (Some(Stored::Foreign | Stored::Newer { .. }), _) => Ok(()),
            (model, real) => Err(format!("the key holds {real:?}, the model's {model:?}")),
        }
    }

    fn jump(&mut self, ms: u64) -> Result<(), String> {
        self.real.jump_ms(ms)
    }
}

fn try_(n: u64) -> RateOp {
    RateOp {
        mode: RateMode::Try,
        n,
    }
}

fn reserve(n: u64, max_wait: u64) -> RateOp {
    RateOp {
        mode: RateMode::Reserve { max_wait },
        n,
    }
}

fn refund(n: u64) -> RateOp {
    RateOp {
        mode: RateMode::Refund,
        n,
    }
}

/// A step of a scenario: a call, or the clock moved.
#[derive(Clone, Copy, Debug)]
enum Step {
    Call(RateOp),
    Jump(u64),
}

fn scenarios() -> Vec<(&'static str, Vec<Step>)> {
    use Step::{Call, Jump};
    vec![
        (
            "a burst, then a refusal that changes nothing, then a refill",
            vec![
                Call(try_(1)),
                Call(try_(1)),
                Call(try_(1)),
                Call(try_(1)),
                Call(try_(2)),
                Jump(1_200),
                Call(try_(1)),
                Call(try_(1)),
                Jump(4_000),
                Call(try_(3)),
            ],
        ),
        (
            "a reservation within its max wait, one past it, a refund",
            vec![
                Call(try_(3)),
                Call(reserve(1, 2_000_000)),
                Call(reserve(1, 500_000)),
                Call(reserve(2, 3_000_000)),
                Call(refund(2)),
                Call(refund(1)),
            ],
        ),
        (
            "a refund floored at now",
            vec![
                Call(try_(1)),
                Call(refund(3)),
                Call(try_(3)),
                Call(refund(1)),
            ],
        ),
    ]
}

/// A fixed pseudo-random sequence of `len` steps (a linear congruential generator from 27).
fn sequence(len: usize) -> Vec<Step> {
    let mut x: u64 = 27;
    let mut next = |m: u64| {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (x >> 33) % m
    };
    (0..len)
        .map(|_| match next(6) {
            0 | 1 => Step::Call(try_(1 + next(3))),
            2 => Step::Call(reserve(
                1 + next(2),
                [0, 1_500_000, 3_000_000][next(3) as usize],
            )),
            3 => Step::Call(refund(1 + next(2))),
            _ => Step::Jump([300, 1_000, 2_500][next(3) as usize]),
        })
        .collect()
}

fn steps(both: &mut Both<'_>, steps: &[Step]) -> Result<(), String> {
    for (i, step) in steps.iter().enumerate() {
        match *step {
            Step::Call(op) => both.call(op),
            Step::Jump(ms) => both.jump(ms),
        }
        .map_err(|e| format!("at step {} ({step:?}): {e}", i + 1))?;
    }
    Ok(())
}

/// Another program's data, and a limiter of a newer dlock: refused, the key left as found.
fn foreign(both: &mut Both<'_>) -> Result<(), String> {
    let cases: [(&str, Stored); 8] = [
        ("hello", Stored::Foreign),
        ("1 abc", Stored::Foreign),
        ("1 .", Stored::Foreign),
        ("1 1.2.3", Stored::Foreign),
        ("2 123.000", Stored::Newer { version: 2 }),
        ("2 123 456", Stored::Newer { version: 2 }),
        ("2 abc", Stored::Newer { version: 2 }),
        ("17 1", Stored::Newer { version: 17 }),
    ];
    for (value, stored) in cases {
        for op in [try_(1), reserve(1, 1_000_000), refund(1)] {
            both.real.reset()?;
            both.real.raw(redis::cmd("SET").arg(KEY).arg(value))?;
            both.model.key = Some(stored);
            both.call(op).map_err(|e| format!("{value:?}: {e}"))?;
            let left: Option<String> = match both.real.raw(redis::cmd("GET").arg(KEY))? {
                Value::BulkString(b) => String::from_utf8(b).ok(),
                _ => None,
            };
            if left.as_deref() != Some(value) {
                return Err(format!("{op:?} on {value:?} left {left:?}"));
            }
        }
    }
    // Another type: the script's GET fails, and it refuses.
    both.real.reset()?;
    both.real.raw(redis::cmd("LPUSH").arg(KEY).arg("x"))?;
    both.model.key = Some(Stored::Foreign);
    both.call(try_(1)).map_err(|e| format!("a list: {e}"))?;
    match both.real.raw(redis::cmd("LLEN").arg(KEY))? {
        Value::Int(1) => Ok(()),
        other => Err(format!("a list at the key: LLEN {other:?} after the call")),
    }
}

/// Every scenario, the sequence and the refusals; what was covered.
pub(crate) fn run(real: &mut Real) -> Result<Seen, String> {
    let mut total = Seen::default();
    let mut add = |seen: Seen| {
        total.calls += seen.calls;
        total.admitted += seen.admitted;
        total.limited += seen.limited;
        total.waited += seen.waited;
        total.refunded += seen.refunded;
    };
    for (name, list) in scenarios() {
        let mut both = Both::start(real)?;
        steps(&mut both, &list).map_err(|e| format!("rate scenario \"{name}\": {e}"))?;
        add(both.seen);
    }
    // The pseudo-random sequences count as the run's random sequences (coverage.rs).
    real.count_as(Phase::Sequences);
    let mut both = Both::start(real)?;
    steps(&mut both, &sequence(80)).map_err(|e| format!("rate sequence (seed 27): {e}"))?;
    add(both.seen);
    // An emission interval with a fraction: 333333.25 µs a cell (quarter-microsecond ticks).
    let fraction = Quota {
        t: 1_333_333,
        burst: 3,
    };
    real.count_as(Phase::Fixed);
    for (name, list) in scenarios() {
        let mut both = Both::start_with(real, fraction, 4)?;
        steps(&mut both, &list)
            .map_err(|e| format!("rate scenario \"{name}\", t 333333.25: {e}"))?;
        add(both.seen);
    }
    real.count_as(Phase::Sequences);
    let mut both = Both::start_with(real, fraction, 4)?;
    steps(&mut both, &sequence(80))
        .map_err(|e| format!("rate sequence (seed 27), t 333333.25: {e}"))?;
    add(both.seen);
    real.count_as(Phase::Fixed);
    let mut both = Both::start(real)?;
    foreign(&mut both).map_err(|e| format!("rate refusals: {e}"))?;
    add(both.seen);
    // Each kind of decision met, or the comparison is vacuous for it.
    let missing: Vec<&str> = [
        ("admitted", total.admitted),
        ("limited", total.limited),
        ("reserved with a wait", total.waited),
        ("refunded", total.refunded),
    ]
    .into_iter()
    .filter(|(_, n)| *n == 0)
    .map(|(what, _)| what)
    .collect();
    if !missing.is_empty() {
        return Err(format!("rate: no decision {missing:?} was met"));
    }
    Ok(total)
}
