//! Both sides' replies reduced to what they must agree on ([`Norm`]): the model's [`Reply`]
//! and what Redis answered to the same [`Op`], each with the fences it carried (compared by
//! order only, in `driver.rs`), and lease lengths in whole lease units.

use dlock_core::__private::conformance::parse_grant;
use dlock_model::{Op, Reply, ScriptError, Token};
use redis::Value;

use crate::redis_side::{Answer, UNIT, epoch_of, token_of};

/// A reply reduced to what both sides must agree on (fences apart, compared by order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Norm {
    SetNx(Option<Option<Token>>),
    Int(i64),
    Fence,
    Holds {
        fenced: bool,
        units: u64,
    },
    Busy {
        units: u64,
    },
    Handed {
        token: Token,
        units: u64,
    },
    Extended(Vec<i64>),
    /// The fenced `MULTI`: the `SET` reply, the second command's reply when it is no fence (a
    /// fence is compared by order), and the connection's epoch.
    Multi {
        set: Option<Option<Token>>,
        no_fence: Option<i64>,
        epoch: u32,
    },
    Refused {
        used: u64,
        waiting: u64,
    },
    Leader {
        fenced: bool,
        leads: bool,
        value: u8,
    },
    /// guarded.lua `{1, …}`.
    Applied,
    /// guarded.lua `{0, "taken"}` / `{0, "gone"}`.
    NotApplied {
        taken: bool,
    },
    /// fenced.lua `{1}`.
    Written,
    /// fenced.lua `{0, stored}` (the stored fence compared by order).
    Stale,
    Ok,
    Err(String),
}

/// Whole lease units left, rounded to the nearest: every lease and clock move is a whole unit
/// (the clock moves 2 ms more, so that no deadline is met exactly), and what real time adds is
/// a few milliseconds either way — spent since a grant, or between two reads of the clock
/// inside one script (a script run under the debugger takes longer, coverage.rs).
pub(crate) fn units(ms: u64) -> u64 {
    (ms + UNIT / 2) / UNIT
}

pub(crate) fn show(answer: &Answer) -> String {
    match answer {
        Ok(value) => format!("{value:?}"),
        Err((code, detail)) => format!("error {code} {detail}"),
    }
}

fn model_error(e: ScriptError) -> String {
    match e {
        ScriptError::Foreign(_) => "foreign".into(),
        ScriptError::Limit(n) => format!("limit {n}"),
        // Both are DLOCKWEIGHT: heavier than the limit in force.
        ScriptError::Weight | ScriptError::AboveLimit(_) => "weight".into(),
        ScriptError::Mode => "mode".into(),
        ScriptError::WrongType(_) => "wrongtype".into(),
    }
}

fn real_error(code: &str, detail: &str) -> String {
    match code {
        "DLOCKFOREIGN" => "foreign".into(),
        "DLOCKLIMIT" => format!("limit {}", detail.rsplit(' ').next().unwrap_or("")),
        "DLOCKWEIGHT" => "weight".into(),
        "DLOCKMODE" => "mode".into(),
        // A plain error of a command inside a script (its detail names the script's line).
        "WRONGTYPE" => "wrongtype".into(),
        other => format!("{other} {detail}"),
    }
}

pub(crate) fn model_norm(op: &Op, reply: &Reply) -> (Norm, Vec<u64>) {
    match reply.clone() {
        Reply::SetNx(set) => (Norm::SetNx(set), vec![]),
        Reply::Int(n) if n > 0 && matches!(op, Op::Fence { .. }) => {
            (Norm::Fence, vec![n.unsigned_abs()])
        }
        Reply::Int(n) => (Norm::Int(n), vec![]),
        Reply::Holds { fence, pttl } => (
            Norm::Holds {
                fenced: fence > 0,
                units: units(pttl),
            },
            if fence > 0 { vec![fence] } else { vec![] },
        ),
        Reply::Busy { wait } => (Norm::Busy { units: units(wait) }, vec![]),
        Reply::Handed(push) => match push.grant {
            Some(grant) => (
                Norm::Handed {
                    token: push.token,
                    units: units(grant.lease),
                },
                vec![grant.fence],
            ),
            None => (Norm::Err("a hand-off without a grant".into()), vec![]),
        },
        Reply::Extended(items) => (Norm::Extended(items), vec![]),
        Reply::Refused { used, waiting } => (
            Norm::Refused {
                used: u64::from(used),
                waiting: u64::from(waiting),
            },
            vec![],
        ),
        Reply::Leader {
            lock_fence,
            leader_fence,
            value,
        } => (
            Norm::Leader {
                fenced: lock_fence > 0,
                leads: leader_fence > 0,
                value,
            },
            if lock_fence > 0 {
                vec![lock_fence]
            } else {
                vec![]
            },
        ),
        Reply::Ok => (Norm::Ok, vec![]),
        Reply::Applied => (Norm::Applied, vec![]),
        Reply::NotApplied { taken } => (Norm::NotApplied { taken }, vec![]),
        Reply::Written => (Norm::Written, vec![]),
        Reply::Stale { stored } => (Norm::Stale, vec![stored]),
        Reply::Multi { set, fence, epoch } => (
            Norm::Multi {
                set,
                no_fence: (fence <= 0).then_some(fence),
                epoch,
            },
            fence_list(fence),
        ),
        Reply::Err(e) => (Norm::Err(model_error(e)), vec![]),
    }
}

fn int(value: &Value) -> Option<i64> {
    match value {
        Value::Int(n) => Some(*n),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

fn ints(value: &Value) -> Option<Vec<i64>> {
    match value {
        Value::Array(items) => items.iter().map(int).collect(),
        _ => None,
    }
}

fn fence_list(f: i64) -> Vec<u64> {
    if f > 0 {
        vec![f.unsigned_abs()]
    } else {
        vec![]
    }
}

pub(crate) fn real_norm(op: &Op, answer: &Answer) -> Result<(Norm, Vec<u64>), String> {
    let value = match answer {
        Ok(value) => value,
        Err((code, detail)) => return Ok((Norm::Err(real_error(code, detail)), vec![])),
    };
    let odd = || format!("an unexpected reply {value:?} to {op:?}");
    let holds_or_busy = |v: &[i64]| match *v {
        [1, fence, pttl] => Some((
            Norm::Holds {
                fenced: fence > 0,
                units: units(pttl.max(0).unsigned_abs()),
            },
            fence_list(fence),
        )),
        [0, wait, _] => Some((
            Norm::Busy {
                units: units(wait.max(0).unsigned_abs()),
            },
            vec![],
        )),
        _ => None,
    };
    Ok(match op {
        Op::SetNxGet { .. } => match value {
            Value::Nil => (Norm::SetNx(None), vec![]),
            Value::BulkString(bytes) => {
                let text = String::from_utf8_lossy(bytes);
                let token = text.get(..32).and_then(token_of);
                (Norm::SetNx(Some(token)), vec![])
            }
            _ => return Err(odd()),
        },
        Op::FencedFast { .. } => match value {
            Value::Array(items) if items.len() == 3 => {
                let set = match &items[0] {
                    Value::Nil => None,
                    Value::BulkString(bytes) => {
                        Some(String::from_utf8_lossy(bytes).get(..32).and_then(token_of))
                    }
                    _ => return Err(odd()),
                };
                let fence = int(&items[1]).ok_or_else(odd)?;
                let epoch = epoch_of(&items[2]).ok_or_else(odd)?;
                (
                    Norm::Multi {
                        set,
                        no_fence: (fence <= 0).then_some(fence),
                        epoch,
                    },
                    fence_list(fence),
                )
            }
            _ => return Err(odd()),
        },
        Op::Acquire { entry, .. } => match value {
            Value::Int(fence) => (
                Norm::Holds {
                    fenced: *fence > 0,
                    units: units(entry.lease),
                },
                fence_list(*fence),
            ),
            other => ints(other)
                .and_then(|v| holds_or_busy(&v))
                .ok_or_else(odd)?,
        },
        Op::SharedAcquire { .. } => ints(value)
            .and_then(|v| holds_or_busy(&v))
            .ok_or_else(odd)?,
        Op::RwChange { .. } => match ints(value).as_deref() {
            Some([0, 0, 0]) => (Norm::Int(0), vec![]),
            Some(&[-1, used, waiting]) => (
                Norm::Refused {
                    used: used.unsigned_abs(),
                    waiting: waiting.unsigned_abs(),
                },
                vec![],
            ),
            Some(v) => holds_or_busy(v).ok_or_else(odd)?,
            None => return Err(odd()),
        },
        Op::Release { .. } => match value {
            Value::Array(items) => match items.as_slice() {
                [Value::Int(2), Value::BulkString(grant)] => {
                    let (token, fence, _, lease) = parse_grant(grant).ok_or_else(odd)?;
                    (
                        Norm::Handed {
                            token: token_of(&token).ok_or_else(odd)?,
                            units: units(lease),
                        },
                        vec![fence],
                    )
                }
                _ => return Err(odd()),
            },
            other => (Norm::Int(int(other).ok_or_else(odd)?), vec![]),
        },
        Op::NativeRelease { .. } => (Norm::Int(int(value).ok_or_else(odd)?), vec![]),
        Op::Fence { .. } => match int(value).ok_or_else(odd)? {
            n if n > 0 => (Norm::Fence, fence_list(n)),
            n => (Norm::Int(n), vec![]),
        },
        Op::Extend { .. } => (Norm::Extended(ints(value).ok_or_else(odd)?), vec![]),
        // The fifth item (the lock's PTTL, for observers) is not in the model's reply.
        Op::ElectionRead { .. } => match value {
            Value::Array(items) if items.len() == 4 || items.len() == 5 => {
                let lock = int(&items[1]).ok_or_else(odd)?;
                let leader = int(&items[2]).ok_or_else(odd)?;
                let v = match &items[3] {
                    Value::BulkString(b) if b.is_empty() => 0,
                    Value::BulkString(b) => std::str::from_utf8(b)
                        .ok()
                        .and_then(|s| s.parse().ok())
                        .ok_or_else(odd)?,
                    _ => return Err(odd()),
                };
                (
                    Norm::Leader {
                        fenced: lock > 0,
                        leads: leader > 0,
                        value: v,
                    },
                    fence_list(lock),
                )
            }
            _ => return Err(odd()),
        },
        // `{1, {1, <RPUSH's reply>}}`, or `{0, "taken" | "gone"}`.
        Op::Guarded { .. } => match value {
            Value::Array(items) => match items.as_slice() {
                [Value::Int(1), Value::Array(replies)] => match replies.as_slice() {
                    [Value::Int(1), Value::Int(_)] => (Norm::Applied, vec![]),
                    _ => return Err(odd()),
                },
                [Value::Int(0), Value::BulkString(why)] => match why.as_slice() {
                    b"taken" => (Norm::NotApplied { taken: true }, vec![]),
                    b"gone" => (Norm::NotApplied { taken: false }, vec![]),
                    _ => return Err(odd()),
                },
                _ => return Err(odd()),
            },
            _ => return Err(odd()),
        },
        // `{1}`, or `{0, <stored fence>}`.
        Op::FencedSet { .. } => match value {
            Value::Array(items) => match items.as_slice() {
                [Value::Int(1)] => (Norm::Written, vec![]),
                [Value::Int(0), stored] => {
                    let stored = int(stored).ok_or_else(odd)?;
                    (Norm::Stale, fence_list(stored))
                }
                _ => return Err(odd()),
            },
            _ => return Err(odd()),
        },
        Op::Subscribe { .. }
        | Op::Unsubscribe { .. }
        | Op::Replicate
        | Op::Restart { .. }
        | Op::WriteForeign { .. } => (Norm::Ok, vec![]),
        _ => (Norm::Int(int(value).ok_or_else(odd)?), vec![]),
    })
}
