//! Introspection for operators: who holds a lock ([`Client::inspect`]) and how to open it by
//! force ([`Client::force_unlock`]).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::Value;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::key::{LockKeys, validate_name};
use crate::scripts;
use crate::token::FencingToken;

/// Who holds a lock, as stored with it by the acquire script.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HolderInfo {
    /// Host name of the holder's machine.
    pub host: String,
    /// Process id of the holder.
    pub pid: u32,
    /// The label the holder set ([`crate::MutexOptions::label`]), if any.
    pub label: Option<String>,
    /// When the lock was acquired, by the Redis server's clock.
    pub acquired_at: SystemTime,
    /// The fencing token of the holder's acquisition.
    pub fencing_token: FencingToken,
    /// What is left of the lease, by the server.
    pub remaining: Duration,
    /// How many acquire calls are queued for the lock.
    pub waiters: usize,
}

impl HolderInfo {
    /// Parses `<token> <fence> <acquired_ms> <host>\x1f<pid>\x1f<label>`.
    fn parse(value: &str, pttl: i64, waiters: usize) -> Option<Self> {
        let mut fields = value.splitn(4, ' ');
        let _token = fields.next()?;
        let fence = fields.next()?.parse().ok()?;
        let acquired_ms: u64 = fields.next()?.parse().ok()?;
        let mut meta = fields.next()?.splitn(3, '\x1f');
        let host = meta.next()?.to_owned();
        let pid = meta.next()?.parse().ok()?;
        let label = meta.next().filter(|l| !l.is_empty()).map(str::to_owned);
        Some(Self {
            host,
            pid,
            label,
            acquired_at: UNIX_EPOCH + Duration::from_millis(acquired_ms),
            fencing_token: FencingToken::new(fence),
            remaining: Duration::from_millis(u64::try_from(pttl).unwrap_or(0)),
            waiters,
        })
    }
}

impl Client {
    /// Who holds the lock `name` right now, or `None` when it is free.
    ///
    /// ```no_run
    /// # async fn demo(client: dlock_core::Client) -> Result<(), dlock_core::Error> {
    /// if let Some(holder) = client.inspect("nightly-report").await? {
    ///     println!("held by {} pid {} ({:?} left, {} waiting)",
    ///         holder.host, holder.pid, holder.remaining, holder.waiters);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidInput`] for a bad name; [`crate::ErrorKind::Connection`] or
    /// [`crate::ErrorKind::Timeout`] when Redis does not answer; [`crate::ErrorKind::Protocol`]
    /// when the key was not written by dlock.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn inspect(&self, name: &str) -> Result<Option<HolderInfo>> {
        validate_name(name)?;
        let keys = LockKeys::new(&self.shared.config.key_prefix, name);
        let mut invocation = scripts::INSPECT.prepare_invoke();
        invocation.key(&*keys.lock).key(&*keys.queue);
        let reply: Vec<Value> = self.shared.eval(&invocation, "inspect", name).await?;
        let [value, Value::Int(pttl), Value::Int(waiters)] = reply.as_slice() else {
            return Err(Error::protocol(format!(
                "inspect: unexpected reply {reply:?}"
            )));
        };
        let waiters = usize::try_from(*waiters).unwrap_or(0);
        let value = match value {
            Value::Nil | Value::Boolean(false) => return Ok(None),
            Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            other => {
                return Err(Error::protocol(format!(
                    "inspect: unexpected value {other:?}"
                )));
            }
        };
        HolderInfo::parse(&value, *pttl, waiters)
            .map(Some)
            .ok_or_else(|| {
                Error::protocol(format!(
                    "inspect `{name}`: the lock key holds {value:?}, which dlock did not write"
                ))
            })
    }

    /// Opens the lock `name` whoever holds it, for operators (a holder that hangs, a lock left
    /// by a bug). The lock is handed to the oldest waiter, if any, as by a release. The former
    /// holder learns it through its lease: a watchdog guard within one renewal interval, a
    /// fixed lease when it next extends, releases, or reaches its safe-until.
    ///
    /// Returns whether somebody held it.
    ///
    /// # Errors
    /// As [`Client::inspect`].
    ///
    /// # Cancel safety
    /// Cancel safe: forcing twice is the same as forcing once (or opens the next holder's lock,
    /// as any repeated force would).
    pub async fn force_unlock(&self, name: &str) -> Result<bool> {
        validate_name(name)?;
        let keys = LockKeys::new(&self.shared.config.key_prefix, name);
        let mut invocation = scripts::RELEASE.prepare_invoke();
        invocation
            .key(&*keys.lock)
            .key(&*keys.fence)
            .key(&*keys.queue)
            .arg("")
            .arg("")
            .arg(self.shared.conn.publish_command())
            .arg("force");
        let reply: i64 = self.shared.eval(&invocation, "force_unlock", name).await?;
        tracing::warn!(lock = %name, held = reply > 0, "dlock: lock forced open");
        Ok(reply > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holder_values_parse() {
        let value = "0123456789abcdef0123456789abcdef 1700000000000001 1700000000000 web-1\x1f4242\x1fpay handler";
        let info = HolderInfo::parse(value, 1500, 2).unwrap();
        assert_eq!(info.host, "web-1");
        assert_eq!(info.pid, 4242);
        assert_eq!(info.label.as_deref(), Some("pay handler"));
        assert_eq!(info.fencing_token.get(), 1_700_000_000_000_001);
        assert_eq!(info.remaining, Duration::from_millis(1500));
        assert_eq!(info.waiters, 2);
        let bare = HolderInfo::parse("t 1 2 host\x1f7\x1f", 10, 0).unwrap();
        assert_eq!(bare.label, None);
        assert!(HolderInfo::parse("garbage", 1, 0).is_none());
    }
}
