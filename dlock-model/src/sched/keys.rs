//! What Redis holds of one job, as the scheduler's scripts see it: [`JobRedis`] (the job's
//! sorted sets, ledger, request list, pause and turn keys, their expiries, the messages
//! published), [`Registry`], and the helpers that read them in Redis's order and build ledger
//! records as the Lua writes them. The ground of the `sched` model: every other file here
//! imports it.

use std::collections::BTreeMap;

/// Server time in milliseconds.
pub type Ms = i64;

/// A sorted set: member → score. Redis orders it by score, then by member bytes
/// ([`ranked`]).
pub type ZSet = BTreeMap<String, Ms>;

/// A message a step published: `PUBLISH` or, on a cluster, `SPUBLISH`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Published {
    /// The channel (the job's wake channel).
    pub channel: String,
    /// The message (the job's name).
    pub message: String,
    /// Sent with `SPUBLISH`.
    pub sharded: bool,
}

/// What Redis holds of one job's keys (claim.lua's KEYS, request.lua's list, the pause key).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct JobRedis {
    /// `claims`: run id → server time of its claim (trimmed to the retention).
    pub claims: ZSet,
    /// `runs`: run id → nominal occurrence (or request / due time): the ledger's order.
    pub runs: ZSet,
    /// `ledger`: field (`<id>:claim`, `<id>:end`, `<id>:attempts`, a one-off's `<id>:args`,
    /// `<id>:trace` and `<id>:key`) → value.
    pub ledger: BTreeMap<String, String>,
    /// `paused`: present while the job is paused.
    pub paused: bool,
    /// `replicas`: replica id → server time until which it is live.
    pub replicas: ZSet,
    /// The `replicas` key's expiry (`PEXPIRE liveness * 2`), while it exists.
    pub replicas_expire: Option<Ms>,
    /// `turn`: the number of scheduled occurrences claimed; `None` when the key is absent.
    pub turn: Option<i64>,
    /// `retries`: at-least-once runs not final, by when to look at them again.
    pub retries: ZSet,
    /// `requests`: pending `run_now` requests, oldest first (their request times).
    pub requests: Vec<i64>,
    /// The `requests` key's expiry (`EXPIRE`), while it exists with one.
    pub requests_expire: Option<Ms>,
    /// Messages published, oldest first (taken with [`JobRedis::drain_published`]; not part
    /// of what the conformance driver reads back from Redis).
    pub published: Vec<Published>,
}

impl JobRedis {
    /// Drops the keys whose expiry is past at `now` (Redis: expired when `now > deadline`).
    pub fn expire(&mut self, now: Ms) {
        if self.replicas_expire.is_some_and(|at| now > at) {
            self.replicas.clear();
            self.replicas_expire = None;
        }
        if self.requests_expire.is_some_and(|at| now > at) {
            self.requests.clear();
            self.requests_expire = None;
        }
    }

    /// The messages published since the last call.
    pub fn drain_published(&mut self) -> Vec<Published> {
        std::mem::take(&mut self.published)
    }

    /// The claim record of run `id` (`<id>:claim`), split into its fields.
    pub fn claim_of(&self, id: &str) -> Option<Vec<&str>> {
        self.ledger.get(&format!("{id}:claim")).map(|r| fields(r))
    }

    /// The end record of run `id` (`<id>:end`), split into its fields.
    pub fn end_of(&self, id: &str) -> Option<Vec<&str>> {
        self.ledger.get(&format!("{id}:end")).map(|r| fields(r))
    }

    /// A key that became empty is deleted by Redis, and its expiry with it.
    pub(crate) fn drop_empty(&mut self) {
        if self.replicas.is_empty() {
            self.replicas_expire = None;
        }
        if self.requests.is_empty() {
            self.requests_expire = None;
        }
    }
}

/// What Redis holds of the job registry: the index and the instances' entries.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Registry {
    /// The index: instance token → server time when its entry expires.
    pub index: ZSet,
    /// The index key's expiry, while it exists.
    pub index_expire: Option<Ms>,
    /// Entry key → (value, expiry).
    pub entries: BTreeMap<String, (String, Ms)>,
}

impl Registry {
    /// Drops the keys whose expiry is past at `now`.
    pub fn expire(&mut self, now: Ms) {
        if self.index_expire.is_some_and(|at| now > at) {
            self.index.clear();
            self.index_expire = None;
        }
        self.entries.retain(|_, (_, at)| now <= *at);
    }
}

/// The members of `set` in Redis's order: by score, then by member bytes.
pub fn ranked(set: &ZSet) -> Vec<(&str, Ms)> {
    let mut out: Vec<(&str, Ms)> = set.iter().map(|(m, s)| (m.as_str(), *s)).collect();
    out.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(b.0)));
    out
}

/// `ZRANGE set start stop` by rank, with Redis's negative indexes (-1: the last).
pub fn zrange(set: &ZSet, start: i64, stop: i64) -> Vec<String> {
    let all = ranked(set);
    let len = all.len() as i64;
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let stop = if stop < 0 {
        len + stop
    } else {
        stop.min(len - 1)
    };
    if start > stop || start >= len {
        return Vec::new();
    }
    all[start as usize..=stop as usize]
        .iter()
        .map(|(m, _)| (*m).to_owned())
        .collect()
}

/// `ZREMRANGEBYSCORE set -inf max`: drops every member scored at most `max`.
pub fn zrem_upto(set: &mut ZSet, max: Ms) {
    set.retain(|_, score| *score > max);
}

/// common.lua's `fields`: the `\x1f`-separated fields of a record, empty ones kept.
pub fn fields(record: &str) -> Vec<&str> {
    record.split('\x1f').collect()
}

/// common.lua's `claim_record` (format version 1).
pub fn claim_record(
    replica: &str,
    host: &str,
    pid: &str,
    claimed_ms: Ms,
    manual: bool,
    token: &str,
    attempt: i64,
) -> String {
    let manual = if manual { "1" } else { "0" };
    format!("1\x1f{replica}\x1f{host}\x1f{pid}\x1f{claimed_ms}\x1f{manual}\x1f{token}\x1f{attempt}")
}

/// common.lua's `end_record` (format version 1); `flags` only when not empty.
pub fn end_record(
    outcome: &str,
    ended_ms: &str,
    fence: &str,
    next_retry_ms: &str,
    text: &str,
    flags: &str,
) -> String {
    let mut record =
        format!("1\x1f{outcome}\x1f{ended_ms}\x1f{fence}\x1f{next_retry_ms}\x1f{text}");
    if !flags.is_empty() {
        record.push('\x1f');
        record.push_str(flags);
    }
    record
}
