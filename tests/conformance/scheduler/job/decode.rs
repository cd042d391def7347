//! What the job walks read back from Redis, decoded into the model's types
//! (`dlock_model::sched::{JobRedis, Registry}`), and the replies of the scripts decoded into
//! the model's reply types.

use std::collections::BTreeMap;

use dlock_model::sched::{ClaimReply, JobRedis, Ms, Registry, TakeRequestReply, ZSet};
use redis::Value;

use super::super::{Sched, int, text};
use super::Keys;

/// A sorted set, member → score.
fn zset(sched: &mut Sched, key: &str) -> Result<ZSet, String> {
    let pairs: Vec<(String, f64)> = sched.read(
        redis::cmd("ZRANGE")
            .arg(key)
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES"),
    )?;
    Ok(pairs
        .into_iter()
        .map(|(m, score)| (m, score as Ms))
        .collect())
}

/// A key's expiry (`PEXPIRETIME`): `None` without one, or without the key.
fn expiry(sched: &mut Sched, key: &str) -> Result<Option<Ms>, String> {
    let at: i64 = sched.read(redis::cmd("PEXPIRETIME").arg(key))?;
    Ok((at >= 0).then_some(at))
}

/// The job's keys as the model's `JobRedis` (no messages: those are compared apart).
pub(super) fn job(sched: &mut Sched, k: &Keys) -> Result<JobRedis, String> {
    let ledger: BTreeMap<String, String> = sched.read(redis::cmd("HGETALL").arg(&k.ledger))?;
    let paused: bool = sched.read(redis::cmd("EXISTS").arg(&k.paused))?;
    let turn: Option<i64> = sched.read(redis::cmd("GET").arg(&k.turn))?;
    let requests: Vec<i64> = sched.read(redis::cmd("LRANGE").arg(&k.requests).arg(0).arg(-1))?;
    Ok(JobRedis {
        claims: zset(sched, &k.claims)?,
        runs: zset(sched, &k.runs)?,
        ledger,
        paused,
        replicas: zset(sched, &k.replicas)?,
        replicas_expire: expiry(sched, &k.replicas)?,
        turn,
        retries: zset(sched, &k.retries)?,
        requests,
        requests_expire: expiry(sched, &k.requests)?,
        published: Vec::new(),
    })
}

/// The registry's keys as the model's `Registry`.
pub(super) fn registry(sched: &mut Sched, k: &Keys) -> Result<Registry, String> {
    let mut entries = BTreeMap::new();
    for token in super::INSTANCES {
        let key = k.entry(token);
        let value: Option<String> = sched.read(redis::cmd("GET").arg(&key))?;
        if let Some(value) = value {
            let at = expiry(sched, &key)?.ok_or_else(|| format!("{key} has no expiry"))?;
            entries.insert(key, (value, at));
        }
    }
    Ok(Registry {
        index: zset(sched, &k.index)?,
        index_expire: expiry(sched, &k.index)?,
        entries,
    })
}

/// An array reply's items.
fn items(reply: &Value) -> Result<&[Value], String> {
    match reply {
        Value::Array(items) => Ok(items),
        other => Err(format!("not an array: {other:?}")),
    }
}

fn num(items: &[Value], i: usize) -> Result<i64, String> {
    items
        .get(i)
        .and_then(int)
        .ok_or_else(|| format!("element {} is not a number: {items:?}", i + 1))
}

/// claim.lua's reply; `with_due` under at-least-once delivery (one more element).
pub(super) fn claim(reply: &Value, with_due: bool) -> Result<ClaimReply, String> {
    let items = items(reply)?;
    let next_at = |i: usize| items.get(i).and_then(text);
    let due_at = |i: usize| -> Result<Option<Ms>, String> {
        if with_due {
            num(items, i).map(Some)
        } else {
            Ok(None)
        }
    };
    let status = num(items, 0)?;
    Ok(match (status, items.get(1).and_then(text).as_deref()) {
        (1, _) => ClaimReply::Won {
            now: num(items, 1)?,
            next: next_at(2),
            due: due_at(3)?,
        },
        (0, Some("claimed")) => ClaimReply::Claimed {
            now: num(items, 2)?,
            next: next_at(3),
            due: due_at(4)?,
        },
        (0, Some("paused")) => ClaimReply::Paused {
            now: num(items, 2)?,
        },
        (2, _) => ClaimReply::Wait {
            wait: num(items, 1)?,
            now: num(items, 2)?,
            next: next_at(3),
            due: due_at(4)?,
        },
        _ => return Err(format!("claim.lua: an unknown reply {reply:?}")),
    })
}

/// The server time a claim.lua reply carries.
pub(super) fn claim_now(reply: &ClaimReply) -> Ms {
    match reply {
        ClaimReply::Won { now, .. }
        | ClaimReply::Claimed { now, .. }
        | ClaimReply::Paused { now }
        | ClaimReply::Wait { now, .. } => *now,
    }
}

/// take_request.lua's reply.
pub(super) fn take_request(reply: &Value) -> Result<TakeRequestReply, String> {
    let items = items(reply)?;
    let now = num(items, 2)?;
    Ok(
        match (num(items, 0)?, items.get(1).and_then(text).as_deref()) {
            (1, _) => TakeRequestReply::Took {
                requested: num(items, 1)?,
                now,
            },
            (0, Some("empty")) => TakeRequestReply::Empty { now },
            (0, Some("paused")) => TakeRequestReply::Paused { now },
            (0, Some("claimed")) => TakeRequestReply::Claimed { now },
            _ => return Err(format!("take_request.lua: an unknown reply {reply:?}")),
        },
    )
}

/// once.lua's reply `{status, id, due, now}`.
pub(super) fn once(reply: &Value) -> Result<(i64, String, Ms, Ms), String> {
    let items = items(reply)?;
    let id = items
        .get(1)
        .and_then(text)
        .ok_or_else(|| format!("once.lua: no id in {reply:?}"))?;
    Ok((num(items, 0)?, id, num(items, 2)?, num(items, 3)?))
}

/// A reply `{a, b}` of two numbers.
pub(super) fn pair(reply: &Value) -> Result<(i64, i64), String> {
    let items = items(reply)?;
    Ok((num(items, 0)?, num(items, 1)?))
}

/// A reply of one number.
pub(super) fn one(reply: &Value) -> Result<i64, String> {
    int(reply).ok_or_else(|| format!("not a number: {reply:?}"))
}
