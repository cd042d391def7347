//! The wire formats dlock writes into Redis and reads back, next to the Lua that reads them
//! (`common.lua`, `acquire.lua`, `release.lua`), each with its format version.
//!
//! | format | version 1 (written) | version 0 (read: dlock before format versions) |
//! |---|---|---|
//! | lock value | `<token>-1 <host>\x1f<pid>\x1f<label>[\x1f<fence>]`; while callers wait, version 2: `<token>w2 <deadline_ms> <host>\x1f<pid>\x1f<label>[\x1f<fence>]` | `<token><flag> <host>\x1f<pid>\x1f<label>` |
//! | queue entry | `1 <token> <client> <lease_ms> <pub> <host>\x1f<pid>\x1f<label>` | `<token> <client> <lease_ms> <pub> <meta>` |
//! | grant (published) | `<token> <fence> <now_ms> <lease_ms> 1`; `<token> 0 0 0 1` is a nudge (no grant: ask the server again; `shared_limit.lua`) | `<token> <fence> <now_ms> <lease_ms>` |
//! | semaphore limit set by `set_limit` | the decimal limit at `<lock key>:limit` (no expiry) | — |
//! | wake channel | `<lock key>:wake:<client>` | the same |
//! | leader record (an election's) | `1 <fence> <value>` at `<lock key>:leader` | — |
//! | leader notice (on the channel `<lock key>:leader`) | `1 L <fence> <value>`, `1 V <fence>` (resigned) | — |
//!
//! `token` is 32 lowercase hex digits, `flag` is `w` while callers wait (release must hand off)
//! or `-`. A version-2 lock value (issue #35, written by the scripts only, while callers wait)
//! carries the holder's deadline by the server clock, and its key is kept up to one lease past
//! it, so that a newcomer's plain `SET NX` fails whenever callers wait; past the deadline the
//! hold is nobody's. A dlock that reads version 1 only refuses it by name (a newer format).
//! Version 1 with `w` (a dlock before the kept key) is still read: `client` is the 16-hex-digit id of a client, `pub` is `P` (`PUBLISH`) or `S`
//! (`SPUBLISH`, cluster). `fence` is the hold's fencing token once one was issued to it
//! (`fence.lua`, or at a hand-off): the value is written by a plain `SET` first, without it.
//!
//! During a rolling deploy both versions meet. This version reads version 0 (a lock, a queue
//! entry, a grant written by an older dlock) and refuses a lock value of a *newer* version with
//! an error naming the key (it never takes or changes it). Older dlock reads version 1 lock
//! values and grants (the version sits where it ignores it); it skips version 1 queue entries,
//! so a waiter of this version queued behind a releasing older client falls back to its timer
//! once (never two holders, only a later wake-up).

use std::io::Write;

use redis::{RedisWrite, ToRedisArgs, Value};

use crate::token::OwnerToken;

/// The format version of the lock values this dlock writes from the client (and of queue
/// entries and grants).
pub(crate) const VERSION: u8 = 1;

/// The newest lock value version this dlock reads: 2, the kept key's (written by the scripts
/// while callers wait).
pub(crate) const READ_VERSION: u8 = 2;

/// A lock value as the acquire script sets it (`<token>-1 <holder>\x1f<label>`), written
/// straight into the command. `holder` is `<host>\x1f<pid>`.
pub(crate) struct LockValue<'a> {
    pub(crate) token: &'a OwnerToken,
    pub(crate) holder: &'a str,
    pub(crate) label: &'a str,
}

impl ToRedisArgs for LockValue<'_> {
    fn write_redis_args<W: ?Sized + RedisWrite>(&self, out: &mut W) {
        let mut arg = out.writer_for_next_arg();
        // Writing into the command's buffer cannot fail.
        let _ = arg.write_all(self.token.hex().as_bytes());
        let _ = arg.write_all(b"-1 ");
        let _ = arg.write_all(self.holder.as_bytes());
        let _ = arg.write_all(b"\x1f");
        let _ = arg.write_all(self.label.as_bytes());
    }
}

/// A lock value read back: who holds the lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Holder<'a> {
    pub(crate) token: &'a str,
    pub(crate) version: u8,
    pub(crate) waiting: bool,
    pub(crate) host: &'a str,
    pub(crate) pid: u32,
    pub(crate) label: &'a str,
    /// The fence issued to the hold, if any.
    pub(crate) fence: Option<u64>,
    /// Version 2: the holder's deadline, ms of the server clock (the key outlives it).
    pub(crate) deadline: Option<u64>,
}

/// Reads a lock value of version 0, 1 or 2 (and the head of a newer one, whose `version` then
/// says so: its meta may mean something else); `None` for anything else.
pub(crate) fn parse_lock_value(value: &str) -> Option<Holder<'_>> {
    let (head, meta) = value.split_once(' ')?;
    let token = head.get(..32)?;
    OwnerToken::parse(token.as_bytes())?;
    let (waiting, version) = match head.get(32..)?.as_bytes() {
        [flag] => (*flag, 0),
        [flag, digit @ b'1'..=b'9'] => (*flag, digit - b'0'),
        _ => return None,
    };
    let waiting = match waiting {
        b'w' => true,
        b'-' => false,
        _ => return None,
    };
    let (deadline, meta) = if version == 2 {
        let (deadline, meta) = meta.split_once(' ')?;
        (Some(deadline.parse().ok()?), meta)
    } else {
        (None, meta)
    };
    let mut meta = meta.splitn(4, '\x1f');
    let host = meta.next()?;
    let pid = meta.next()?.parse().ok()?;
    let label = meta.next().unwrap_or_default();
    let fence = match meta.next() {
        Some(fence) => Some(fence.parse().ok()?),
        None => None,
    };
    Some(Holder {
        token,
        version,
        waiting,
        host,
        pid,
        label,
        fence,
        deadline,
    })
}

/// A fence counter below this was lost and made anew by `INCR` (fences start at the server
/// clock in microseconds, 1.7e15 and more today): `next_fence` in `common.lua` raises it to
/// the clock. The same figure is written there.
pub(crate) const LOST_COUNTER_BELOW: u64 = 1_000_000_000_000_000;

/// The fence issued by the uncontended acquire's `INCR` of the slot's counter — taken only
/// on a connection on which `fence.lua` floored that counter before (`crate::fence_epoch`) —
/// given the reply of `INCR`: `None` when the floor of `next_fence` applies (the counter was
/// lost and made anew) or the counter is not dlock's — then `fence.lua` must issue the fence.
pub(crate) fn counted_fence(incr: &Value) -> Option<u64> {
    let Value::Int(counted) = incr else {
        return None;
    };
    u64::try_from(*counted)
        .ok()
        .filter(|&counted| counted >= LOST_COUNTER_BELOW)
}

/// The queue entry of a waiting acquire call.
pub(crate) fn queue_entry(
    token: &OwnerToken,
    client_id: &str,
    lease_ms: u64,
    publish: char,
    holder: &str,
    label: &str,
) -> String {
    format!(
        "{VERSION} {} {client_id} {lease_ms} {publish} {holder}\x1f{label}",
        token.hex().as_str()
    )
}

/// The queue entry of a waiting acquire of `weight` permits of a shared lock
/// (`scripts/shared.lua`).
pub(crate) fn shared_queue_entry(
    token: &OwnerToken,
    client_id: &str,
    lease_ms: u64,
    publish: char,
    weight: u32,
    holder: &str,
    label: &str,
) -> String {
    format!(
        "{VERSION} {} {client_id} {lease_ms} {publish} {weight} {holder}\x1f{label}",
        token.hex().as_str()
    )
}

/// A lock handed to a waiting acquire call by another owner's release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Grant {
    pub(crate) token: OwnerToken,
    pub(crate) fence: u64,
    /// Server time of the hand-off, in milliseconds.
    pub(crate) server_ms: i64,
    pub(crate) lease: std::time::Duration,
}

impl Grant {
    /// Reads a grant message of version 0 or 1.
    pub(crate) fn parse(payload: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(payload).ok()?;
        let mut parts = text.split(' ');
        let token = OwnerToken::parse(parts.next()?.as_bytes())?;
        let fence = parts.next()?.parse().ok()?;
        let server_ms = parts.next()?.parse().ok()?;
        let lease = std::time::Duration::from_millis(parts.next()?.parse().ok()?);
        match (parts.next(), parts.next()) {
            (None | Some("1"), None) => Some(Self {
                token,
                fence,
                server_ms,
                lease,
            }),
            _ => None,
        }
    }
}

/// The channel on which the client `client_id` hears that the lock `lock_key` was handed to
/// one of its waiters; the scripts derive the same name.
pub(crate) fn wake_channel(lock_key: &str, client_id: &str) -> String {
    format!("{lock_key}:wake:{client_id}")
}

/// A notice on an election's channel (`election.lua`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum LeaderNotice {
    /// The holder of `fence` leads, with `value`.
    Leader { fence: u64, value: String },
    /// The leader of `fence` resigned.
    Vacant { fence: u64 },
}

impl LeaderNotice {
    /// Reads a notice of version 1; `None` for anything else.
    pub(crate) fn parse(payload: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(payload).ok()?;
        let rest = text.strip_prefix("1 ")?;
        if let Some(rest) = rest.strip_prefix("L ") {
            let (fence, value) = rest.split_once(' ')?;
            return Some(Self::Leader {
                fence: fence.parse().ok()?,
                value: value.to_owned(),
            });
        }
        let fence = rest.strip_prefix("V ")?.parse().ok()?;
        Some(Self::Vacant { fence })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token::TokenSource;

    fn token() -> OwnerToken {
        TokenSource::new().unwrap().next()
    }

    #[test]
    fn lock_values_round_trip_in_both_versions() {
        let t = token();
        let mut cmd = redis::Cmd::new();
        cmd.arg(LockValue {
            token: &t,
            holder: "web-1\x1f4242",
            label: "pay",
        });
        let args: Vec<Vec<u8>> = cmd
            .args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => b.to_vec(),
                _ => Vec::new(),
            })
            .collect();
        let written = String::from_utf8(args[0].clone()).unwrap();
        assert_eq!(
            written,
            format!("{}-1 web-1\x1f4242\x1fpay", t.hex().as_str())
        );
        let holder = parse_lock_value(&written).unwrap();
        assert_eq!(
            holder,
            Holder {
                token: t.hex().as_str(),
                version: 1,
                waiting: false,
                host: "web-1",
                pid: 4242,
                label: "pay",
                fence: None,
                deadline: None,
            }
        );
        // With the fence issued to the hold.
        let fenced = format!("{written}\x1f1763000000000001");
        assert_eq!(
            parse_lock_value(&fenced).unwrap().fence,
            Some(1_763_000_000_000_001)
        );
        // Version 0, flagged as waited for by the scripts.
        let old = format!("{}w web-2\x1f7\x1f", t.hex().as_str());
        let holder = parse_lock_value(&old).unwrap();
        assert_eq!((holder.version, holder.waiting, holder.pid), (0, true, 7));
        // Version 2, written by the scripts while callers wait: the holder's deadline first.
        let kept = format!(
            "{}w2 1763000000123 web-3\x1f9\x1fpay\x1f42",
            t.hex().as_str()
        );
        let holder = parse_lock_value(&kept).unwrap();
        assert_eq!(
            (holder.version, holder.waiting, holder.deadline, holder.host),
            (2, true, Some(1_763_000_000_123), "web-3")
        );
        assert_eq!(
            (holder.pid, holder.label, holder.fence),
            (9, "pay", Some(42))
        );
        // A newer version: its head is read so that callers can refuse it by name.
        let newer = format!("{}-3 h\x1f1\x1f", t.hex().as_str());
        assert!(parse_lock_value(&newer).unwrap().version > READ_VERSION);
        // Not dlock's at all.
        assert_eq!(parse_lock_value("hello"), None);
        assert_eq!(
            parse_lock_value("not-hex-not-hex-not-hex-not-hex-- h\x1f1\x1f"),
            None
        );
    }

    #[test]
    fn a_counted_fence_is_taken_only_where_no_floor_applies() {
        let counted = |incr: Value| counted_fence(&incr);
        // A live counter: the INCR is the fence.
        assert_eq!(
            counted(Value::Int(1_800_000_000_000_000)),
            Some(1_800_000_000_000_000)
        );
        // A lost counter made anew by INCR: the script floors at the clock.
        assert_eq!(counted(Value::Int(1)), None);
        let just_below = i64::try_from(LOST_COUNTER_BELOW).unwrap() - 1;
        assert_eq!(counted(Value::Int(just_below)), None);
        assert_eq!(
            counted(Value::Int(just_below + 1)),
            Some(LOST_COUNTER_BELOW)
        );
        // Not a number (someone else's key): the script reports it.
        let wrong = Value::SimpleString("ERR value is not an integer or out of range".into());
        assert_eq!(counted(wrong), None);
        assert_eq!(counted(Value::Int(-1)), None);
    }

    #[test]
    fn queue_entries_lead_with_their_version() {
        let t = token();
        let entry = queue_entry(&t, "c0ffee0123456789", 2500, 'P', "h\x1f9", "job");
        assert_eq!(
            entry,
            format!(
                "1 {} c0ffee0123456789 2500 P h\x1f9\x1fjob",
                t.hex().as_str()
            )
        );
    }

    #[test]
    fn grants_of_both_versions_parse_and_others_do_not() {
        let t = token();
        let v1 = format!("{} 17 1700000000000 2500 1", t.hex().as_str());
        let grant = Grant::parse(v1.as_bytes()).unwrap();
        assert_eq!(
            (grant.token, grant.fence, grant.server_ms),
            (t, 17, 1_700_000_000_000)
        );
        assert_eq!(grant.lease, std::time::Duration::from_millis(2500));
        let v0 = format!("{} 17 1700000000000 2500", t.hex().as_str());
        assert_eq!(Grant::parse(v0.as_bytes()), Some(grant));
        let v2 = format!("{} 17 1700000000000 2500 2", t.hex().as_str());
        assert_eq!(Grant::parse(v2.as_bytes()), None);
        assert_eq!(Grant::parse(b"garbage"), None);
        assert_eq!(wake_channel("dlock:{a}", "c1"), "dlock:{a}:wake:c1");
    }

    #[test]
    fn leader_notices_parse_and_others_do_not() {
        assert_eq!(
            LeaderNotice::parse(b"1 L 17 10.0.0.7:80 (blue)"),
            Some(LeaderNotice::Leader {
                fence: 17,
                value: "10.0.0.7:80 (blue)".into()
            })
        );
        assert_eq!(
            LeaderNotice::parse(b"1 L 17 "),
            Some(LeaderNotice::Leader {
                fence: 17,
                value: String::new()
            })
        );
        assert_eq!(
            LeaderNotice::parse(b"1 V 17"),
            Some(LeaderNotice::Vacant { fence: 17 })
        );
        for other in [&b"2 L 17 x"[..], b"1 L x y", b"1 L 17", b"1 V", b"garbage"] {
            assert_eq!(LeaderNotice::parse(other), None, "{other:?}");
        }
    }
}
