//! Introspection for operators: who holds a lock ([`Client::inspect`],
//! [`Client::inspect_semaphore`], [`Client::inspect_rw_lock`]) and how to open a mutex by force
//! ([`Client::force_unlock`]).

use std::time::Duration;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::key::{LockKeys, LockKind, validate_name};
use crate::scripts::wire::{self, parse_lock_value};
use crate::scripts::{self, Call, InspectReply, SharedInspectReply, unexpected};
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
    /// The fencing token issued to the hold, when it is kept with the lock: a fence issued by a
    /// hand-off, by a waiting acquire or on demand ([`crate::MutexGuard::fencing_token`]).
    /// `None` while the holder has not asked for one (fences are issued on demand: a holder
    /// that never needs one pays nothing for it), and for a fence taken in the uncontended
    /// acquire's own round trip ([`crate::MutexOptions::fenced`]), which only the holder knows:
    /// writing it beside the lock would cost that acquire a script.
    pub fencing_token: Option<FencingToken>,
    /// What is left of the lease, by the server.
    pub remaining: Duration,
    /// How many acquire calls are queued for the lock.
    pub waiters: usize,
}

impl HolderInfo {
    /// Reads the lock value (see `scripts/wire.rs`), which carries the hold's fence once a
    /// script issued one (see `fence.lua`); a lock of format version 0 kept its fence only in
    /// its per-name counter (`counter`).
    fn parse(
        value: &str,
        counter: Option<u64>,
        remaining: Duration,
        waiters: usize,
    ) -> Option<Self> {
        let holder = parse_lock_value(value).filter(|h| h.version <= wire::VERSION)?;
        let fence = holder
            .fence
            .or(if holder.version == 0 { counter } else { None });
        Some(Self {
            host: holder.host.to_owned(),
            pid: holder.pid,
            label: Some(holder.label)
                .filter(|l| !l.is_empty())
                .map(str::to_owned),
            fencing_token: fence.map(FencingToken::new),
            remaining,
            waiters,
        })
    }
}

/// One holder of a semaphore or a read-write lock, as stored with it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SharedHolder {
    /// Host name of the holder's machine.
    pub host: String,
    /// Process id of the holder.
    pub pid: u32,
    /// The label the holder set ([`crate::MutexOptions::label`]), if any.
    pub label: Option<String>,
    /// How many permits it holds (a semaphore's; 1 for a reader or the writer of a read-write
    /// lock).
    pub permits: u32,
    /// The fencing token issued with its grant.
    pub fencing_token: FencingToken,
    /// What is left of its lease, by the server.
    pub remaining: Duration,
}

/// Who holds a semaphore ([`Client::inspect_semaphore`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SemaphoreInfo {
    /// The limit stored in Redis.
    pub limit: u32,
    /// The holders whose lease has not ended, by lease end.
    pub holders: Vec<SharedHolder>,
    /// How many acquire calls are queued.
    pub waiters: usize,
}

/// Who holds a read-write lock ([`Client::inspect_rw_lock`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RwLockInfo {
    /// The writer, if one holds.
    pub writer: Option<SharedHolder>,
    /// The readers whose lease has not ended, by lease end.
    pub readers: Vec<SharedHolder>,
    /// How many acquire calls are queued (readers and writers).
    pub waiters: usize,
}

/// A holder record `<weight> <fence> <host>\x1f<pid>\x1f<label>` (`scripts/shared.lua`).
fn parse_shared(record: &str, remaining: Duration) -> Option<(u64, SharedHolder)> {
    let mut parts = record.splitn(3, ' ');
    let weight: u64 = parts.next()?.parse().ok()?;
    let fence: u64 = parts.next()?.parse().ok()?;
    let mut meta = parts.next()?.splitn(3, '\x1f');
    let host = meta.next()?.to_owned();
    let pid = meta.next()?.parse().ok()?;
    let label = meta.next().filter(|l| !l.is_empty()).map(str::to_owned);
    let holder = SharedHolder {
        host,
        pid,
        label,
        permits: u32::try_from(weight).unwrap_or(1),
        fencing_token: FencingToken::new(fence),
        remaining,
    };
    Some((weight, holder))
}

impl Client {
    /// Who holds the semaphore `name` right now, or `None` when nobody does.
    ///
    /// # Errors
    /// As [`Client::inspect`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn inspect_semaphore(&self, name: &str) -> Result<Option<SemaphoreInfo>> {
        let Some((limit, holders, waiters)) =
            self.inspect_shared(LockKind::Semaphore, name).await?
        else {
            return Ok(None);
        };
        Ok(Some(SemaphoreInfo {
            limit: u32::try_from(limit).unwrap_or(u32::MAX),
            holders: holders.into_iter().map(|(_, h)| h).collect(),
            waiters,
        }))
    }

    /// Who holds the read-write lock `name` right now, or `None` when nobody does.
    ///
    /// ```no_run
    /// # async fn demo(client: dlock_core::Client) -> Result<(), dlock_core::Error> {
    /// if let Some(info) = client.inspect_rw_lock("prices").await? {
    ///     let readers = info.readers.len();
    ///     println!("writer {:?}, {readers} readers, {} waiting", info.writer, info.waiters);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Client::inspect`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn inspect_rw_lock(&self, name: &str) -> Result<Option<RwLockInfo>> {
        let Some((limit, holders, waiters)) = self.inspect_shared(LockKind::RwLock, name).await?
        else {
            return Ok(None);
        };
        let (mut writer, mut readers) = (None, Vec::new());
        for (weight, mut holder) in holders {
            if weight == limit {
                holder.permits = 1;
                writer = Some(holder);
            } else {
                readers.push(holder);
            }
        }
        Ok(Some(RwLockInfo {
            writer,
            readers,
            waiters,
        }))
    }

    /// The limit, the live holders (with their weights) and the queue's length of the shared
    /// lock `name` of `kind`; `None` when nobody holds it.
    async fn inspect_shared(
        &self,
        kind: LockKind,
        name: &str,
    ) -> Result<Option<(u64, Vec<(u64, SharedHolder)>, usize)>> {
        validate_name(name)?;
        let keys = LockKeys::of_kind(kind, &self.ctx.config.key_prefix, name);
        let mut call = Call::new(&scripts::SHARED_INSPECT, 1);
        call.arg(&*keys.lock);
        let reply = self.ctx.transport.run(&call, "inspect", name).await?;
        let decoded =
            SharedInspectReply::decode(&reply).ok_or_else(|| unexpected("inspect", &reply))?;
        let Some(limit) = decoded.limit.filter(|_| !decoded.holders.is_empty()) else {
            return Ok(None);
        };
        let holders = decoded
            .holders
            .iter()
            .map(|(record, remaining)| {
                parse_shared(record, *remaining).ok_or_else(|| {
                    Error::foreign(
                        &format!("inspect `{name}`"),
                        &keys.lock,
                        &format!("holds the holder record {record:?}, which dlock did not write"),
                    )
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Some((limit, holders, decoded.waiters)))
    }

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
    /// [`crate::ErrorKind::Timeout`] when Redis does not answer; [`crate::ErrorKind::WrongType`]
    /// when the key holds data dlock did not write.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn inspect(&self, name: &str) -> Result<Option<HolderInfo>> {
        validate_name(name)?;
        let keys = LockKeys::new(&self.ctx.config.key_prefix, name);
        let mut call = Call::new(&scripts::INSPECT, 1);
        call.arg(&*keys.lock);
        let reply = self.ctx.transport.run(&call, "inspect", name).await?;
        let (value, counter, remaining, waiters) = match InspectReply::decode(&reply) {
            Some(InspectReply::Free) => return Ok(None),
            Some(InspectReply::Held {
                value,
                counter,
                remaining,
                waiters,
            }) => (value, counter, remaining, waiters),
            None => return Err(unexpected("inspect", &reply)),
        };
        let value = String::from_utf8_lossy(&value);
        if let Some(info) = HolderInfo::parse(&value, counter, remaining, waiters) {
            return Ok(Some(info));
        }
        let context = format!("inspect `{name}`");
        Err(match parse_lock_value(&value) {
            Some(newer) => Error::foreign(
                &context,
                &keys.lock,
                &format!(
                    "holds a lock of a newer dlock (format version {}); upgrade this client",
                    newer.version
                ),
            ),
            None => Error::foreign(
                &context,
                &keys.lock,
                &format!("holds {value:?}, which dlock did not write"),
            ),
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
    /// As [`Client::inspect`]; [`crate::ErrorKind::WrongType`] when the key holds data dlock did
    /// not write (it is left untouched).
    ///
    /// # Cancel safety
    /// Cancel safe: forcing twice is the same as forcing once (or opens the next holder's lock,
    /// as any repeated force would).
    pub async fn force_unlock(&self, name: &str) -> Result<bool> {
        validate_name(name)?;
        let keys = LockKeys::new(&self.ctx.config.key_prefix, name);
        let mut call = Call::new(&scripts::RELEASE, 1);
        call.arg(&*keys.lock)
            .arg("")
            .arg(keys.counter())
            .arg("")
            .arg("force");
        let reply = self.ctx.transport.run(&call, "force_unlock", name).await?;
        let held = self
            .ctx
            .transport
            .release_reply(&reply)
            .ok_or_else(|| unexpected("force_unlock", &reply))?
            .was_held();
        tracing::warn!(lock = %name, held, "dlock: lock forced open");
        Ok(held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holder_values_parse() {
        let ms = Duration::from_millis;
        let value =
            "0123456789abcdef0123456789abcdefw1 web-1\x1f4242\x1fpay handler\x1f1700000000000001";
        let info = HolderInfo::parse(value, Some(1_800_000_000_000_000), ms(1500), 2).unwrap();
        assert_eq!(info.host, "web-1");
        assert_eq!(info.pid, 4242);
        assert_eq!(info.label.as_deref(), Some("pay handler"));
        assert_eq!(
            info.fencing_token,
            Some(FencingToken::new(1_700_000_000_000_001))
        );
        assert_eq!(info.remaining, Duration::from_millis(1500));
        assert_eq!(info.waiters, 2);
        let bare = HolderInfo::parse(
            "0123456789abcdef0123456789abcdef- host\x1f7\x1f",
            None,
            ms(10),
            0,
        )
        .unwrap();
        assert_eq!(bare.label, None);
        assert_eq!(bare.fencing_token, None);
        // Version 1 without a fence issued yet: the counter belongs to an earlier hold.
        let unfenced = "0123456789abcdef0123456789abcdef-1 host\x1f7\x1f";
        let info = HolderInfo::parse(unfenced, Some(5), ms(10), 0).unwrap();
        assert_eq!(info.fencing_token, None);
        // Version 0 kept its fence in the counter.
        let old = "0123456789abcdef0123456789abcdef- host\x1f7\x1f";
        let info = HolderInfo::parse(old, Some(5), ms(10), 0).unwrap();
        assert_eq!(info.fencing_token, Some(FencingToken::new(5)));
        assert!(HolderInfo::parse("garbage", None, ms(1), 0).is_none());
    }
}
