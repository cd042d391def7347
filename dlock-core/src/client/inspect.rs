//! Introspection for operators: who holds a lock ([`Client::inspect`],
//! [`Client::inspect_semaphore`], [`Client::inspect_rw_lock`]), every lock held now
//! ([`Client::held_locks`], a `SCAN` of every master), and how to open a mutex by force
//! ([`Client::force_unlock`]).

use std::collections::BTreeSet;
use std::time::Duration;

use redis::Value;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};

use crate::client::Client;
use crate::error::{Error, ErrorKind, Result};
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
    /// script issued one (see `fence.lua`).
    fn parse(value: &str, remaining: Duration, waiters: usize) -> Option<Self> {
        let holder = parse_lock_value(value).filter(|h| h.version <= wire::READ_VERSION)?;
        Some(Self {
            host: holder.host.to_owned(),
            pid: holder.pid,
            label: Some(holder.label)
                .filter(|l| !l.is_empty())
                .map(str::to_owned),
            fencing_token: holder.fence.map(FencingToken::new),
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

/// Who holds a semaphore and how many wait for it ([`Client::inspect_semaphore`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SemaphoreInfo {
    /// The limit in force for every grant: the one set with `Semaphore::set_limit`, else the
    /// one a handle stored. 0 when Redis keeps none, which happens only while nobody holds or
    /// waits and no limit was set (the next request stores its handle's).
    pub limit: u32,
    /// The holders whose lease has not ended, by lease end (empty while requests are queued
    /// and nobody holds: the next grant is on its way).
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
    /// Who holds the semaphore `name` right now and how many requests wait for it, or `None`
    /// when nobody holds or waits.
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
            limit: limit.map_or(0, |l| u32::try_from(l).unwrap_or(u32::MAX)),
            holders: holders.into_iter().map(|(_, h)| h).collect(),
            waiters,
        }))
    }

    /// Who holds the read-write lock `name` right now and how many requests wait for it, or
    /// `None` when nobody holds or waits.
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
            if Some(weight) == limit {
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

    /// The stored limit, the live holders (with their weights) and the queue's length of the
    /// shared lock `name` of `kind`; `None` when nobody holds it or waits for it.
    async fn inspect_shared(
        &self,
        kind: LockKind,
        name: &str,
    ) -> Result<Option<(Option<u64>, Vec<(u64, SharedHolder)>, usize)>> {
        validate_name(name)?;
        let keys = LockKeys::of_kind(kind, &self.ctx.config.key_prefix, name);
        let mut call = Call::new(&scripts::SHARED_INSPECT, 1);
        call.arg(&*keys.lock);
        let reply = self.ctx.transport.run(&call, "inspect", name).await?;
        let decoded =
            SharedInspectReply::decode(&reply).ok_or_else(|| unexpected("inspect", &reply))?;
        if decoded.holders.is_empty() && decoded.waiters == 0 {
            return Ok(None);
        }
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
        Ok(Some((decoded.limit, holders, decoded.waiters)))
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
        let (value, remaining, waiters) = match InspectReply::decode(&reply) {
            Some(InspectReply::Free) => return Ok(None),
            Some(InspectReply::Held {
                value,
                remaining,
                waiters,
            }) => (value, remaining, waiters),
            None => return Err(unexpected("inspect", &reply)),
        };
        let value = String::from_utf8_lossy(&value);
        if let Some(info) = HolderInfo::parse(&value, remaining, waiters) {
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

/// A lock found held by [`Client::held_locks`], with who holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HeldLock {
    /// A mutex ([`Client::mutex`]; also a scheduler job's run lock `sched:<job>` and an
    /// election's `election:<name>`).
    Mutex {
        /// The lock's name.
        name: String,
        /// Its holder.
        holder: HolderInfo,
    },
    /// A semaphore ([`Client::semaphore`]).
    Semaphore {
        /// The semaphore's name.
        name: String,
        /// Its holders.
        info: SemaphoreInfo,
    },
    /// A read-write lock ([`Client::rw_lock`]).
    RwLock {
        /// The lock's name.
        name: String,
        /// Its writer or readers.
        info: RwLockInfo,
    },
}

impl HeldLock {
    /// The lock's name.
    pub fn name(&self) -> &str {
        match self {
            Self::Mutex { name, .. } | Self::Semaphore { name, .. } | Self::RwLock { name, .. } => {
                name
            }
        }
    }
}

/// What [`Client::held_locks`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HeldLocks {
    /// The locks held, by name (a mutex, a semaphore and a read-write lock of one name are
    /// three locks).
    pub locks: Vec<HeldLock>,
    /// Keys shaped like a lock key under the prefix that hold data dlock did not write (another
    /// program uses the prefix): left out of `locks`, and untouched.
    pub foreign: Vec<String>,
}

/// How many keys one `SCAN` call looks at.
const SCAN_COUNT: usize = 1000;
/// How many locks are inspected at once.
const INSPECT_BATCH: usize = 32;

/// The kind and name of the lock whose key is `key` under `prefix`, or `None` for every other
/// key: the queues, expiry sets, wake channels and leader records of locks, the fence counters,
/// the scheduler's bookkeeping, and keys that are not dlock's.
fn lock_key_name<'k>(prefix: &str, key: &'k str) -> Option<(LockKind, &'k str)> {
    let tagged = key.strip_prefix(prefix)?.strip_prefix('{')?;
    let (name, suffix) = tagged.split_once('}')?;
    let kind = match suffix {
        "" => LockKind::Mutex,
        ":sem" => LockKind::Semaphore,
        ":rw" => LockKind::RwLock,
        _ => return None,
    };
    validate_name(name).ok()?;
    Some((kind, name))
}

/// `s` with the characters that mean something in a `SCAN MATCH` pattern escaped.
fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

impl Client {
    /// Every lock held now whose name matches `pattern` (a Redis glob: `*`, `?`, `[abc]`, `\`
    /// to escape; `None` for all), found with `SCAN` (never `KEYS`: the server keeps serving
    /// between calls) on the server, or on every master of a cluster, then inspected one by
    /// one. Only lock keys are listed, not their queues, the fence counters, the scheduler's
    /// bookkeeping or keys of other programs; a key shaped like a lock key that dlock did not
    /// write is reported in [`HeldLocks::foreign`].
    ///
    /// A `SCAN` sees every key that exists for its whole duration; a lock taken or released
    /// meanwhile may or may not be listed, and what each lock shows is read a moment later.
    ///
    /// ```no_run
    /// # async fn demo(client: dlock_core::Client) -> Result<(), dlock_core::Error> {
    /// for lock in client.held_locks(Some("order:*")).await?.locks {
    ///     println!("{} is held", lock.name());
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidInput`] for a pattern with braces or control characters;
    /// [`crate::ErrorKind::Connection`] or [`crate::ErrorKind::Timeout`] when Redis (a master of
    /// the cluster) does not answer within the command timeout, each call bounded by it.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn held_locks(&self, pattern: Option<&str>) -> Result<HeldLocks> {
        let pattern = pattern.unwrap_or("*");
        if validate_name(pattern).is_err() {
            return Err(Error::invalid(format!(
                "the lock name pattern {pattern:?} is empty, too long, or has braces or control \
                 characters (no lock name has); write a Redis glob such as \"order:*\""
            )));
        }
        let prefix = &self.ctx.config.key_prefix;
        let matching = format!("{}{{{pattern}}}*", glob_escape(prefix));
        let keys = self.scan_keys(&matching).await?;
        let found: Vec<_> = keys
            .iter()
            .filter_map(|key| lock_key_name(prefix, key))
            .collect();
        let mut listed = HeldLocks::default();
        for batch in found.chunks(INSPECT_BATCH) {
            let inspected =
                futures_util::future::join_all(batch.iter().map(|(kind, name)| async move {
                    (*kind, *name, self.held(*kind, name).await)
                }))
                .await;
            for (kind, name, held) in inspected {
                match held {
                    Ok(Some(lock)) => listed.locks.push(lock),
                    Ok(None) => {}
                    Err(e) if e.kind() == ErrorKind::WrongType => listed
                        .foreign
                        .push(LockKeys::of_kind(kind, prefix, name).lock.to_string()),
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(listed)
    }

    /// The lock of `kind` named `name`, if held.
    async fn held(&self, kind: LockKind, name: &str) -> Result<Option<HeldLock>> {
        let name_owned = || name.to_owned();
        Ok(match kind {
            LockKind::Mutex => self.inspect(name).await?.map(|holder| HeldLock::Mutex {
                name: name_owned(),
                holder,
            }),
            LockKind::Semaphore => {
                self.inspect_semaphore(name)
                    .await?
                    .map(|info| HeldLock::Semaphore {
                        name: name_owned(),
                        info,
                    })
            }
            LockKind::RwLock => self
                .inspect_rw_lock(name)
                .await?
                .map(|info| HeldLock::RwLock {
                    name: name_owned(),
                    info,
                }),
        })
    }

    /// Every key matching `matching` on the server, or on each master of a cluster, in order
    /// and once each (a key that moved between masters during the scan is listed once).
    async fn scan_keys(&self, matching: &str) -> Result<BTreeSet<String>> {
        let (conn, _) = self.ctx.transport.conn()?;
        let mut keys = BTreeSet::new();
        let Some(cluster) = conn.cluster() else {
            self.scan_node(matching, None, &mut keys).await?;
            return Ok(keys);
        };
        let shards: Value = self
            .ctx
            .transport
            .query(
                redis::cmd("CLUSTER").arg("SHARDS"),
                "list the held locks (CLUSTER SHARDS)",
            )
            .await?;
        for slot in first_slots(&shards)? {
            self.scan_node(matching, Some((cluster, slot)), &mut keys)
                .await?;
        }
        Ok(keys)
    }

    /// Adds to `keys` every key matching `matching` on one node: the server, or (`on`) the
    /// cluster master that serves the given slot. A whole `SCAN`, page by page.
    async fn scan_node(
        &self,
        matching: &str,
        on: Option<(&ClusterConnection, u16)>,
        keys: &mut BTreeSet<String>,
    ) -> Result<()> {
        let transport = &self.ctx.transport;
        let mut cursor = 0u64;
        loop {
            let mut cmd = redis::cmd("SCAN");
            cmd.arg(cursor)
                .arg("MATCH")
                .arg(matching)
                .arg("COUNT")
                .arg(SCAN_COUNT);
            let (next, page): (u64, Vec<Vec<u8>>) = match on {
                None => transport.query(&cmd, "list the held locks (SCAN)").await?,
                Some((cluster, slot)) => {
                    let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(
                        Route::new(slot, SlotAddr::Master),
                    ));
                    let what = "list the held locks (SCAN of a cluster master)";
                    let timeout = transport.command_timeout();
                    let reply =
                        tokio::time::timeout(timeout, cluster.clone().route_command(cmd, route))
                            .await
                            .map_err(|_| Error::timeout(what, timeout))?
                            .map_err(|e| Error::from_redis(what, e))?;
                    redis::from_redis_value(reply)
                        .map_err(|e| Error::protocol(format!("{what}: unexpected reply: {e}")))?
                }
            };
            keys.extend(page.into_iter().filter_map(|k| String::from_utf8(k).ok()));
            if next == 0 {
                return Ok(());
            }
            cursor = next;
        }
    }
}

/// One slot of each shard (master) that serves slots, from a `CLUSTER SHARDS` reply: routing a
/// command to a slot's master reaches that master.
fn first_slots(reply: &Value) -> Result<Vec<u16>> {
    let bad = || Error::protocol(format!("CLUSTER SHARDS: unexpected reply {reply:?}"));
    let Value::Array(shards) = reply else {
        return Err(bad());
    };
    let mut slots = Vec::with_capacity(shards.len());
    for shard in shards {
        let Some(Value::Array(ranges)) = crate::transport::shards::field(shard, "slots") else {
            return Err(bad());
        };
        match ranges.first() {
            Some(Value::Int(start)) => slots.push(u16::try_from(*start).map_err(|_| bad())?),
            Some(_) => return Err(bad()),
            // A master that serves no slot holds no key that a command can reach.
            None => {}
        }
    }
    Ok(slots)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_lock_keys_are_listed() {
        let at = |key| lock_key_name("dlock:", key);
        assert_eq!(at("dlock:{order:42}"), Some((LockKind::Mutex, "order:42")));
        assert_eq!(at("dlock:{jobs}:sem"), Some((LockKind::Semaphore, "jobs")));
        assert_eq!(at("dlock:{prices}:rw"), Some((LockKind::RwLock, "prices")));
        assert_eq!(
            at("dlock:{sched:lottery}"),
            Some((LockKind::Mutex, "sched:lottery"))
        );
        for aux in [
            "dlock:{order:42}:queue",
            "dlock:{order:42}:joined:0123456789abcdef0123456789abcdef",
            "dlock:{jobs}:sem:joined:0123456789abcdef0123456789abcdef",
            "dlock:{jobs}:sem:exp",
            "dlock:{jobs}:sem:queue",
            "dlock:{jobs}:sem:limit",
            "dlock:{prices}:rw:exp",
            "dlock:{leader}:leader",
            "dlock:fence:{a1}",
            "dlock:{sched:lottery}:ledger",
            "dlock:{sched:}:registry",
            "dlock:{}",
            "dlock:plain",
            "other:{order:42}",
            "{order:42}",
        ] {
            assert_eq!(at(aux), None, "{aux}");
        }
        assert_eq!(lock_key_name("", "{x}"), Some((LockKind::Mutex, "x")));
        assert_eq!(glob_escape("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\");
    }

    #[test]
    fn one_slot_per_shard_with_slots() {
        let shard = |ranges: &[i64]| {
            Value::Map(vec![(
                Value::BulkString(b"slots".to_vec()),
                Value::Array(ranges.iter().map(|&n| Value::Int(n)).collect()),
            )])
        };
        let reply = Value::Array(vec![shard(&[5461, 10922]), shard(&[0, 5460]), shard(&[])]);
        assert_eq!(first_slots(&reply).unwrap(), [5461, 0]);
        assert!(first_slots(&Value::Int(1)).is_err());
    }

    #[test]
    fn holder_values_parse() {
        let ms = Duration::from_millis;
        let value =
            "0123456789abcdef0123456789abcdefw1 web-1\x1f4242\x1fpay handler\x1f1700000000000001";
        let info = HolderInfo::parse(value, ms(1500), 2).unwrap();
        assert_eq!(info.host, "web-1");
        assert_eq!(info.pid, 4242);
        assert_eq!(info.label.as_deref(), Some("pay handler"));
        assert_eq!(
            info.fencing_token,
            Some(FencingToken::new(1_700_000_000_000_001))
        );
        assert_eq!(info.remaining, Duration::from_millis(1500));
        assert_eq!(info.waiters, 2);
        let bare = HolderInfo::parse("0123456789abcdef0123456789abcdef- host\x1f7\x1f", ms(10), 0)
            .unwrap();
        assert_eq!(bare.label, None);
        assert_eq!(bare.fencing_token, None);
        // Version 1 without a fence issued yet.
        let unfenced = "0123456789abcdef0123456789abcdef-1 host\x1f7\x1f";
        let info = HolderInfo::parse(unfenced, ms(10), 0).unwrap();
        assert_eq!(info.fencing_token, None);
        // A newer format is not read.
        let newer = "0123456789abcdef0123456789abcdef-2 host\x1f7\x1f";
        assert!(HolderInfo::parse(newer, ms(10), 0).is_none());
        assert!(HolderInfo::parse("garbage", ms(1), 0).is_none());
    }
}
