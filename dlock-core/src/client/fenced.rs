//! Fence-checked writes ([`Client::fenced_set`], [`Client::fenced_hset`]): a value written only
//! if no writer with a larger fencing token wrote it before (`scripts/fenced.lua`).
//!
//! A guarded write ([`crate::GuardedWrite`]) checks the hold itself, so it reaches only the
//! lock's own cluster slot and only while the hold lasts. Data elsewhere — another slot, or
//! written by a holder that may be paused past its lease — is protected by the fence instead:
//! each write carries the holder's token, the store keeps the largest it has seen next to the
//! data, and a writer whose token is smaller than that wrote too late and is refused. The
//! fence lives in a key of its own beside the data, in the data's cluster slot
//! ([`fence_key`]), so the data stays a plain string or hash for every reader. The fence is
//! read only in the form dlock writes it (a decimal `u64` without sign or leading zeros):
//! anything else there was written by another program and is refused by name (`WrongType`),
//! never read as a number.

use std::fmt;

use redis::{ToRedisArgs, Value};

use crate::client::Client;
use crate::error::{Error, ErrorKind, Result};
use crate::holds::guarded::MAX_ARGS;
use crate::key::hashed_part;
use crate::scripts::{self, Call, unexpected};
use crate::token::FencingToken;

/// What a fence-checked write found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fenced {
    /// Written, and the token stored as the data's fence. The same token may write again (a
    /// holder that writes twice, or a retry).
    Written,
    /// A writer with a larger token wrote before: nothing was written. The writer's lease ran
    /// out and another holder has taken over; it must stop.
    Stale {
        /// The token of the last write.
        stored: FencingToken,
    },
}

impl Fenced {
    /// Whether the value was written.
    pub fn is_written(self) -> bool {
        self == Self::Written
    }
}

impl fmt::Display for Fenced {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Written => f.write_str("written"),
            Self::Stale { stored } => write!(f, "stale: fence {stored} wrote it before"),
        }
    }
}

/// The key that keeps the fence of the data at `key`, in the same cluster slot:
/// `<key>:fence` when `key` has a hash tag (`order:{42}` → `order:{42}:fence`), `{<key>}:fence`
/// when it has none and no braces (`balance` → `{balance}:fence`).
///
/// # Errors
/// [`ErrorKind::InvalidInput`] for a key with braces but no hash tag (`a{}b`, `a}b`): no
/// other key is sure to share its slot. Give it a tag, such as `a:{b}`.
pub fn fence_key(key: &str) -> Result<String> {
    if hashed_part(key.as_bytes()) != key.as_bytes() {
        Ok(format!("{key}:fence"))
    } else if key.contains(['{', '}']) {
        Err(Error::invalid(format!(
            "fenced write: the key `{key}` has braces but no hash tag, so no fence key is sure \
             to share its cluster slot; give it a tag such as `data:{{{}}}`",
            key.replace(['{', '}'], "")
        )))
    } else {
        Ok(format!("{{{key}}}:fence"))
    }
}

impl Client {
    /// Sets the string `key` to `value` if no writer with a larger fencing token wrote it
    /// before, and stores `fence` as its fence ([`fence_key`]), in one atomic step.
    ///
    /// For data that a lock holder writes outside the lock's slot, or on another store of the
    /// same Redis: a holder paused past its lease, whose successor has written, is refused
    /// instead of overwriting the newer value. Readers read `key` as a plain string. `SET`
    /// clears the key's expiry, as a plain `SET` does.
    ///
    /// ```no_run
    /// # async fn demo(client: dlock_core::Client) -> Result<(), dlock_core::Error> {
    /// let guard = client.mutex("report:daily")?.acquire().await?;
    /// let fence = guard.fencing_token().await?;
    /// if !client.fenced_set("report:daily:latest", fence, "v42").await?.is_written() {
    ///     // Another holder wrote after us: our lease ran out. Stop.
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// * [`ErrorKind::InvalidInput`]: a key with braces but no hash tag ([`fence_key`]).
    /// * [`ErrorKind::Redis`]: `key` holds another type than a string; nothing written.
    /// * [`ErrorKind::WrongType`]: the fence key holds something dlock did not write —
    ///   another type, or a string that is not a fence as dlock writes it (a decimal `u64`
    ///   without sign or leading zeros: another program's `"0005"` or a number above
    ///   `u64::MAX` is not one); the message names the key. Nothing is written.
    /// * Connection errors and [`ErrorKind::Timeout`]: the write may have taken effect; it is
    ///   safe to send again with the same token and value.
    ///
    /// # Cancel safety
    /// The write either ran or did not; sending it again is safe.
    pub async fn fenced_set(
        &self,
        key: &str,
        fence: FencingToken,
        value: impl ToRedisArgs,
    ) -> Result<Fenced> {
        let mut call = fenced_call(key, fence, "set")?;
        call.arg(value);
        self.run_fenced(key, &call).await
    }

    /// Sets `fields` of the hash `key` if no writer with a larger fencing token wrote it
    /// before, and stores `fence` as the hash's fence ([`fence_key`]; one per key, for the
    /// whole record), in one atomic step. See [`Client::fenced_set`]; the other fields are
    /// kept.
    ///
    /// # Errors
    /// As [`Client::fenced_set`]; [`ErrorKind::InvalidInput`] for no fields.
    ///
    /// # Cancel safety
    /// The write either ran or did not; sending it again is safe.
    pub async fn fenced_hset<F: ToRedisArgs, V: ToRedisArgs>(
        &self,
        key: &str,
        fence: FencingToken,
        fields: &[(F, V)],
    ) -> Result<Fenced> {
        if fields.is_empty() {
            return Err(Error::invalid(format!(
                "fenced_hset of `{key}`: no fields to set"
            )));
        }
        if fields.len() * 2 > MAX_ARGS {
            return Err(Error::invalid(format!(
                "fenced_hset of `{key}`: {} fields, more than the {} one write may carry; \
                 split them over several writes with the same token",
                fields.len(),
                MAX_ARGS / 2
            )));
        }
        let mut call = fenced_call(key, fence, "hset")?;
        for (field, value) in fields {
            call.arg(field).arg(value);
        }
        self.run_fenced(key, &call).await
    }

    async fn run_fenced(&self, key: &str, call: &Call) -> Result<Fenced> {
        let reply = self.ctx.transport.run(call, "fenced write", key).await?;
        decode(key, &reply)
    }
}

/// The call of `fenced.lua` for `key`, up to its values.
fn fenced_call(key: &str, fence: FencingToken, op: &str) -> Result<Call> {
    let fence_key = fence_key(key)?;
    let mut call = Call::new(&scripts::FENCED, 2);
    call.arg(key).arg(fence_key).arg(fence.get()).arg(op);
    Ok(call)
}

fn decode(key: &str, reply: &Value) -> Result<Fenced> {
    let Value::Array(items) = reply else {
        return Err(unexpected("fenced write", reply));
    };
    match items.as_slice() {
        [Value::Int(1)] => Ok(Fenced::Written),
        [Value::Int(0), stored] => scripts::text(stored)
            .and_then(|s| s.parse().ok())
            .map(|stored| Fenced::Stale {
                stored: FencingToken::new(stored),
            })
            .ok_or_else(|| unexpected("fenced write", reply)),
        [Value::Int(-1), kind] => Err(Error::new(
            ErrorKind::Redis,
            format!(
                "fenced write: the key `{key}` holds a {}, which this write cannot change; \
                 nothing was written",
                scripts::text(kind).unwrap_or_default()
            ),
        )),
        _ => Err(unexpected("fenced write", reply)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::key_slot;

    #[test]
    fn the_fence_key_shares_the_datas_slot() {
        for key in ["balance", "order:{42}", "a{b}c", "x:{y}:{z}", "with spaces"] {
            let fence = fence_key(key).unwrap();
            assert_eq!(
                key_slot(fence.as_bytes()),
                key_slot(key.as_bytes()),
                "{key}"
            );
            assert_ne!(fence, key);
        }
        assert_eq!(fence_key("order:{42}").unwrap(), "order:{42}:fence");
        assert_eq!(fence_key("balance").unwrap(), "{balance}:fence");
        for key in ["a{}b", "a}b", "a{b"] {
            let err = fence_key(key).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{key}");
            assert!(err.to_string().contains("hash tag"), "{err}");
        }
    }

    #[test]
    fn replies_decode_into_outcomes() {
        assert_eq!(
            decode("k", &Value::Array(vec![Value::Int(1)])).unwrap(),
            Fenced::Written
        );
        let stale = Value::Array(vec![
            Value::Int(0),
            Value::BulkString(b"18446744073709551615".to_vec()),
        ]);
        assert_eq!(
            decode("k", &stale).unwrap(),
            Fenced::Stale {
                stored: FencingToken::new(u64::MAX)
            }
        );
        let wrong = Value::Array(vec![Value::Int(-1), Value::SimpleString("list".into())]);
        let err = decode("k", &wrong).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Redis);
        assert!(err.to_string().contains("holds a list"), "{err}");
        assert!(decode("k", &Value::Int(3)).is_err());
    }
}
