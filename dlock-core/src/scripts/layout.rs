//! The state each lock kind keeps in Redis, read with plain commands and decoded into plain
//! values: one decoder per key layout (a mutex's lock value and queue, a shared lock's hash,
//! deadlines and queue, an election's leader record). The client never reads state this way
//! (its scripts do); the conformance test (`tests/conformance.rs`, through
//! `__private::conformance`) does, to hold the scripts' effects against the model's after
//! every step. The lock value is read by `wire::parse_lock_value`, as everywhere; the other
//! formats are documented in `wire.rs` and the scripts, and parsed here because nothing else in
//! the client reads them back.
//!
//! Each `reads` gives a pipeline of read-only commands; `decode` takes its replies (RESP2 or
//! RESP3 spellings) and says what it could not read instead of guessing.

use redis::{Pipeline, Value};

use crate::scripts::wire;

/// A waiter's queue entry: `1 <token> <client> <lease_ms> <pub> [<weight> ]<meta>` (a shared
/// lock's carries the weight), or a mutex entry of version 0 (without the leading `1 `).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueEntry {
    /// The entry's format version (0 or 1).
    pub version: u8,
    /// The waiting acquire call's token (32 hex digits).
    pub token: String,
    /// The waiter's client id: its wake channel is `<lock key>:wake:<client>`.
    pub client: String,
    /// The lease the waiter asked for, in milliseconds.
    pub lease_ms: u64,
    /// `P` (`PUBLISH`) or `S` (`SPUBLISH`).
    pub publish: char,
    /// The permits asked for (shared locks only).
    pub weight: Option<u64>,
    /// `<host>\x1f<pid>\x1f<label>`.
    pub meta: String,
}

/// Reads a queue entry; `shared`: a shared lock's (with a weight). `None` for an entry dlock
/// did not write (the scripts drop those).
pub fn parse_queue_entry(entry: &str, shared: bool) -> Option<QueueEntry> {
    let (version, rest) = match entry.strip_prefix("1 ") {
        Some(rest) => (1, rest),
        None if !shared => (0, entry),
        None => return None,
    };
    let mut parts = rest.splitn(if shared { 6 } else { 5 }, ' ');
    let token = parts.next()?;
    let client = parts.next()?;
    let lease_ms = parts.next()?.parse().ok()?;
    let publish = match parts.next()? {
        "P" => 'P',
        "S" => 'S',
        _ => return None,
    };
    let weight = if shared {
        Some(parts.next()?.parse().ok()?)
    } else {
        None
    };
    let meta = parts.next()?;
    let hex = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit());
    (token.len() == 32 && hex(token) && hex(client)).then(|| QueueEntry {
        version,
        token: token.to_owned(),
        client: client.to_owned(),
        lease_ms,
        publish,
        weight,
        meta: meta.to_owned(),
    })
}

/// A mutex's lock value, decoded (an owned `wire::Holder`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MutexValue {
    /// The holding acquire call's token.
    pub token: String,
    /// The value's format version.
    pub version: u8,
    /// Flag `w`: callers were queued when it was written (release must hand off).
    pub waiting: bool,
    /// The fence issued to the hold, if any.
    pub fence: Option<u64>,
    /// `<host>\x1f<pid>\x1f<label>` as written.
    pub host: String,
    /// The holder's process id.
    pub pid: u32,
    /// The holder's label.
    pub label: String,
    /// Version 2 (callers wait, the key kept past it): the holder's deadline, server ms.
    pub deadline_ms: Option<u64>,
}

/// What a mutex (or an election's mutex) holds in Redis: the lock key and its `:queue`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MutexState {
    /// The lock value; `None` when the key is absent.
    pub holder: Option<MutexValue>,
    /// The lock key's `PTTL` (-2 absent, -1 no expiry).
    pub pttl_ms: i64,
    /// The queue entries, oldest first (entries dlock could not read are kept as `Err(raw)`).
    pub queue: Vec<Result<QueueEntry, String>>,
    /// The server clock when read, ms.
    pub now_ms: u64,
}

impl MutexState {
    /// The reads: `GET <lock>`, `PTTL <lock>`, `LRANGE <lock>:queue 0 -1`, `TIME`.
    pub fn reads(lock: &str) -> Pipeline {
        let mut pipe = redis::pipe();
        pipe.cmd("GET").arg(lock);
        pipe.cmd("PTTL").arg(lock);
        pipe.cmd("LRANGE")
            .arg(format!("{lock}:queue"))
            .arg(0)
            .arg(-1);
        pipe.cmd("TIME");
        pipe
    }

    /// The holder whose lease runs: a version-2 value past its deadline (a key kept for the
    /// queue, issue #35) holds for nobody.
    pub fn live_holder(&self) -> Option<&MutexValue> {
        self.holder
            .as_ref()
            .filter(|h| h.deadline_ms.is_none_or(|d| self.now_ms < d))
    }

    /// Decodes the replies of [`MutexState::reads`].
    ///
    /// # Errors
    /// What could not be read (a lock value dlock did not write, a reply of another shape).
    pub fn decode(replies: &[Value]) -> Result<Self, String> {
        let [value, pttl, queue, time] = replies else {
            return Err(format!("mutex state: expected 4 replies, got {replies:?}"));
        };
        let now_ms = match time {
            Value::Array(t) if t.len() == 2 => {
                let part = |v: &Value| text(v).ok().flatten()?.parse::<u64>().ok();
                part(&t[0])
                    .zip(part(&t[1]))
                    .map(|(s, us)| s * 1000 + us / 1000)
            }
            _ => None,
        }
        .ok_or_else(|| format!("mutex state: TIME answered {time:?}"))?;
        let holder = match text(value)? {
            None => None,
            Some(value) => {
                let held = wire::parse_lock_value(&value)
                    .ok_or_else(|| format!("mutex state: not a dlock lock value: {value:?}"))?;
                Some(MutexValue {
                    token: held.token.to_owned(),
                    version: held.version,
                    waiting: held.waiting,
                    fence: held.fence,
                    host: held.host.to_owned(),
                    pid: held.pid,
                    label: held.label.to_owned(),
                    deadline_ms: held.deadline,
                })
            }
        };
        Ok(Self {
            holder,
            pttl_ms: integer(pttl)?,
            queue: entries(queue, false)?,
            now_ms,
        })
    }
}

/// One holder of a shared lock: its hash field `<token>` = `<weight> <fence> <meta>` and its
/// deadline in `:exp`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedHolder {
    /// The holding acquire call's token.
    pub token: String,
    /// The permits it holds.
    pub weight: u64,
    /// The fence issued to it.
    pub fence: u64,
    /// `<host>\x1f<pid>\x1f<label>`.
    pub meta: String,
    /// Its deadline in `:exp` (server clock, ms); `None` when `:exp` has no score for it.
    pub deadline_ms: Option<i64>,
}

/// What a shared lock (a semaphore, a read-write lock) holds in Redis: the hash, `:exp`,
/// `:queue`, and the server clock they were read at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedState {
    /// The server clock (ms) when read (`TIME`, in the same pipeline).
    pub now_ms: i64,
    /// The hash's `v` (format version), if present.
    pub version: Option<String>,
    /// The stored limit (`limit`), if present.
    pub limit: Option<u64>,
    /// `used`, the permits held (as stored), if present.
    pub used: Option<i64>,
    /// The holders (hash fields of 32 hex digits), in token order.
    pub holders: Vec<SharedHolder>,
    /// Every other hash field (a field a newer script may add), sorted.
    pub other_fields: Vec<(String, String)>,
    /// Members of `:exp` with no holder in the hash, with their scores.
    pub orphan_deadlines: Vec<(String, i64)>,
    /// `PTTL` of the hash and of `:exp` (-2 absent, -1 no expiry).
    pub pttl_ms: i64,
    /// `PTTL` of `:exp`.
    pub exp_pttl_ms: i64,
    /// The queue entries, oldest first (entries dlock could not read kept as `Err(raw)`).
    pub queue: Vec<Result<QueueEntry, String>>,
    /// `<key>:limit`, the limit `set_limit` stored (kept without expiry), as read.
    pub operator_limit: Option<String>,
}

impl SharedState {
    /// The reads: `TIME`, `HGETALL <key>`, `PTTL <key>`, `ZRANGE <key>:exp 0 -1 WITHSCORES`,
    /// `PTTL <key>:exp`, `LRANGE <key>:queue 0 -1`, `GET <key>:limit`.
    pub fn reads(key: &str) -> Pipeline {
        let mut pipe = redis::pipe();
        pipe.cmd("TIME");
        pipe.cmd("HGETALL").arg(key);
        pipe.cmd("PTTL").arg(key);
        pipe.cmd("ZRANGE")
            .arg(format!("{key}:exp"))
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES");
        pipe.cmd("PTTL").arg(format!("{key}:exp"));
        pipe.cmd("LRANGE")
            .arg(format!("{key}:queue"))
            .arg(0)
            .arg(-1);
        pipe.cmd("GET").arg(format!("{key}:limit"));
        pipe
    }

    /// Decodes the replies of [`SharedState::reads`].
    ///
    /// # Errors
    /// What could not be read (a holder record dlock did not write, a reply of another shape).
    pub fn decode(replies: &[Value]) -> Result<Self, String> {
        let [time, hash, pttl, exp, exp_pttl, queue, operator_limit] = replies else {
            return Err(format!("shared state: expected 7 replies, got {replies:?}"));
        };
        let now_ms = match time {
            Value::Array(parts) if parts.len() == 2 => {
                integer(&parts[0])? * 1000 + integer(&parts[1])? / 1000
            }
            other => return Err(format!("shared state: TIME replied {other:?}")),
        };
        let mut deadlines: Vec<(String, i64)> = pairs(exp)?
            .into_iter()
            .map(|(member, score)| Ok((member, number(&score)? as i64)))
            .collect::<Result<_, String>>()?;
        let mut state = Self {
            now_ms,
            version: None,
            limit: None,
            used: None,
            holders: Vec::new(),
            other_fields: Vec::new(),
            orphan_deadlines: Vec::new(),
            pttl_ms: integer(pttl)?,
            exp_pttl_ms: integer(exp_pttl)?,
            queue: entries(queue, true)?,
            operator_limit: text(operator_limit)?,
        };
        for (field, value) in pairs(hash)? {
            let value = text(&value)?.unwrap_or_default();
            match field.as_str() {
                "v" => state.version = Some(value),
                "limit" => state.limit = Some(parse(&value, "limit")?),
                "used" => state.used = Some(parse(&value, "used")?),
                token if token.len() == 32 && token.bytes().all(|b| b.is_ascii_hexdigit()) => {
                    let mut parts = value.splitn(3, ' ');
                    let weight = parse(parts.next().unwrap_or_default(), "holder weight")?;
                    let fence = parse(parts.next().unwrap_or_default(), "holder fence")?;
                    let meta = parts.next().unwrap_or_default().to_owned();
                    let at = deadlines.iter().position(|(member, _)| member == token);
                    state.holders.push(SharedHolder {
                        token: token.to_owned(),
                        weight,
                        fence,
                        meta,
                        deadline_ms: at.map(|at| deadlines.remove(at).1),
                    });
                }
                _ => state.other_fields.push((field, value)),
            }
        }
        state.holders.sort_by(|a, b| a.token.cmp(&b.token));
        state.other_fields.sort();
        state.orphan_deadlines = deadlines;
        Ok(state)
    }
}

/// An election's leader record `<lock key>:leader` = `1 <fence> <value>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaderState {
    /// No record.
    Absent,
    /// A record dlock wrote, with its `PTTL`.
    Record {
        /// The leader's fence.
        fence: u64,
        /// The leader's value.
        value: String,
        /// The record's `PTTL`.
        pttl_ms: i64,
    },
    /// Something dlock did not write (another type, another format), as read.
    Foreign(String),
}

impl LeaderState {
    /// The reads: `GET <record>` (with pcall semantics: a wrong type is an error reply),
    /// `PTTL <record>`.
    pub fn reads(record: &str) -> Pipeline {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        pipe.cmd("GET").arg(record);
        pipe.cmd("PTTL").arg(record);
        pipe
    }

    /// Decodes the replies of [`LeaderState::reads`].
    ///
    /// # Errors
    /// A reply of another shape.
    pub fn decode(replies: &[Value]) -> Result<Self, String> {
        let [value, pttl] = replies else {
            return Err(format!(
                "leader record: expected 2 replies, got {replies:?}"
            ));
        };
        let value = match value {
            Value::ServerError(e) => return Ok(Self::Foreign(format!("{e:?}"))),
            other => text(other)?,
        };
        let Some(value) = value else {
            return Ok(Self::Absent);
        };
        let parsed = value
            .strip_prefix("1 ")
            .and_then(|rest| rest.split_once(' '))
            .and_then(|(fence, v)| Some((fence.parse().ok()?, v.to_owned())));
        Ok(match parsed {
            Some((fence, value)) => Self::Record {
                fence,
                value,
                pttl_ms: integer(pttl)?,
            },
            None => Self::Foreign(value),
        })
    }
}

/// A grant as published on a wake channel: `(token, fence, server_ms, lease_ms)`; `None` for a
/// message that is not one (read by `wire::Grant::parse`).
pub fn parse_grant(payload: &[u8]) -> Option<(String, u64, i64, u64)> {
    let grant = wire::Grant::parse(payload)?;
    let lease = u64::try_from(grant.lease.as_millis()).ok()?;
    Some((
        grant.token.hex().as_str().to_owned(),
        grant.fence,
        grant.server_ms,
        lease,
    ))
}

/// A string reply (`None` for nil).
fn text(value: &Value) -> Result<Option<String>, String> {
    match value {
        Value::Nil | Value::Boolean(false) => Ok(None),
        Value::BulkString(bytes) => String::from_utf8(bytes.clone())
            .map(Some)
            .map_err(|_| format!("not UTF-8: {bytes:?}")),
        Value::SimpleString(s) => Ok(Some(s.clone())),
        other => Err(format!("expected a string, got {other:?}")),
    }
}

/// An integer reply (or one sent as a string).
fn integer(value: &Value) -> Result<i64, String> {
    super::int(value).ok_or_else(|| format!("expected an integer, got {value:?}"))
}

/// A score: a double in RESP3, a string in RESP2.
fn number(value: &Value) -> Result<f64, String> {
    match value {
        Value::Double(d) => Ok(*d),
        Value::Int(n) => Ok(*n as f64),
        other => text(other)?
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("expected a number, got {other:?}")),
    }
}

fn parse<T: std::str::FromStr>(s: &str, what: &str) -> Result<T, String> {
    s.parse().map_err(|_| format!("{what}: cannot read {s:?}"))
}

/// A map reply (RESP3) or a flat array of pairs (RESP2, and `ZRANGE … WITHSCORES` in RESP2),
/// or an array of two-element arrays (`ZRANGE … WITHSCORES` in RESP3).
fn pairs(value: &Value) -> Result<Vec<(String, Value)>, String> {
    match value {
        Value::Map(items) => items
            .iter()
            .map(|(k, v)| Ok((text(k)?.unwrap_or_default(), v.clone())))
            .collect(),
        Value::Array(items)
            if items
                .iter()
                .all(|i| matches!(i, Value::Array(p) if p.len() == 2)) =>
        {
            items
                .iter()
                .map(|item| match item {
                    Value::Array(p) => Ok((text(&p[0])?.unwrap_or_default(), p[1].clone())),
                    _ => Err("unreachable".to_owned()),
                })
                .collect()
        }
        Value::Array(items) if items.len() % 2 == 0 => items
            .chunks(2)
            .map(|p| Ok((text(&p[0])?.unwrap_or_default(), p[1].clone())))
            .collect(),
        Value::Nil => Ok(Vec::new()),
        other => Err(format!("expected pairs, got {other:?}")),
    }
}

/// The entries of an `LRANGE` of a queue.
fn entries(value: &Value, shared: bool) -> Result<Vec<Result<QueueEntry, String>>, String> {
    let Value::Array(items) = value else {
        return Err(format!("queue: expected an array, got {value:?}"));
    };
    items
        .iter()
        .map(|item| {
            let raw = text(item)?.unwrap_or_default();
            Ok(parse_queue_entry(&raw, shared).ok_or(raw))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn queue_entries_of_both_kinds_parse() {
        let token = "0123456789abcdef0123456789abcdef";
        let mutex = parse_queue_entry(&format!("1 {token} c0ffee 2500 P h\x1f9\x1fjob"), false);
        assert_eq!(
            mutex,
            Some(QueueEntry {
                version: 1,
                token: token.into(),
                client: "c0ffee".into(),
                lease_ms: 2500,
                publish: 'P',
                weight: None,
                meta: "h\x1f9\x1fjob".into(),
            })
        );
        let shared = parse_queue_entry(&format!("1 {token} c0ffee 2500 S 3 h\x1f9\x1f"), true);
        assert_eq!(shared.map(|e| (e.weight, e.publish)), Some((Some(3), 'S')));
        let old = parse_queue_entry(&format!("{token} c0ffee 10 P m"), false);
        assert_eq!(old.map(|e| e.version), Some(0));
        assert_eq!(parse_queue_entry("1 short c 1 P m", false), None);
        assert_eq!(
            parse_queue_entry(&format!("{token} c0ffee 10 P 1 m"), true),
            None
        );
    }

    #[test]
    fn shared_state_decodes_resp2_and_resp3_spellings() {
        let t1 = "0123456789abcdef0123456789abcdef";
        let t2 = "fedcba9876543210fedcba9876543210";
        let time = Value::Array(vec![bulk("1700000000"), bulk("5000")]);
        let hash2 = Value::Array(vec![
            bulk("v"),
            bulk("1"),
            bulk("limit"),
            bulk("3"),
            bulk("used"),
            bulk("2"),
            bulk(t1),
            bulk("2 17 h\x1f1\x1f"),
        ]);
        let exp2 = Value::Array(vec![bulk(t1), bulk("1700000009000"), bulk(t2), bulk("5")]);
        let queue = Value::Array(vec![bulk(&format!("1 {t2} c 100 P 2 m")), bulk("junk")]);
        let replies = [
            time,
            hash2,
            Value::Int(900),
            exp2,
            Value::Int(900),
            queue,
            bulk("2"),
        ];
        let state = SharedState::decode(&replies).unwrap();
        assert_eq!(state.now_ms, 1_700_000_000_005);
        assert_eq!((state.limit, state.used), (Some(3), Some(2)));
        assert_eq!(state.holders.len(), 1);
        assert_eq!(state.holders[0].deadline_ms, Some(1_700_000_009_000));
        assert_eq!(state.orphan_deadlines, vec![(t2.to_owned(), 5)]);
        assert_eq!(state.queue[1], Err("junk".to_owned()));
        assert_eq!(state.operator_limit.as_deref(), Some("2"));
        // RESP3: a map and pairs with doubles.
        let mut resp3 = replies.clone();
        resp3[1] = Value::Map(vec![(bulk("limit"), bulk("3")), (bulk("x"), bulk("y"))]);
        resp3[3] = Value::Array(vec![Value::Array(vec![bulk(t1), Value::Double(7.0)])]);
        let state = SharedState::decode(&resp3).unwrap();
        assert_eq!(state.other_fields, vec![("x".to_owned(), "y".to_owned())]);
        assert_eq!(state.orphan_deadlines, vec![(t1.to_owned(), 7)]);
    }

    #[test]
    fn leader_records_decode() {
        let record = LeaderState::decode(&[bulk("1 42 10.0.0.7:80"), Value::Int(500)]);
        assert_eq!(
            record,
            Ok(LeaderState::Record {
                fence: 42,
                value: "10.0.0.7:80".into(),
                pttl_ms: 500
            })
        );
        assert_eq!(
            LeaderState::decode(&[Value::Nil, Value::Int(-2)]),
            Ok(LeaderState::Absent)
        );
        assert_eq!(
            LeaderState::decode(&[bulk("hello"), Value::Int(-1)]),
            Ok(LeaderState::Foreign("hello".into()))
        );
    }
}
