//! The operators' read-only scripts (inspect.lua for a mutex, shared_inspect.lua for a shared
//! lock) held to the model's view: the model has no step for them (they change nothing), so
//! their replies are compared with what the model's state means at that instant — the live
//! holder and the time left of its lease, the number of waiters, a shared lock's limit in force
//! and its live holders with their weights and deadlines.

use dlock_model::{LockRef, abstraction};
use redis::Value;

use super::{Case, lock_ref};
use crate::redis_side::{Leases, token_of};
use crate::replies::units;
use crate::steps::Lock;

/// What an inspection says: `(holder, weight, lease units)` per live holder, the number of
/// waiters, and the limit in force (shared locks).
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    holders: Vec<(u32, u32, u64)>,
    waiters: usize,
    limit: Option<u32>,
}

fn int(value: &Value) -> Option<i64> {
    match value {
        Value::Int(n) => Some(*n),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        _ => None,
    }
}

/// inspect.lua's `{value, pttl_ms, waiters}` (value false: nobody holds, pttl -2).
fn mutex_reply(items: &[Value]) -> Option<Seen> {
    let [value, pttl, waiters] = items else {
        return None;
    };
    let waiters = usize::try_from(int(waiters)?).ok()?;
    let holders = match value {
        Value::Nil => {
            if int(pttl)? != -2 {
                return None;
            }
            Vec::new()
        }
        value => {
            let token = token_of(text(value)?.get(..32)?)?;
            let left = units(u64::try_from(int(pttl)?).ok()?);
            vec![(token, 1, left)]
        }
    };
    Some(Seen {
        holders,
        waiters,
        limit: None,
    })
}

/// shared_inspect.lua's `{limit, now_ms, waiters, token, holder, deadline, …}`.
fn shared_reply(items: &[Value]) -> Option<Seen> {
    let [limit, now, waiters, rest @ ..] = items else {
        return None;
    };
    let limit = match limit {
        Value::Nil => None,
        other => Some(u32::try_from(int(other)?).ok()?),
    };
    let now = int(now)?;
    let mut holders = Vec::new();
    for holder in rest.chunks(3) {
        let [token, held, deadline] = holder else {
            return None;
        };
        let token = token_of(&text(token)?)?;
        let weight = text(held)?.split(' ').next()?.parse().ok()?;
        let left = units(u64::try_from(int(deadline)? - now).ok()?);
        holders.push((token, weight, left));
    }
    holders.sort_unstable();
    Some(Seen {
        holders,
        waiters: usize::try_from(int(waiters)?).ok()?,
        limit,
    })
}

impl Case<'_> {
    /// The model's view of `lock` now, as an inspection would say it.
    fn expected(&self, lock: LockRef) -> Seen {
        let view = abstraction(&self.model, self.now);
        let leases = Leases::of_model(&self.model, self.now);
        let left = |token| leases.holds.get(&(lock, token)).copied().unwrap_or(0);
        match lock {
            LockRef::Mutex(n) => {
                let m = view.mutexes.get(&n);
                Seen {
                    holders: m
                        .and_then(|m| m.holder)
                        .map(|t| (t, 1, left(t)))
                        .into_iter()
                        .collect(),
                    waiters: m.map_or(0, |m| m.queue.len()),
                    limit: None,
                }
            }
            LockRef::Shared(n) => {
                let s = view.shared.get(&n);
                Seen {
                    holders: s
                        .map(|s| s.holders.iter().map(|(&t, &w)| (t, w, left(t))).collect())
                        .unwrap_or_default(),
                    waiters: s.map_or(0, |s| s.queue.len()),
                    limit: s.and_then(|s| s.limit),
                }
            }
        }
    }

    /// An operator inspects `lock`: the real script's reply must say what the model's state
    /// means.
    pub(super) fn inspect(&mut self, lock: Lock) -> Result<(), String> {
        let lock = lock_ref(lock);
        let answer = self.real.inspect(lock)?;
        self.ops += 1;
        let odd = || format!("inspect {lock:?}: an unexpected reply {answer:?}");
        let Ok(Value::Array(items)) = &answer else {
            return Err(odd());
        };
        let seen = match lock {
            LockRef::Mutex(_) => mutex_reply(items),
            LockRef::Shared(_) => shared_reply(items),
        }
        .ok_or_else(odd)?;
        let expected = self.expected(lock);
        self.log.push(format!(
            "inspect {lock:?}: model {expected:?}, redis {seen:?}"
        ));
        if seen != expected {
            return Err(format!(
                "inspect {lock:?} differs: model {expected:?}, redis {seen:?}"
            ));
        }
        Ok(())
    }
}
