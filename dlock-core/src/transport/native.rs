//! The native release (issue #48): on a server with `DELIFEQ` (Valkey 9), a mutex hold its
//! uncontended `SET` took is released by that one command, `DELIFEQ <lock> <value>`, with the
//! whole value the `SET` wrote — no script runs (`Transport::release_native`). Redis 8.4's
//! `DELEX <lock> IFEQ <value>` is the same idea; it is not used: no Redis 8.4 can be installed
//! here to test it.
//!
//! `DELIFEQ` answers 1 only while the value is exactly what the `SET` wrote, so a hold that a
//! queued caller flagged (the kept key of acquire.lua: the value is rewritten) or that got a
//! fence is never deleted by it; its 0 does not say which (flagged, expired, taken over), and
//! the caller then runs release.lua with the same arguments, whose answer it reports
//! (`LeaseCore::release`). The model's step is `Op::NativeRelease` (dlock-model, native.rs),
//! held to the real command by the conformance test on Valkey 9.1.
//!
//! Whether the server has the command is asked once per client, of the server itself
//! (`COMMAND INFO DELIFEQ`), never read off a version string (Valkey reports
//! `redis_version:7.2.4` forever). A refused `COMMAND` (an ACL, a managed service's allow-list)
//! means "not available"; so does a `DELIFEQ` the server refuses later (`NOPERM`, an unknown
//! command on another node): the client then stays with release.lua. This file is a leaf (what
//! the client knows, and how a reply reads); the requests are sent by `transport/mod.rs`.

use std::sync::atomic::{AtomicU8, Ordering};

use redis::Value;

use crate::error::{Error, ErrorKind, Result};
use crate::scripts::wire::LockValue;

/// Not asked yet.
const UNKNOWN: u8 = 0;
/// The server has `DELIFEQ`, and it was not refused.
const YES: u8 = 1;
/// No `DELIFEQ` (or `COMMAND` or `DELIFEQ` refused): release.lua only.
const NO: u8 = 2;

/// What a client knows of the server's `DELIFEQ`.
#[derive(Debug)]
pub(crate) struct NativeRelease {
    state: AtomicU8,
}

impl Default for NativeRelease {
    fn default() -> Self {
        Self {
            state: AtomicU8::new(UNKNOWN),
        }
    }
}

impl NativeRelease {
    /// `Some(whether DELIFEQ may be sent)`, or `None` before the server was asked.
    pub(crate) fn known(&self) -> Option<bool> {
        match self.state.load(Ordering::Relaxed) {
            YES => Some(true),
            NO => Some(false),
            _ => None,
        }
    }

    /// Learns the answer to `COMMAND INFO DELIFEQ` (`asked`): `Err` when it is not known (a
    /// lost connection, a timeout: asked again at the next release); a refusal, or any other
    /// error the server sent, means "not available". Returns whether `DELIFEQ` may be sent.
    pub(crate) fn learn(&self, asked: Result<Value>) -> Result<bool> {
        let has = match asked {
            Ok(reply) => has_command(&reply),
            Err(e) if e.is_connection() || e.is_timeout() => return Err(e),
            Err(e) => {
                tracing::debug!(error = %e, "dlock: COMMAND INFO DELIFEQ refused; releasing with release.lua");
                false
            }
        };
        self.state
            .store(if has { YES } else { NO }, Ordering::Relaxed);
        Ok(has)
    }

    /// Reads `DELIFEQ`'s reply: `Ok(true)` when it deleted the hold; `Ok(false)` when the
    /// caller runs release.lua next — it answered 0, or refused the command: the key holds
    /// another type (`WRONGTYPE`, which release.lua reports), or the server is busy, or it
    /// refused the command itself (an ACL, a node without it: not sent again by this client).
    ///
    /// # Errors
    /// A lost connection or a timeout: the command may or may not have run.
    pub(crate) fn answered(&self, reply: Result<Value>, name: &str) -> Result<bool> {
        match reply {
            Ok(Value::Int(1)) => Ok(true),
            Ok(_) => Ok(false),
            Err(e) if e.is_connection() || e.is_timeout() => Err(e),
            Err(e) => {
                if !refusal_of_the_data(&e) {
                    tracing::debug!(lock = %name, error = %e, "dlock: DELIFEQ refused; this client releases with release.lua from now on");
                    self.state.store(NO, Ordering::Relaxed);
                }
                Ok(false)
            }
        }
    }
}

/// Whether `error` is about this one key or this moment (another type at the key, a busy
/// server), not about the command.
fn refusal_of_the_data(error: &Error) -> bool {
    matches!(error.kind(), ErrorKind::WrongType | ErrorKind::Busy)
}

/// `DELIFEQ <lock> <value>`.
pub(crate) fn delifeq(lock: &str, value: &LockValue<'_>) -> redis::Cmd {
    let size = lock.len() + value.holder.len() + value.label.len() + 64;
    let mut cmd = redis::Cmd::with_capacity(3, size);
    cmd.arg("DELIFEQ").arg(lock).arg(value);
    cmd
}

/// Whether a `COMMAND INFO <one command>` reply describes the command: the server answers a
/// one-element array, whose element is nil for a command it does not know. (Also read for
/// `WAITAOF`, `transport/durable.rs`.)
pub(crate) fn has_command(reply: &Value) -> bool {
    match reply {
        Value::Array(items) => items
            .first()
            .is_some_and(|item| !matches!(item, Value::Nil)),
        Value::Map(entries) => !entries.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_info_says_whether_the_command_exists() {
        // Redis 7.0 answers `COMMAND INFO WAITAOF` with [nil]; 7.2 and Valkey describe it.
        assert!(!has_command(&Value::Array(vec![Value::Nil])));
        assert!(!has_command(&Value::Array(vec![])));
        assert!(has_command(&Value::Array(vec![Value::Array(vec![
            Value::BulkString(b"waitaof".to_vec()),
            Value::Int(4),
        ])])));
    }

    #[test]
    fn what_is_known_of_delifeq_follows_the_server_s_answers() {
        let native = NativeRelease::default();
        assert_eq!(native.known(), None);
        // Unknown after a lost connection: asked again.
        let lost = Error::new(ErrorKind::Connection, "gone");
        assert!(native.learn(Err(lost)).is_err());
        assert_eq!(native.known(), None);
        let described = Value::Array(vec![Value::Array(vec![Value::BulkString(
            b"delifeq".to_vec(),
        )])]);
        assert!(native.learn(Ok(described)).unwrap());
        assert_eq!(native.known(), Some(true));
        // 1 released; 0 and another type fall back and keep the command.
        assert!(native.answered(Ok(Value::Int(1)), "n").unwrap());
        assert!(!native.answered(Ok(Value::Int(0)), "n").unwrap());
        let wrong = Error::new(ErrorKind::WrongType, "WRONGTYPE");
        assert!(!native.answered(Err(wrong), "n").unwrap());
        assert_eq!(native.known(), Some(true));
        // A refusal of the command itself: not sent again.
        let denied = Error::new(ErrorKind::Permission, "NOPERM");
        assert!(!native.answered(Err(denied), "n").unwrap());
        assert_eq!(native.known(), Some(false));
        // A server without it: [nil].
        let other = NativeRelease::default();
        assert!(!other.learn(Ok(Value::Array(vec![Value::Nil]))).unwrap());
        assert_eq!(other.known(), Some(false));
        // `COMMAND` refused (an ACL, an allow-list): not available, and not asked again.
        let refused = NativeRelease::default();
        let denied = Error::new(ErrorKind::Permission, "NOPERM");
        assert!(!refused.learn(Err(denied)).unwrap());
        assert_eq!(refused.known(), Some(false));
    }
}
