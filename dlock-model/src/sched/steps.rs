//! One function per scheduler script: `(state, now_ms, ARGV) -> reply`, each following its
//! Lua file in order (the comments name the Lua lines they stand for). The keys are the
//! job's ([`JobRedis`]) or the registry's ([`Registry`]), so they are not arguments.

use super::keys::{
    JobRedis, Ms, Published, Registry, ZSet, claim_record, end_record, ranked, zrange, zrem_upto,
};

/// `claim.lua`'s ARGV.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClaimArgs {
    /// `ARGV[1]`: the run id (the nominal occurrence in ms).
    pub run_id: String,
    /// `ARGV[2]`: the nominal occurrence in ms.
    pub occurrence: Ms,
    /// `ARGV[3]`: the replica id.
    pub replica: String,
    /// `ARGV[4]`: host.
    pub host: String,
    /// `ARGV[5]`: pid.
    pub pid: String,
    /// `ARGV[6]`: the attempt token.
    pub token: String,
    /// `ARGV[7]`: claim retention in ms.
    pub retention: Ms,
    /// `ARGV[8]`: how many runs the ledger keeps.
    pub keep: i64,
    /// `ARGV[9]`: the fire time (nominal + jitter) in ms.
    pub fire_at: Ms,
    /// `ARGV[10]`: the turn grace in ms.
    pub grace: Ms,
    /// `ARGV[11]`: the caller's liveness in ms.
    pub liveness: Ms,
    /// `ARGV[12]`: the attempt lease in ms (0: at most once).
    pub lease: Ms,
    /// `ARGV[13]`: the job's turn offset (its rank among its group's jobs; 0 for a job in no
    /// group), added to the turn counter when picking whose turn it is (issue #51).
    pub offset: i64,
}

/// `claim.lua`'s reply. `next` is the replica whose turn the next occurrence is (`None` only
/// with no live replica, which a caller with liveness > 0 never sees); `due` is present under
/// at-least-once delivery (`ARGV[12]` > 0): the first pending run's score, -1 for none.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ClaimReply {
    /// `{1, now, next[, due]}`: this replica won the occurrence.
    Won {
        /// Server time.
        now: Ms,
        /// Whose turn the next occurrence is.
        next: Option<String>,
        /// The first pending run's due time (at least once).
        due: Option<Ms>,
    },
    /// `{0, "claimed", now, next[, due]}`.
    Claimed {
        /// Server time.
        now: Ms,
        /// Whose turn it is.
        next: Option<String>,
        /// The first pending run's due time (at least once).
        due: Option<Ms>,
    },
    /// `{0, "paused", now, ""}`.
    Paused {
        /// Server time.
        now: Ms,
    },
    /// `{2, wait, now, next[, due]}`: too early, or another replica's turn.
    Wait {
        /// How long to wait, ms.
        wait: Ms,
        /// Server time.
        now: Ms,
        /// Whose turn the next occurrence is.
        next: Option<String>,
        /// The first pending run's due time (at least once).
        due: Option<Ms>,
    },
}

/// The first pending run's score in `retries`, -1 for none (claim.lua's `due`).
fn first_due(retries: &ZSet) -> Ms {
    ranked(retries).first().map_or(-1, |(_, score)| *score)
}

/// common.lua's `open_run`: claims run `id` at `now`, adds it to the ledger (`record`), opens
/// its attempt lease under at-least-once delivery, and trims the ledger to `keep` runs (never
/// one still in `retries`).
#[allow(clippy::too_many_arguments)]
fn open_run(
    s: &mut JobRedis,
    id: &str,
    occurrence: Ms,
    now: Ms,
    retention: Ms,
    keep: i64,
    record: String,
    lease: Ms,
) {
    s.claims.insert(id.to_owned(), now);
    zrem_upto(&mut s.claims, now - retention);
    s.runs.insert(id.to_owned(), occurrence);
    s.ledger.insert(format!("{id}:claim"), record);
    if lease > 0 {
        s.retries.insert(id.to_owned(), now + lease);
    }
    let extra = s.runs.len() as i64 - keep;
    if extra > 0 {
        for old in zrange(&s.runs, 0, extra - 1) {
            if !s.retries.contains_key(&old) {
                for field in ["claim", "end", "attempts"] {
                    s.ledger.remove(&format!("{old}:{field}"));
                }
                s.runs.remove(&old);
            }
        }
    }
}

/// claim.lua: claim one scheduled occurrence for `a.replica`, at server time `now`.
pub fn claim(s: &mut JobRedis, now: Ms, a: &ClaimArgs) -> ClaimReply {
    s.expire(now);
    let due = |s: &JobRedis| (a.lease > 0).then(|| first_due(&s.retries));
    // ZADD replicas now + liveness me; PEXPIRE replicas liveness * 2
    s.replicas.insert(a.replica.clone(), now + a.liveness);
    s.replicas_expire = Some(now + a.liveness * 2);
    if s.paused {
        return ClaimReply::Paused { now };
    }
    zrem_upto(&mut s.replicas, now);
    s.drop_empty();
    // ZRANGE, then table.sort: by id.
    let live: Vec<String> = s.replicas.keys().cloned().collect();
    // The stored counter moves by one per claim; the offset shifts whose turn it is, so the
    // jobs of a group due at one instant start on different replicas.
    let counted = s.turn.unwrap_or(0);
    let turn = counted + a.offset;
    let turn_of = |n: i64| -> Option<String> {
        (!live.is_empty()).then(|| live[n.rem_euclid(live.len() as i64) as usize].clone())
    };
    if s.claims.contains_key(&a.run_id) || s.ledger.contains_key(&format!("{}:claim", a.run_id)) {
        return ClaimReply::Claimed {
            now,
            next: turn_of(turn),
            due: due(s),
        };
    }
    if now < a.fire_at {
        return ClaimReply::Wait {
            wait: a.fire_at - now,
            now,
            next: turn_of(turn + 1),
            due: due(s),
        };
    }
    if now < a.fire_at + a.grace && turn_of(turn).as_deref() != Some(a.replica.as_str()) {
        return ClaimReply::Wait {
            wait: a.fire_at + a.grace - now,
            now,
            next: turn_of(turn + 1),
            due: due(s),
        };
    }
    let record = claim_record(&a.replica, &a.host, &a.pid, now, false, &a.token, 1);
    open_run(
        s,
        &a.run_id,
        a.occurrence,
        now,
        a.retention,
        a.keep,
        record,
        a.lease,
    );
    s.turn = Some(counted + 1);
    ClaimReply::Won {
        now,
        next: turn_of(turn + 1),
        due: due(s),
    }
}

/// request.lua: queue a `run_now` request made at `requested` (`ARGV[1]`), the list kept
/// `keep_secs` seconds (`ARGV[2]`), and publish `message` on `channel`. Returns the number of
/// pending requests.
pub fn request(
    s: &mut JobRedis,
    now: Ms,
    requested: i64,
    keep_secs: i64,
    channel: &str,
    message: &str,
    sharded: bool,
) -> i64 {
    s.expire(now);
    s.requests.push(requested);
    s.requests_expire = Some(now + keep_secs * 1000);
    s.published.push(Published {
        channel: channel.to_owned(),
        message: message.to_owned(),
        sharded,
    });
    s.requests.len() as i64
}

/// `take_request.lua`'s ARGV.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TakeRequestArgs {
    /// `ARGV[1]`: the run id for the request's run ("m…").
    pub run_id: String,
    /// `ARGV[2]`: the replica id.
    pub replica: String,
    /// `ARGV[3]`: host.
    pub host: String,
    /// `ARGV[4]`: pid.
    pub pid: String,
    /// `ARGV[5]`: the attempt token.
    pub token: String,
    /// `ARGV[6]`: claim retention in ms.
    pub retention: Ms,
    /// `ARGV[7]`: how many runs the ledger keeps.
    pub keep: i64,
    /// `ARGV[8]`: the attempt lease in ms (0: at most once).
    pub lease: Ms,
}

/// `take_request.lua`'s reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TakeRequestReply {
    /// `{1, requested, now}`: took a request, must run it.
    Took {
        /// The request's time.
        requested: i64,
        /// Server time.
        now: Ms,
    },
    /// `{0, "empty", now}`.
    Empty {
        /// Server time.
        now: Ms,
    },
    /// `{0, "paused", now}`.
    Paused {
        /// Server time.
        now: Ms,
    },
    /// `{0, "claimed", now}`: the run id is taken.
    Claimed {
        /// Server time.
        now: Ms,
    },
}

/// take_request.lua: take the oldest request and claim its run, in one step.
pub fn take_request(s: &mut JobRedis, now: Ms, a: &TakeRequestArgs) -> TakeRequestReply {
    s.expire(now);
    if s.paused {
        return TakeRequestReply::Paused { now };
    }
    if s.claims.contains_key(&a.run_id) {
        return TakeRequestReply::Claimed { now };
    }
    if s.requests.is_empty() {
        return TakeRequestReply::Empty { now };
    }
    let requested = s.requests.remove(0);
    s.drop_empty();
    let record = claim_record(&a.replica, &a.host, &a.pid, now, true, &a.token, 1);
    open_run(
        s,
        &a.run_id,
        requested,
        now,
        a.retention,
        a.keep,
        record,
        a.lease,
    );
    TakeRequestReply::Took { requested, now }
}

/// withdraw.lua: withdraw the claim of `run_id` made with `token`, if it is that attempt's
/// first and nothing of its run started; a manual run's request goes back to the head of the
/// queue, and the list expires `keep_secs` from now (`ARGV[3]`). Returns whether it withdrew
/// (1) or changed nothing (0).
pub fn withdraw(s: &mut JobRedis, now: Ms, run_id: &str, token: &str, keep_secs: i64) -> bool {
    s.expire(now);
    let Some(c) = s.claim_of(run_id) else {
        return false;
    };
    let mine = c.first() == Some(&"1") && c.get(6) == Some(&token) && c.get(7) == Some(&"1");
    if !mine || s.ledger.contains_key(&format!("{run_id}:end")) {
        return false;
    }
    let requested = s.runs.get(run_id).copied();
    s.claims.remove(run_id);
    s.runs.remove(run_id);
    s.ledger.remove(&format!("{run_id}:claim"));
    s.retries.remove(run_id);
    if let (true, Some(requested)) = (run_id.starts_with('m'), requested) {
        // LPUSH, then EXPIRE: the list may have been gone (its last request taken).
        s.requests.insert(0, requested);
        s.requests_expire = Some(now + keep_secs * 1000);
    }
    true
}

/// The pause (`Scheduler::force_pause`): `SET paused 1`, no script.
pub fn pause(s: &mut JobRedis, now: Ms) {
    s.expire(now);
    s.paused = true;
}

/// resume.lua: resume the job and, when requests or at-least-once runs are pending, publish
/// `message` on `channel`. Returns how many are pending.
pub fn resume(s: &mut JobRedis, now: Ms, channel: &str, message: &str, sharded: bool) -> i64 {
    s.expire(now);
    s.paused = false;
    let pending = (s.requests.len() + s.retries.len()) as i64;
    if pending > 0 {
        s.published.push(Published {
            channel: channel.to_owned(),
            message: message.to_owned(),
            sharded,
        });
    }
    pending
}

/// heartbeat.lua: keep `replica` live for `liveness` ms (0 removes it); `with_retries` when
/// the call names the `retries` key (an at-least-once job). Returns `{now, due}`.
pub fn heartbeat(
    s: &mut JobRedis,
    now: Ms,
    replica: &str,
    liveness: Ms,
    with_retries: bool,
) -> (Ms, Ms) {
    s.expire(now);
    if liveness > 0 {
        s.replicas.insert(replica.to_owned(), now + liveness);
        s.replicas_expire = Some(now + liveness * 2);
    } else {
        s.replicas.remove(replica);
    }
    zrem_upto(&mut s.replicas, now);
    s.drop_empty();
    let due = if with_retries {
        first_due(&s.retries)
    } else {
        -1
    };
    (now, due)
}

/// `register.lua`'s ARGV and its entry key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RegisterArgs {
    /// `KEYS[2]`: the instance's entry key.
    pub entry_key: String,
    /// `ARGV[1]`: the instance token.
    pub token: String,
    /// `ARGV[2]`: the entry's ttl in ms (0 withdraws it).
    pub ttl: Ms,
    /// `ARGV[3]`: the replica and its jobs.
    pub body: String,
    /// `ARGV[4]`: liveness in ms.
    pub liveness: Ms,
}

/// register.lua: publish (or withdraw) one instance's registry entry. Returns the server time.
pub fn register(r: &mut Registry, now: Ms, a: &RegisterArgs) -> Ms {
    r.expire(now);
    zrem_upto(&mut r.index, now);
    if a.ttl > 0 {
        let value = format!("3 {now} {} {}\n{}", a.ttl, a.liveness, a.body);
        r.entries.insert(a.entry_key.clone(), (value, now + a.ttl));
        r.index.insert(a.token.clone(), now + a.ttl);
    } else {
        r.entries.remove(&a.entry_key);
        r.index.remove(&a.token);
    }
    match ranked(&r.index).last() {
        Some((_, score)) => r.index_expire = Some(now + (score - now).max(1)),
        None => r.index_expire = None,
    }
    now
}

/// `once.lua`'s ARGV. The idempotency key's run id (`"o"` + the key's SHA-1 in hex, which
/// the script computes with `redis.sha1hex`) is given by the caller, already made.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OnceArgs {
    /// `ARGV[1]`: the caller's run id (used without an idempotency key).
    pub run_id: String,
    /// The run id of `ARGV[2]`'s idempotency key (`"o" + sha1hex(key)`), `None` for no key.
    pub key_id: Option<String>,
    /// `ARGV[2]`: the idempotency key itself, "" for none: a new keyed run stores it as
    /// `<id>:key` = `"1\x1f<key>"`, so that operators see it (only its hash is the run id).
    pub key: String,
    /// `ARGV[3]`: the due time in ms, or `None` to use the delay.
    pub due: Option<Ms>,
    /// `ARGV[4]`: the delay from now in ms.
    pub delay: Ms,
    /// `ARGV[5]`: the replica id.
    pub replica: String,
    /// `ARGV[6]`: host.
    pub host: String,
    /// `ARGV[7]`: pid.
    pub pid: String,
    /// `ARGV[8]`: the arguments (JSON).
    pub args: String,
    /// `ARGV[9]`: claim retention in ms.
    pub retention: Ms,
    /// `ARGV[10]`: the wake channel.
    pub channel: String,
    /// `ARGV[11]`: the message.
    pub message: String,
    /// `ARGV[12]` is "SPUBLISH".
    pub sharded: bool,
    /// `ARGV[13]`: debounce: the longest wait in ms from the key's first call (its pending
    /// run's attempt 0 claim time); `None` ("") for no debounce.
    pub max_wait: Option<Ms>,
    /// `ARGV[14]` is "1": replace the pending run's arguments.
    pub replace: bool,
    /// `ARGV[15]`: the submitter's traceparent, "" for none (`<id>:trace` = `"1\x1f<it>"`).
    pub trace: String,
}

/// `once.lua`'s reply `{status, id, due, now}`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OnceReply {
    /// 1 enqueued, 0 the idempotency key was used already, 2 the caller's run id is taken,
    /// 3 the key's pending run was updated (debounce, replace), 4 debounce or replace was asked
    /// but the key's run is no longer pending (claimed, ended, cancelled or trimmed): nothing
    /// changed; 5 debounce or replace was asked but the key's run has records of another
    /// format version: refused, nothing changed.
    pub status: i64,
    /// The run id.
    pub id: String,
    /// The due time (-1: only the claim is left, or status 2).
    pub due: Ms,
    /// Server time.
    pub now: Ms,
}

/// once.lua: enqueue a one-off job's pending run (attempt 0, "scheduled", due in `retries`);
/// with a key already used, debounce (move the due time, capped by the first call plus
/// `max_wait`) and/or replace (its arguments) the key's run while it is still pending.
pub fn once(s: &mut JobRedis, now: Ms, a: &OnceArgs) -> OnceReply {
    s.expire(now);
    zrem_upto(&mut s.claims, now - a.retention);
    let known = |s: &JobRedis, id: &str| {
        s.claims.contains_key(id) || s.ledger.contains_key(&format!("{id}:claim"))
    };
    let id = a.key_id.clone().unwrap_or_else(|| a.run_id.clone());
    // The requested due time (the past: now).
    let requested = a.due.map_or(now + a.delay, |due| due.max(now));
    if known(s, &id) {
        let reply = |status, due| OnceReply {
            status,
            id: id.clone(),
            due,
            now,
        };
        if a.key_id.is_none() {
            return reply(2, -1);
        }
        let due = s.runs.get(&id).copied().unwrap_or(-1);
        if a.max_wait.is_none() && !a.replace {
            return reply(0, due);
        }
        let first = match pending_since(s, &id) {
            Pending::Since(first) => first,
            Pending::No => return reply(4, due),
            Pending::OtherVersion => return reply(5, due),
        };
        let mut due = due;
        if let Some(max_wait) = a.max_wait {
            // Not clamped to now: a cap in the past keeps the run due.
            due = requested.min(first + max_wait);
            let earliest = ranked(&s.retries).first().map(|(_, score)| *score);
            s.runs.insert(id.clone(), due);
            s.retries.insert(id.clone(), due);
            let end = end_record("scheduled", "", "", &due.to_string(), "", "");
            s.ledger.insert(format!("{id}:end"), end);
            announce(s, a, earliest, due);
        }
        if a.replace {
            s.ledger.insert(format!("{id}:args"), a.args.clone());
            set_trace(s, &id, &a.trace);
        }
        return reply(3, due);
    }
    let due = match a.max_wait {
        Some(max_wait) => requested.min(now + max_wait),
        None => requested,
    };
    let first = ranked(&s.retries).first().map(|(_, score)| *score);
    s.claims.insert(id.clone(), now);
    s.runs.insert(id.clone(), due);
    s.retries.insert(id.clone(), due);
    let record = claim_record(&a.replica, &a.host, &a.pid, now, true, "", 0);
    s.ledger.insert(format!("{id}:claim"), record);
    let end = end_record("scheduled", "", "", &due.to_string(), "", "");
    s.ledger.insert(format!("{id}:end"), end);
    s.ledger.insert(format!("{id}:args"), a.args.clone());
    if a.key_id.is_some() {
        s.ledger
            .insert(format!("{id}:key"), format!("1\u{1f}{}", a.key));
    }
    set_trace(s, &id, &a.trace);
    announce(s, a, first, due);
    OnceReply {
        status: 1,
        id,
        due,
        now,
    }
}

/// once.lua's `<id>:trace` record: the traceparent, or none (removed).
fn set_trace(s: &mut JobRedis, id: &str, trace: &str) {
    let field = format!("{id}:trace");
    if trace.is_empty() {
        s.ledger.remove(&field);
    } else {
        s.ledger.insert(field, format!("1\u{1f}{trace}"));
    }
}

/// Whether a keyed run may still be debounced or replaced (once.lua's checks).
enum Pending {
    /// Records of version 1, attempt 0, "scheduled": enqueued (first called) at this time.
    Since(Ms),
    /// Claimed, ended, cancelled, or only its claim is left.
    No,
    /// Records of another format version.
    OtherVersion,
}

fn pending_since(s: &JobRedis, id: &str) -> Pending {
    let (Some(c), Some(e)) = (s.claim_of(id), s.end_of(id)) else {
        return Pending::No;
    };
    if c.first() != Some(&"1") || e.first() != Some(&"1") {
        return Pending::OtherVersion;
    }
    if c.get(7) != Some(&"0") || e.get(1) != Some(&"scheduled") {
        return Pending::No;
    }
    match c.get(4).and_then(|t| t.parse().ok()) {
        Some(first) => Pending::Since(first),
        None => Pending::No,
    }
}

/// Wakes the replicas when a run now due at `due` is due before every pending one was
/// (`earliest`, read before the change).
fn announce(s: &mut JobRedis, a: &OnceArgs, earliest: Option<Ms>, due: Ms) {
    if earliest.is_none_or(|first| due < first) {
        s.published.push(Published {
            channel: a.channel.clone(),
            message: a.message.clone(),
            sharded: a.sharded,
        });
    }
}

/// once_cancel.lua: cancel run `run_id` if it is still at attempt 0, "scheduled"; records
/// `text`. Returns `{cancelled, now}`.
pub fn once_cancel(s: &mut JobRedis, now: Ms, run_id: &str, text: &str) -> (bool, Ms) {
    s.expire(now);
    let (Some(c), Some(e)) = (s.claim_of(run_id), s.end_of(run_id)) else {
        return (false, now);
    };
    let pending = c.first() == Some(&"1")
        && e.first() == Some(&"1")
        && c.get(7) == Some(&"0")
        && e.get(1) == Some(&"scheduled");
    if !pending {
        return (false, now);
    }
    let end = end_record("cancelled", &now.to_string(), "", "", text, "");
    s.ledger.insert(format!("{run_id}:end"), end);
    s.retries.remove(run_id);
    (true, now)
}

/// once_trim.lua: trim the ledger to `keep` runs, looking at `look` runs at most (oldest
/// first), never a run still in `retries`. Returns how many were removed.
pub fn once_trim(s: &mut JobRedis, now: Ms, keep: i64, look: i64) -> i64 {
    s.expire(now);
    let extra = s.runs.len() as i64 - keep;
    if extra <= 0 {
        return 0;
    }
    let mut removed = 0;
    // ZRANGE runs 0 min(extra, look) - 1: with `look` 0 that is -1, every run.
    for id in zrange(&s.runs, 0, extra.min(look) - 1) {
        if !s.retries.contains_key(&id) {
            for field in ["claim", "end", "attempts", "args", "trace", "key"] {
                s.ledger.remove(&format!("{id}:{field}"));
            }
            s.runs.remove(&id);
            removed += 1;
        }
    }
    removed
}
