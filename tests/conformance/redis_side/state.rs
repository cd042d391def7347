//! The state in Redis read back and decoded (`__private::conformance`, one decoder per key
//! layout) into the model's [`Abstract`], and what the keys must hold that the model's view
//! does not show: invariants of a shared lock's keys, and the time left of every live hold and
//! of every lock's release requests ([`Leases`]).

use std::collections::{BTreeMap, BTreeSet};

use dlock_core::__private::conformance::{LeaderState, MutexState, SharedState};
use dlock_model::{Abstract, LockRef, MutexView, Server, SharedView, Token};
use redis::{Pipeline, Value};

use super::{Real, io, token_of};
use crate::replies::units;

/// The locks of a sequence, by their model names.
const LOCKS: [LockRef; 4] = [
    LockRef::Mutex(0),
    LockRef::Mutex(1),
    LockRef::Shared(0),
    LockRef::Shared(1),
];

/// Whole lease units left (rounded up, as replies are compared) of what the model's
/// [`Abstract`] shows without its time: every live hold, and every lock's ask key (ask.lua
/// keeps it no sooner than the leases it found; a request changes no lease).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Leases {
    /// Per live hold: `(lock, token)` → units left.
    pub holds: BTreeMap<(LockRef, Token), u64>,
    /// Per lock with a live ask key: units until it expires.
    pub asks: BTreeMap<LockRef, u64>,
    /// Per mutex key present: units until Redis drops it. Past the hold's deadline while
    /// callers wait (issue #35: the key kept for the queue, its deadline in the value).
    pub keeps: BTreeMap<u8, u64>,
    /// Per mutex queue present: units until Redis drops it (issue #44: with the kept key).
    pub queues: BTreeMap<u8, u64>,
}

impl Leases {
    /// The model's, at `now`.
    pub(crate) fn of_model(server: &Server, now: u64) -> Self {
        let left = |deadline: u64| units(deadline - now);
        let mut out = Self::default();
        for (&n, hold) in server.data.locks.iter().filter(|(_, h)| now < h.expires) {
            if hold.live(now) {
                out.holds
                    .insert((LockRef::Mutex(n), hold.token), left(hold.deadline));
            }
            out.keeps.insert(n, left(hold.expires));
        }
        for (&n, &at) in server
            .data
            .queue_expires
            .iter()
            .filter(|(_, at)| now < **at)
        {
            if server.data.queues.contains_key(&n) {
                out.queues.insert(n, left(at));
            }
        }
        for (&n, lock) in &server.data.shared {
            for (&token, h) in lock.holders.iter().filter(|(_, h)| now < h.deadline) {
                out.holds
                    .insert((LockRef::Shared(n), token), left(h.deadline));
            }
        }
        for (&lock, asked) in server.data.asked.iter().filter(|(_, a)| now < a.until) {
            out.asks.insert(lock, left(asked.until));
        }
        out
    }
}

/// Replies taken in the order their commands were added to one pipeline.
struct Replies {
    items: std::vec::IntoIter<Value>,
}

impl Replies {
    fn take(&mut self, n: usize) -> Result<Vec<Value>, String> {
        let out: Vec<Value> = self.items.by_ref().take(n).collect();
        if out.len() == n {
            Ok(out)
        } else {
            Err("the state's pipeline answered fewer replies than it sent".into())
        }
    }

    fn one(&mut self) -> Result<Value, String> {
        self.take(1)?.pop().ok_or_else(|| "no reply".to_owned())
    }

    /// The next reply as `T` (a list of strings, an optional string…).
    fn typed<T: redis::FromRedisValue>(&mut self, what: &str) -> Result<T, String> {
        redis::from_redis_value(self.one()?).map_err(|e| format!("{what}: {e}"))
    }
}

/// Appends `part`'s commands to `pipe`; their number.
fn add(pipe: &mut Pipeline, part: &Pipeline) -> usize {
    for cmd in part.cmd_iter() {
        pipe.add_command(cmd.clone());
    }
    part.len()
}

impl Real {
    /// The state in Redis, as the model's [`Abstract`], and the time left of every hold and
    /// ask key ([`Leases`]), read in one pipeline (one round trip: it runs after every
    /// protocol step); also checks what the model does not carry (`used` is the holders' sum;
    /// `:exp` expires with the latest holder, S4).
    pub(crate) fn observe(&mut self) -> Result<(Abstract, Leases), String> {
        let mut pipe = redis::pipe();
        // Replies of errors are values here (another type at a leader record is decoded).
        pipe.ignore_errors();
        let mut sizes = Vec::new();
        for key in &self.mutex_keys {
            sizes.push(add(&mut pipe, &MutexState::reads(key)));
        }
        for key in &self.shared_keys {
            sizes.push(add(&mut pipe, &SharedState::reads(key)));
            // Absolute expiries: a PTTL depends on when the server ran it.
            pipe.cmd("PEXPIRETIME")
                .arg(key)
                .cmd("PEXPIRETIME")
                .arg(format!("{key}:exp"));
        }
        let record = format!("{}:leader", self.mutex_keys[1]);
        sizes.push(add(&mut pipe, &LeaderState::reads(&record)));
        for lock in LOCKS {
            pipe.cmd("LRANGE")
                .arg(self.written_key(lock))
                .arg(0)
                .arg(-1);
            pipe.cmd("HKEYS").arg(self.ask_key(lock));
        }
        for n in 0..4u8 {
            let (data, fence) = Real::fenced_keys(n)?;
            pipe.get(&data).get(&fence);
        }
        let lease_reads = self.lease_reads(&mut pipe);
        let replies: Vec<Value> = pipe.query(&mut self.con).map_err(io("state")).map(items)?;
        let mut replies = Replies {
            items: replies.into_iter(),
        };
        let state = self.decode_state(&mut replies, &sizes)?;
        let leases = self.decode_leases(&replies.take(lease_reads)?)?;
        Ok((state, leases))
    }

    /// The state in Redis, as the model's [`Abstract`] (see [`Real::observe`]).
    pub(crate) fn state(&mut self) -> Result<Abstract, String> {
        self.observe().map(|(state, _)| state)
    }

    fn decode_state(&self, replies: &mut Replies, sizes: &[usize]) -> Result<Abstract, String> {
        let mut out = Abstract::default();
        let mut fences: Vec<(u64, LockRef, Token)> = Vec::new();
        Self::decode_mutexes(replies, sizes, &mut out, &mut fences)?;
        self.decode_shared(replies, sizes, &mut out, &mut fences)?;
        fences.sort();
        match LeaderState::decode(&replies.take(sizes[4])?)? {
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
        Self::decode_data(replies, &mut out)?;
        Ok(out)
    }

    /// The two mutexes: holders (their fences into `fences`) and queues.
    fn decode_mutexes(
        replies: &mut Replies,
        sizes: &[usize],
        out: &mut Abstract,
        fences: &mut Vec<(u64, LockRef, Token)>,
    ) -> Result<(), String> {
        for n in 0..2u8 {
            let state = MutexState::decode(&replies.take(sizes[usize::from(n)])?)?;
            let holder = match state.live_holder() {
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
        Ok(())
    }

    /// The two shared locks: limits, holders (their fences into `fences`) and queues.
    fn decode_shared(
        &self,
        replies: &mut Replies,
        sizes: &[usize],
        out: &mut Abstract,
        fences: &mut Vec<(u64, LockRef, Token)>,
    ) -> Result<(), String> {
        for n in 0..2u8 {
            let key = &self.shared_keys[usize::from(n)];
            let state = SharedState::decode(&replies.take(sizes[2 + usize::from(n)])?)?;
            let expiries = (replies.typed("PEXPIRETIME")?, replies.typed("PEXPIRETIME")?);
            check_shared(key, &state, expiries)?;
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
        Ok(())
    }

    /// The data the holds protect, and the release requests.
    fn decode_data(replies: &mut Replies, out: &mut Abstract) -> Result<(), String> {
        // The data of the guarded writes, per lock, and the tokens each lock's ask key names;
        // fenced.lua's values (the fences they were stored with are compared by order where a
        // reply shows them).
        for lock in LOCKS {
            let writes: Vec<String> = replies.typed("LRANGE written")?;
            let writers = writes
                .iter()
                .map(|w| w.get(..32).and_then(token_of).ok_or_else(|| w.clone()))
                .collect::<Result<Vec<Token>, String>>()
                .map_err(|w| format!("a guarded write {w:?}"))?;
            if !writers.is_empty() {
                out.written.insert(lock, writers);
            }
            let fields: Vec<String> = replies.typed("HKEYS ask")?;
            let tokens = fields
                .iter()
                .map(|t| token_of(t).ok_or_else(|| format!("asked {t:?}")))
                .collect::<Result<BTreeSet<Token>, String>>()?;
            if !tokens.is_empty() {
                out.asked.insert(lock, tokens);
            }
        }
        for n in 0..4u8 {
            let value: Option<String> = replies.typed("fenced data")?;
            let stored: Option<String> = replies.typed("fenced data's fence")?;
            match (value, stored) {
                (Some(value), Some(_)) => {
                    let token = token_of(&value).ok_or_else(|| format!("fenced {value:?}"))?;
                    out.fenced.insert(n, token);
                }
                (None, None) => {}
                other => return Err(format!("fenced:{n}: the value and its fence {other:?}")),
            }
        }
        Ok(())
    }
}

impl Real {
    /// The reads of the time left of every live hold and ask key; their number.
    fn lease_reads(&self, pipe: &mut Pipeline) -> usize {
        let before = pipe.len();
        pipe.cmd("TIME");
        for key in &self.mutex_keys {
            pipe.cmd("GET")
                .arg(key)
                .cmd("PTTL")
                .arg(key)
                .cmd("PTTL")
                .arg(format!("{key}:queue"));
        }
        for key in &self.shared_keys {
            pipe.cmd("ZRANGE")
                .arg(format!("{key}:exp"))
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES");
        }
        for lock in LOCKS {
            pipe.cmd("PTTL").arg(self.ask_key(lock));
        }
        pipe.len() - before
    }

    /// The time left of every live hold and ask key, in whole lease units (see [`Leases`]).
    fn decode_leases(&self, replies: &[Value]) -> Result<Leases, String> {
        let odd = |what: &str, v: &Value| format!("leases: {what} {v:?}");
        let int = |v: &Value| match v {
            Value::Int(n) => Some(*n),
            Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
            _ => None,
        };
        let [time, rest @ ..] = replies else {
            return Err("leases: no reply".into());
        };
        let now_ms = match time {
            Value::Array(t) if t.len() == 2 => int(&t[0])
                .zip(int(&t[1]))
                .map(|(s, us)| s * 1000 + us / 1000)
                .ok_or_else(|| odd("TIME", time))?,
            _ => return Err(odd("TIME", time)),
        };
        let left = |ms: i64| units(ms.max(0).unsigned_abs());
        let mut out = Leases::default();
        let (mutexes, rest) = rest.split_at(6);
        for (n, reads) in (0u8..).zip(mutexes.chunks(3)) {
            let [value, pttl, queue] = reads else {
                return Err("leases: mutex".into());
            };
            match int(queue).ok_or_else(|| odd("PTTL", queue))? {
                -2 => {}
                -1 => return Err(format!("mutex {n}: a queue without expiry")),
                ms => {
                    out.queues.insert(n, left(ms));
                }
            }
            let Value::BulkString(value) = value else {
                continue;
            };
            let token = std::str::from_utf8(value)
                .ok()
                .and_then(|v| v.get(..32))
                .and_then(token_of)
                .ok_or_else(|| odd("lock value", &Value::BulkString(value.clone())))?;
            let pttl = int(pttl).ok_or_else(|| odd("PTTL", pttl))?;
            if pttl < 0 {
                return Err(format!("lock {n}: a value without expiry (PTTL {pttl})"));
            }
            out.keeps.insert(n, left(pttl));
            // Version 2: the hold ends at the deadline in the value, the key a lease later.
            let deadline = std::str::from_utf8(value)
                .ok()
                .and_then(|v| v.get(32..))
                .and_then(|v| v.strip_prefix("w2 "))
                .and_then(|v| v.split(' ').next())
                .and_then(|d| d.parse::<i64>().ok());
            match deadline {
                Some(deadline) if deadline > now_ms => {
                    out.holds
                        .insert((LockRef::Mutex(n), token), left(deadline - now_ms));
                }
                Some(_) => {}
                None => {
                    out.holds.insert((LockRef::Mutex(n), token), left(pttl));
                }
            }
        }
        let (shared, asks) = rest.split_at(2);
        for (n, exp) in (0u8..).zip(shared) {
            let Value::Array(pairs) = exp else {
                return Err(odd(":exp", exp));
            };
            for pair in pairs.chunks(2) {
                let [Value::BulkString(member), score] = pair else {
                    return Err(odd(":exp", exp));
                };
                let score: f64 = match score {
                    Value::BulkString(b) => {
                        std::str::from_utf8(b).ok().and_then(|s| s.parse().ok())
                    }
                    Value::Double(d) => Some(*d),
                    _ => None,
                }
                .ok_or_else(|| odd("score", score))?;
                let deadline = score as i64;
                if deadline > now_ms {
                    let token = std::str::from_utf8(member)
                        .ok()
                        .and_then(token_of)
                        .ok_or_else(|| odd("holder", exp))?;
                    out.holds
                        .insert((LockRef::Shared(n), token), left(deadline - now_ms));
                }
            }
        }
        for (lock, pttl) in LOCKS.into_iter().zip(asks) {
            match int(pttl).ok_or_else(|| odd("PTTL", pttl))? {
                -2 => {}
                -1 => return Err(format!("{}: kept without expiry", self.ask_key(lock))),
                ms => {
                    out.asks.insert(lock, left(ms));
                }
            }
        }
        Ok(out)
    }
}

/// What the scripts keep true of a shared lock that the model's view does not show.
fn check_shared(key: &str, state: &SharedState, expiries: (i64, i64)) -> Result<(), String> {
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
        // (Both are set to the same `%.0f` of a deadline: equal to the millisecond.)
        let (hash, exp) = expiries;
        if exp < 0 || exp < latest {
            return Err(format!(
                "{key}: :exp expires at {exp}, before the latest holder's deadline {latest}"
            ));
        }
        if (hash - exp).abs() > 1 {
            return Err(format!(
                "{key}: the hash expires at {hash}, :exp at {exp}: they must expire together"
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
