//! What the conformance test (`tests/conformance.rs`) needs to run dlock's Lua scripts by hand
//! against a real server and read back what they wrote: each script's text as the client loads
//! it (`Source::text`) and the very `redis::Script` the client runs (`Source::script`), the
//! keys and argument formats of each kind, and one decoder per key layout
//! (`MutexState`, `SharedState`, `LeaderState`), and the quorum's round-2 key and reply
//! (`quorum_since`, `raise_answer`). Hidden, not an API: it follows the
//! scripts.
//!
//! Why here and not behind a `model` cargo feature: nothing in it changes the client's
//! behaviour, the decoders are a few hundred lines compiled into every build either way under
//! `--all-features` (which `make test` uses), and `__private` is where dlock already keeps what
//! its own crates and tests reach into.

pub use crate::scripts::Source;
pub use crate::scripts::layout::{
    LeaderState, MutexState, MutexValue, QueueEntry, SharedHolder, SharedState, parse_grant,
    parse_queue_entry,
};
/// The servers' refusal texts without an error code (`server_texts.rs`), for
/// `tests/operate/server_texts.rs`, which checks each row on its own flavour.
pub use crate::server_texts::{Said, TEXTS, Text, read as read_server_text};

use crate::key::{LockKeys, LockKind};
use crate::scripts::wire;
use crate::token::OwnerToken;

/// The kinds of lock whose keys [`lock_key`] names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// `<prefix>{<name>}` (an election's is the mutex `election:<name>`).
    Mutex,
    /// `<prefix>{<name>}:sem`.
    Semaphore,
    /// `<prefix>{<name>}:rw`.
    RwLock,
}

/// The lock key of `name` under `prefix`, as the client names it. `None` for an invalid name.
pub fn lock_key(kind: KeyKind, prefix: &str, name: &str) -> Option<String> {
    crate::key::validate_name(name).ok()?;
    let kind = match kind {
        KeyKind::Mutex => LockKind::Mutex,
        KeyKind::Semaphore => LockKind::Semaphore,
        KeyKind::RwLock => LockKind::RwLock,
    };
    Some(LockKeys::of_kind(kind, prefix, name).lock.to_string())
}

/// The fence counter of `name`'s slot under `prefix` (`<prefix>fence:{<tag>}`).
pub fn fence_counter(prefix: &str, name: &str) -> Option<String> {
    crate::key::validate_name(name).ok()?;
    Some(LockKeys::new(prefix, name).counter().to_string())
}

/// A quorum node's "data since" record (`fence_raise.lua`'s `ARGV[4]`) for the lock `name` under
/// `prefix`, as the quorum client names it on a standalone server.
pub fn quorum_since(prefix: &str, name: &str) -> Option<String> {
    crate::key::validate_name(name).ok()?;
    Some(LockKeys::new(prefix, name).quorum_since(false))
}

/// What `fence_raise.lua` answered, as the quorum client decodes it (`RaiseReply`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RaiseAnswer {
    /// The counter is at least the quorum fence now.
    Raised,
    /// The node's data is younger than one TTL: kept out for this long.
    KeptOut(std::time::Duration),
    /// Nobody holds the lock on the node.
    Gone,
    /// Another owner holds it.
    Other,
}

/// `reply` decoded as the quorum client decodes round 2's; `None` where it would refuse it.
pub fn raise_answer(reply: &redis::Value) -> Option<RaiseAnswer> {
    use crate::scripts::RaiseReply;
    Some(match RaiseReply::decode(reply)? {
        RaiseReply::Raised => RaiseAnswer::Raised,
        RaiseReply::KeptOut(left) => RaiseAnswer::KeptOut(left),
        RaiseReply::Gone => RaiseAnswer::Gone,
        RaiseReply::Other => RaiseAnswer::Other,
    })
}

/// The lock value an acquire of `token` (32 hex digits) writes: `<token>-1 <holder>\x1f<label>`,
/// `holder` being `<host>\x1f<pid>`. `None` for a token that is not 32 hex digits.
pub fn lock_value(token: &str, holder: &str, label: &str) -> Option<String> {
    let token = OwnerToken::parse(token.as_bytes())?;
    let mut cmd = redis::Cmd::new();
    cmd.arg(wire::LockValue {
        token: &token,
        holder,
        label,
    });
    cmd.args_iter().find_map(|arg| match arg {
        redis::Arg::Simple(bytes) => String::from_utf8(bytes.to_vec()).ok(),
        _ => None,
    })
}

/// A mutex waiter's queue entry (`wire::queue_entry`), publishing with `PUBLISH`.
pub fn mutex_entry(
    token: &str,
    client: &str,
    lease_ms: u64,
    holder: &str,
    label: &str,
) -> Option<String> {
    let token = OwnerToken::parse(token.as_bytes())?;
    Some(wire::queue_entry(
        &token, client, lease_ms, 'P', holder, label,
    ))
}

/// A shared lock waiter's queue entry (`wire::shared_queue_entry`), publishing with `PUBLISH`.
pub fn shared_entry(
    token: &str,
    client: &str,
    lease_ms: u64,
    weight: u32,
    holder: &str,
    label: &str,
) -> Option<String> {
    let token = OwnerToken::parse(token.as_bytes())?;
    Some(wire::shared_queue_entry(
        &token, client, lease_ms, 'P', weight, holder, label,
    ))
}

/// The wake channel of `client`'s waiters on the lock `lock_key`.
pub fn wake_channel(lock_key: &str, client: &str) -> String {
    wire::wake_channel(lock_key, client)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scripts_loaded_by_the_test_are_the_clients() {
        for source in Source::ALL {
            let rebuilt = redis::Script::new(&source.text());
            assert_eq!(rebuilt.get_hash(), source.script().get_hash(), "{source:?}");
        }
    }

    #[test]
    fn formats_round_trip_through_the_decoders() {
        let token = "0123456789abcdef0123456789abcdef";
        let value = lock_value(token, "h\x1f7", "job").unwrap();
        assert_eq!(value, format!("{token}-1 h\x1f7\x1fjob"));
        let entry = shared_entry(token, "c0ffee", 100, 2, "h\x1f7", "job").unwrap();
        let parsed = parse_queue_entry(&entry, true).unwrap();
        assert_eq!((parsed.weight, parsed.lease_ms), (Some(2), 100));
        assert_eq!(lock_value("xyz", "h\x1f7", ""), None);
        assert_eq!(
            lock_key(KeyKind::Semaphore, "c:", "s").as_deref(),
            Some("c:{s}:sem")
        );
        assert_eq!(quorum_since("c:", "q").as_deref(), Some("c:quorum:since"));
        let kept = redis::Value::Array(vec![redis::Value::Int(2), redis::Value::Int(7)]);
        assert_eq!(
            raise_answer(&kept),
            Some(RaiseAnswer::KeptOut(std::time::Duration::from_millis(7)))
        );
        assert_eq!(
            raise_answer(&redis::Value::Int(-1)),
            Some(RaiseAnswer::Other)
        );
    }
}
