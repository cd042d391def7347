//! The state in Redis read back and decoded (`__private::conformance`, one decoder per key
//! layout) into the model's [`Abstract`], and what the keys must hold that the model's view
//! does not show.

use std::collections::BTreeMap;

use dlock_core::__private::conformance::{LeaderState, MutexState, SharedState};
use dlock_model::{Abstract, LockRef, MutexView, SharedView, Token};
use redis::Value;

use super::{Real, io, token_of};

impl Real {
    /// The state in Redis, as the model's [`Abstract`]; also checks what the model does not
    /// carry (`used` is the holders' sum; `:exp` expires with the latest holder, S4).
    pub(crate) fn state(&mut self) -> Result<Abstract, String> {
        let mut out = Abstract::default();
        let mut fences: Vec<(u64, LockRef, Token)> = Vec::new();
        for n in 0..2u8 {
            let key = self.mutex_keys[usize::from(n)].clone();
            let replies: Vec<Value> = MutexState::reads(&key)
                .query(&mut self.con)
                .map_err(io("mutex state"))
                .map(items)?;
            let state = MutexState::decode(&replies)?;
            let holder = match &state.holder {
                Some(h) => Some((token_of(&h.token).ok_or("foreign token")?, h)),
                None => None,
            };
            if let Some((token, h)) = holder
                && let Some(fence) = h.fence
            {
                fences.push((fence, LockRef::Mutex(n), token));
            }
            let queue = state
                .queue
                .iter()
                .map(|e| match e {
                    Ok(e) => token_of(&e.token).ok_or_else(|| format!("queued {e:?}")),
                    Err(raw) => Err(format!("a queue entry dlock did not write: {raw:?}")),
                })
                .collect::<Result<Vec<_>, _>>()?;
            if holder.is_some() || !queue.is_empty() {
                out.mutexes.insert(
                    n,
                    MutexView {
                        holder: holder.map(|(t, _)| t),
                        flagged: holder.is_some_and(|(_, h)| h.waiting),
                        queue,
                    },
                );
            }
        }
        for n in 0..2u8 {
            let key = self.shared_keys[usize::from(n)].clone();
            let replies: Vec<Value> = SharedState::reads(&key)
                .query(&mut self.con)
                .map_err(io("shared state"))
                .map(items)?;
            let state = SharedState::decode(&replies)?;
            check_shared(&key, &state)?;
            let mut holders = BTreeMap::new();
            for h in &state.holders {
                if h.deadline_ms.is_some_and(|d| d > state.now_ms) {
                    let token = token_of(&h.token).ok_or("foreign holder")?;
                    holders.insert(token, u32::try_from(h.weight).map_err(|_| "weight")?);
                    fences.push((h.fence, LockRef::Shared(n), token));
                }
            }
            let queue = state
                .queue
                .iter()
                .map(|e| match e {
                    Ok(e) => Ok((
                        token_of(&e.token).ok_or("queued token")?,
                        u32::try_from(e.weight.unwrap_or(0)).map_err(|_| "weight")?,
                    )),
                    Err(raw) => Err(format!("a queue entry dlock did not write: {raw:?}")),
                })
                .collect::<Result<Vec<_>, String>>()?;
            let operator = match &state.operator_limit {
                Some(raw) => Some(
                    raw.parse::<u32>()
                        .map_err(|_| format!("{key}:limit {raw:?}"))?,
                ),
                None => None,
            };
            let stored = state.version.is_some()
                || state.limit.is_some()
                || !state.holders.is_empty()
                || !state.other_fields.is_empty()
                || operator.is_some();
            if stored || !queue.is_empty() {
                let limit = match operator {
                    Some(limit) => Some(limit),
                    None => state
                        .limit
                        .map(|l| u32::try_from(l).map_err(|_| "limit"))
                        .transpose()?,
                };
                out.shared.insert(
                    n,
                    SharedView {
                        limit,
                        operator: operator.is_some(),
                        holders,
                        queue,
                    },
                );
            }
        }
        fences.sort();
        let record = format!("{}:leader", self.mutex_keys[1]);
        let replies: Vec<Value> = LeaderState::reads(&record)
            .query(&mut self.con)
            .map_err(io("leader record"))
            .map(items)?;
        match LeaderState::decode(&replies)? {
            LeaderState::Absent => {}
            LeaderState::Record { fence, value, .. } => {
                let rank = fences.iter().filter(|(f, _, _)| *f < fence).count();
                let value = value
                    .parse()
                    .map_err(|_| format!("leader value {value:?}"))?;
                out.leaders.insert(1, (rank, value));
            }
            LeaderState::Foreign(raw) => return Err(format!("leader record {raw:?}")),
        }
        out.fence_order = fences.into_iter().map(|(_, l, t)| (l, t)).collect();
        // The data of the guarded writes, per lock; fenced.lua's values (the fences they were
        // stored with are compared by order where a reply shows them).
        let locks = [0u8, 1]
            .into_iter()
            .map(LockRef::Mutex)
            .chain([0u8, 1].into_iter().map(LockRef::Shared));
        for lock in locks {
            let writes: Vec<String> = redis::cmd("LRANGE")
                .arg(self.written_key(lock))
                .arg(0)
                .arg(-1)
                .query(&mut self.con)
                .map_err(io("LRANGE written"))?;
            let writers = writes
                .iter()
                .map(|w| w.get(..32).and_then(token_of).ok_or_else(|| w.clone()))
                .collect::<Result<Vec<Token>, String>>()
                .map_err(|w| format!("a guarded write {w:?}"))?;
            if !writers.is_empty() {
                out.written.insert(lock, writers);
            }
        }
        for n in 0..4u8 {
            let (data, fence) = Real::fenced_keys(n)?;
            let (value, stored): (Option<String>, Option<String>) = redis::pipe()
                .get(&data)
                .get(&fence)
                .query(&mut self.con)
                .map_err(io("fenced data"))?;
            match (value, stored) {
                (Some(value), Some(_)) => {
                    let token = token_of(&value).ok_or_else(|| format!("fenced {value:?}"))?;
                    out.fenced.insert(n, token);
                }
                (None, None) => {}
                other => return Err(format!("fenced:{n}: the value and its fence {other:?}")),
            }
        }
        Ok(out)
    }
}

/// What the scripts keep true of a shared lock that the model's view does not show.
fn check_shared(key: &str, state: &SharedState) -> Result<(), String> {
    let sum: u64 = state.holders.iter().map(|h| h.weight).sum();
    if !state.holders.is_empty() || state.used.is_some_and(|u| u != 0) {
        let used = state.used.unwrap_or(0);
        if u64::try_from(used).ok() != Some(sum) {
            return Err(format!("{key}: used = {used}, but the holders hold {sum}"));
        }
    }
    if let Some(h) = state.holders.iter().find(|h| h.deadline_ms.is_none()) {
        return Err(format!("{key}: holder {} has no deadline in :exp", h.token));
    }
    if !state.orphan_deadlines.is_empty() {
        return Err(format!(
            "{key}: deadlines without a holder {:?}",
            state.orphan_deadlines
        ));
    }
    let latest = state.holders.iter().filter_map(|h| h.deadline_ms).max();
    if let Some(latest) = latest.filter(|l| *l > state.now_ms) {
        // K and `:exp` expire together and never before a deadline K holds: a hash that
        // outlived `:exp` would keep holders no purge can find (their permits never return).
        // (Read in the same pipeline as TIME: within a few ms.)
        let expires = state.now_ms + state.exp_pttl_ms;
        if state.exp_pttl_ms < 0 || expires + 5 < latest {
            return Err(format!(
                "{key}: :exp has PTTL {} at {}, before the latest holder's deadline {latest}",
                state.exp_pttl_ms, state.now_ms
            ));
        }
        if (state.pttl_ms - state.exp_pttl_ms).abs() > 5 {
            return Err(format!(
                "{key}: the hash has PTTL {}, :exp {}: they must expire together",
                state.pttl_ms, state.exp_pttl_ms
            ));
        }
    }
    Ok(())
}

/// A pipeline's replies, every one kept (nil included).
fn items(value: Value) -> Vec<Value> {
    match value {
        Value::Array(items) => items,
        other => vec![other],
    }
}
