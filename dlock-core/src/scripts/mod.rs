//! The Lua scripts, one file each with its KEYS/ARGV/returns contract on top, hashed once; how a
//! call is built; and one typed reply per script, decoded in one place.
//!
//! A call is an `EVALSHA` command written straight into one [`Cmd`] buffer (keys and arguments
//! included, no intermediate copies); if the server does not know the script (first use, or a
//! Redis restart) it is loaded with `SCRIPT LOAD` and the call is sent once more. On a cluster the
//! load goes to every primary. `common.lua` (the lock-value check and the hand-off to the oldest
//! live waiter) is prepended to the scripts that need it. The formats the scripts read and
//! write, with their versions, are in [`wire`].

// Read only by the conformance test (`__private::conformance`).
#[cfg(feature = "__conformance")]
pub(crate) mod layout;
pub(crate) mod wire;

use std::borrow::Cow;
use std::sync::LazyLock;
use std::time::Duration;

use redis::{Cmd, Script, ToRedisArgs, Value};

use crate::error::Error;

/// Every script dlock runs, named. [`Source::text`] assembles its text (the shared functions
/// prepended), and the statics below are built from that text, so the conformance test
/// (`__private::conformance`) loads exactly what the client runs.
/// `pub` for `__private::conformance` (the `__conformance` feature), the crate's own otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "__conformance"), allow(unreachable_pub))]
pub enum Source {
    /// `acquire.lua` (with `lock_value.lua` and `common.lua`).
    Acquire,
    /// `release.lua` (with `lock_value.lua` and `common.lua` at its marker).
    Release,
    /// `fence.lua` (with `lock_value.lua` and `common.lua`).
    Fence,
    /// `fence_raise.lua`.
    FenceRaise,
    /// `extend.lua`.
    Extend,
    /// `shared_acquire.lua` (with `lock_value.lua`, `common.lua`, `shared.lua` and `admission.lua`).
    SharedAcquire,
    /// `shared_release.lua` (with `lock_value.lua`, `common.lua`, `shared.lua` and `admission.lua`).
    SharedRelease,
    /// `shared_limit.lua` (with `lock_value.lua`, `common.lua`, `shared.lua` and `admission.lua`).
    SharedLimit,
    /// `rw_change.lua` (with `lock_value.lua`, `common.lua`, `shared.lua` and `admission.lua`).
    RwChange,
    /// `shared_inspect.lua`.
    SharedInspect,
    /// `election.lua`.
    Election,
    /// `election_read.lua`.
    ElectionRead,
    /// `inspect.lua`.
    Inspect,
    /// `guarded.lua` (with `lock_value.lua` and `shared.lua`).
    Guarded,
    /// `fenced.lua`.
    Fenced,
    /// `ask.lua` (with `lock_value.lua` and `shared.lua`).
    Ask,
    /// `rate.lua`.
    Rate,
}

#[cfg_attr(not(feature = "__conformance"), allow(unreachable_pub))]
impl Source {
    /// Every script, once.
    pub const ALL: [Self; 17] = [
        Self::Acquire,
        Self::Release,
        Self::Fence,
        Self::FenceRaise,
        Self::Extend,
        Self::SharedAcquire,
        Self::SharedRelease,
        Self::SharedLimit,
        Self::RwChange,
        Self::SharedInspect,
        Self::Election,
        Self::ElectionRead,
        Self::Inspect,
        Self::Guarded,
        Self::Fenced,
        Self::Ask,
        Self::Rate,
    ];

    /// The script's text as it is loaded into Redis.
    pub fn text(self) -> Cow<'static, str> {
        // What each script's text is made of: `lock_value.lua` (reading a mutex's value),
        // `common.lua` (changing a mutex), `shared.lua` (a shared lock's layout and checks),
        // `admission.lua` (its admission). A script carries only what it calls: each function
        // its text defines is made anew on every call.
        const COMMON: &str = concat!(include_str!("lock_value.lua"), include_str!("common.lua"));
        const SHARED: &str = concat!(
            include_str!("lock_value.lua"),
            include_str!("common.lua"),
            include_str!("shared.lua"),
            include_str!("admission.lua")
        );
        const CHECKS: &str = concat!(include_str!("lock_value.lua"), include_str!("shared.lua"));
        let text: &'static str = match self {
            Self::Acquire => concat!(
                include_str!("lock_value.lua"),
                include_str!("common.lua"),
                include_str!("acquire.lua")
            ),
            // `common.lua` goes at the script's `--@common` marker, after its fast path.
            Self::Release => {
                return Cow::Owned(include_str!("release.lua").replacen("--@common\n", COMMON, 1));
            }
            Self::Fence => concat!(
                include_str!("lock_value.lua"),
                include_str!("common.lua"),
                include_str!("fence.lua")
            ),
            Self::FenceRaise => include_str!("fence_raise.lua"),
            Self::Extend => include_str!("extend.lua"),
            Self::SharedAcquire => {
                return Cow::Owned(format!("{SHARED}{}", include_str!("shared_acquire.lua")));
            }
            Self::SharedRelease => {
                return Cow::Owned(format!("{SHARED}{}", include_str!("shared_release.lua")));
            }
            Self::SharedLimit => {
                return Cow::Owned(format!("{SHARED}{}", include_str!("shared_limit.lua")));
            }
            Self::RwChange => {
                return Cow::Owned(format!("{SHARED}{}", include_str!("rw_change.lua")));
            }
            Self::SharedInspect => include_str!("shared_inspect.lua"),
            Self::Election => include_str!("election.lua"),
            Self::ElectionRead => include_str!("election_read.lua"),
            Self::Inspect => include_str!("inspect.lua"),
            Self::Guarded => {
                return Cow::Owned(format!("{CHECKS}{}", include_str!("guarded.lua")));
            }
            Self::Fenced => include_str!("fenced.lua"),
            Self::Ask => {
                return Cow::Owned(format!("{CHECKS}{}", include_str!("ask.lua")));
            }
            Self::Rate => include_str!("rate.lua"),
        };
        Cow::Borrowed(text)
    }

    /// The script as the client runs it (hashed once).
    pub fn script(self) -> &'static Script {
        match self {
            Self::Acquire => &ACQUIRE,
            Self::Release => &RELEASE,
            Self::Fence => &FENCE,
            Self::FenceRaise => &FENCE_RAISE,
            Self::Extend => &EXTEND,
            Self::SharedAcquire => &SHARED_ACQUIRE,
            Self::SharedRelease => &SHARED_RELEASE,
            Self::SharedLimit => &SHARED_LIMIT,
            Self::RwChange => &RW_CHANGE,
            Self::SharedInspect => &SHARED_INSPECT,
            Self::Election => &ELECTION,
            Self::ElectionRead => &ELECTION_READ,
            Self::Inspect => &INSPECT,
            Self::Guarded => &GUARDED,
            Self::Fenced => &FENCED,
            Self::Ask => &ASK,
            Self::Rate => &RATE,
        }
    }
}

/// A script built from its [`Source`].
fn built(source: Source) -> Script {
    Script::new(&source.text())
}

/// Takes a free mutex, or reports its remaining lease and queues the caller.
pub(crate) static ACQUIRE: LazyLock<Script> = LazyLock::new(|| built(Source::Acquire));

/// Owner-checked release that hands the lock to the oldest live waiter. `common.lua` goes at
/// the script's `--@common` marker, after its fast path (see the script).
pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| built(Source::Release));

/// Issues (or returns) the fencing token of the caller's hold (`next_fence` of `common.lua`).
pub(crate) static FENCE: LazyLock<Script> = LazyLock::new(|| built(Source::Fence));

/// Raises a slot's fence counter to a quorum lock's fence, owner-checked (round 2, `kinds/quorum.rs`).
pub(crate) static FENCE_RAISE: LazyLock<Script> = LazyLock::new(|| built(Source::FenceRaise));

/// Owner-checked lease extension of one or many locks (the watchdog's batches).
pub(crate) static EXTEND: LazyLock<Script> = LazyLock::new(|| built(Source::Extend));

/// Takes permits of a shared lock (a semaphore), or queues the caller (`shared.lua`).
pub(crate) static SHARED_ACQUIRE: LazyLock<Script> = LazyLock::new(|| built(Source::SharedAcquire));

/// Gives back one holder's permits of a shared lock and admits the waiters that now fit.
pub(crate) static SHARED_RELEASE: LazyLock<Script> = LazyLock::new(|| built(Source::SharedRelease));

/// Sets a shared lock's limit and admits the waiters that fit under it.
pub(crate) static SHARED_LIMIT: LazyLock<Script> = LazyLock::new(|| built(Source::SharedLimit));

/// Downgrades a read-write lock's writer to a reader, or upgrades its sole reader to the writer.
pub(crate) static RW_CHANGE: LazyLock<Script> = LazyLock::new(|| built(Source::RwChange));

/// Reads the holders of a shared lock, for operators.
pub(crate) static SHARED_INSPECT: LazyLock<Script> = LazyLock::new(|| built(Source::SharedInspect));

/// Owner-checked writes of an election's leader record and its notices (`kinds/election.rs`).
pub(crate) static ELECTION: LazyLock<Script> = LazyLock::new(|| built(Source::Election));

/// Reads an election's leader record, checked against its lock.
pub(crate) static ELECTION_READ: LazyLock<Script> = LazyLock::new(|| built(Source::ElectionRead));

/// Reads the holder, fence and queue length of a lock.
pub(crate) static INSPECT: LazyLock<Script> = LazyLock::new(|| built(Source::Inspect));

/// A batch of writes run only while the caller's hold is its own (`holds/guarded.rs`).
pub(crate) static GUARDED: LazyLock<Script> = LazyLock::new(|| built(Source::Guarded));

/// A write refused when a larger fencing token wrote before (`client/fenced.rs`).
pub(crate) static FENCED: LazyLock<Script> = LazyLock::new(|| built(Source::Fenced));

/// Asks the holders of a lock to give it back (`Client::request_release`); changes no hold.
pub(crate) static ASK: LazyLock<Script> = LazyLock::new(|| built(Source::Ask));

/// One decision of a rate limiter (GCRA on the server's clock, `kinds/rate_limiter.rs`).
pub(crate) static RATE: LazyLock<Script> = LazyLock::new(|| built(Source::Rate));

/// One script call: `EVALSHA <sha> <numkeys> <keys…> <args…>`.
pub(crate) struct Call {
    pub(crate) script: &'static Script,
    pub(crate) cmd: Cmd,
}

impl Call {
    /// Starts a call of `script` with `keys` keys; add exactly that many keys first, then the
    /// arguments, with [`Call::arg`].
    pub(crate) fn new(script: &'static LazyLock<Script>, keys: usize) -> Self {
        let script: &'static Script = script;
        let mut cmd = Cmd::with_capacity(12, 256);
        cmd.arg("EVALSHA").arg(script.get_hash()).arg(keys);
        Self { script, cmd }
    }

    /// Appends a key or an argument.
    pub(crate) fn arg(&mut self, arg: impl ToRedisArgs) -> &mut Self {
        self.cmd.arg(arg);
        self
    }
}

/// The error for a script reply dlock does not understand.
pub(crate) fn unexpected(op: &str, reply: &Value) -> Error {
    Error::protocol(format!(
        "{op}: unexpected script reply {reply:?}; is the server Redis 7.0 or newer and the key \
         written only by dlock?"
    ))
}

/// Whether `err` says the server does not know the script.
pub(crate) fn is_noscript(err: &redis::RedisError) -> bool {
    err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
}

/// What `acquire.lua` answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AcquireReply {
    /// The caller took the lock now, with the full lease.
    Taken { fence: u64 },
    /// The lock is the caller's already (a retry, or a hand-off that reached it while it
    /// waited), with `pttl` left, and its fence when one was issued to the hold.
    Owned { fence: Option<u64>, pttl: Duration },
    /// Another owner holds it for `pttl` more; `server_ms` is the server's clock when it said so.
    Held { pttl: Duration, server_ms: i64 },
}

impl AcquireReply {
    pub(crate) fn decode(reply: &Value) -> Option<Self> {
        if let Value::Int(fence) = reply {
            return Some(Self::Taken {
                fence: u64::try_from(*fence).ok()?,
            });
        }
        match ints::<3>(reply)? {
            [1, fence, pttl] => Some(Self::Owned {
                fence: u64::try_from(fence).ok().filter(|f| *f > 0),
                pttl: millis(pttl)?,
            }),
            [0, pttl, server_ms] => Some(Self::Held {
                pttl: millis(pttl)?,
                server_ms,
            }),
            _ => None,
        }
    }
}

/// What `shared_acquire.lua` answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SharedReply {
    /// The caller holds its permits (now, or already), with `pttl` of lease left.
    Held { fence: u64, pttl: Duration },
    /// Not now: the nearest holder's lease ends in `wait`; `server_ms` is the server's clock.
    Wait { wait: Duration, server_ms: i64 },
}

impl SharedReply {
    pub(crate) fn decode(reply: &Value) -> Option<Self> {
        match ints::<3>(reply)? {
            [1, fence, pttl] => Some(Self::Held {
                fence: u64::try_from(fence).ok().filter(|f| *f > 0)?,
                pttl: millis(pttl.max(0))?,
            }),
            [0, wait, server_ms] => Some(Self::Wait {
                wait: millis(wait.max(0))?,
                server_ms,
            }),
            _ => None,
        }
    }
}

/// What `rw_change.lua` answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RwChangeReply {
    /// The hold is the new token's, in the new mode, with `pttl` of lease left.
    Changed { fence: u64, pttl: Duration },
    /// The old token held nothing any more (its lease ended, or a forced unlock).
    Gone,
    /// An upgrade was refused: `used` is the weight held by everyone, `waiting` the queue's
    /// length.
    Refused { used: u64, waiting: u64 },
}

impl RwChangeReply {
    pub(crate) fn decode(reply: &Value) -> Option<Self> {
        match ints::<3>(reply)? {
            [1, fence, pttl] => Some(Self::Changed {
                fence: u64::try_from(fence).ok().filter(|f| *f > 0)?,
                pttl: millis(pttl.max(0))?,
            }),
            [0, 0, 0] => Some(Self::Gone),
            [-1, used, waiting] => Some(Self::Refused {
                used: u64::try_from(used).ok()?,
                waiting: u64::try_from(waiting).ok()?,
            }),
            _ => None,
        }
    }
}

/// What the uncontended acquire (`SET <lock> <value> NX PX <ttl> GET`) answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum FastReply {
    /// The lock was free and is the caller's now. Nobody waited for it: while callers wait, the
    /// lock key is kept (a version-2 value, see `lock_value.lua`), so the `SET` fails.
    Taken,
    /// The lock holds this value: another holder's (or one kept past its deadline for the
    /// queue), the caller's own (a retry), or data dlock did not write.
    Held(Vec<u8>),
}

impl FastReply {
    /// Reads the `SET`'s reply.
    pub(crate) fn decode(reply: &Value) -> Option<Self> {
        match reply {
            Value::Nil => Some(Self::Taken),
            Value::BulkString(value) => Some(Self::Held(value.clone())),
            _ => None,
        }
    }
}

/// What `fence.lua` answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FenceReply {
    /// The hold's fencing token.
    Fence(u64),
    /// Nobody holds the lock.
    Gone,
    /// Another owner holds it.
    Other,
}

impl FenceReply {
    pub(crate) fn decode(reply: &Value) -> Option<Self> {
        match int(reply)? {
            0 => Some(Self::Gone),
            -1 => Some(Self::Other),
            fence => u64::try_from(fence).ok().map(Self::Fence),
        }
    }

    /// The fencing token, if one was issued.
    pub(crate) fn fence(self) -> Option<u64> {
        match self {
            Self::Fence(fence) => Some(fence),
            Self::Gone | Self::Other => None,
        }
    }
}

/// What `fence_raise.lua` answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RaiseReply {
    /// The counter is at least the quorum fence now.
    Raised,
    /// Nobody holds the lock on this node.
    Gone,
    /// Another owner holds it on this node.
    Other,
    /// The node's data is younger than one TTL (restarted empty, or new): it does not count
    /// for this long yet.
    KeptOut(Duration),
}

impl RaiseReply {
    pub(crate) fn decode(reply: &Value) -> Option<Self> {
        if let Value::Array(items) = reply {
            return match items.as_slice() {
                [code, left] if int(code)? == 2 => Some(Self::KeptOut(Duration::from_millis(
                    u64::try_from(int(left)?).ok()?,
                ))),
                _ => None,
            };
        }
        match int(reply)? {
            1 => Some(Self::Raised),
            0 => Some(Self::Gone),
            -1 => Some(Self::Other),
            _ => None,
        }
    }
}

/// What `inspect.lua` answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum InspectReply {
    /// Nobody holds the lock.
    Free,
    /// The lock's value as stored (read it with [`wire::parse_lock_value`]), and what lies
    /// beside it.
    Held {
        value: Vec<u8>,
        /// What is left of the lease, by the server's clock.
        remaining: Duration,
        /// How many acquire calls are queued for the lock.
        waiters: usize,
    },
}

impl InspectReply {
    pub(crate) fn decode(reply: &Value) -> Option<Self> {
        let Value::Array(items) = reply else {
            return None;
        };
        let [value, pttl, waiters] = items.as_slice() else {
            return None;
        };
        let value = match value {
            // Lua's `false`: a nil bulk string in RESP2, a boolean in RESP3.
            Value::Nil | Value::Boolean(false) => return Some(Self::Free),
            Value::BulkString(bytes) => bytes.clone(),
            _ => return None,
        };
        Some(Self::Held {
            value,
            // -1 (a key without expiry) is no lease left to report.
            remaining: millis(int(pttl)?).unwrap_or(Duration::ZERO),
            waiters: usize::try_from(int(waiters)?).ok()?,
        })
    }
}

/// What `shared_inspect.lua` answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SharedInspectReply {
    /// The stored limit; `None` when Redis keeps none (nobody holds).
    pub(crate) limit: Option<u64>,
    pub(crate) waiters: usize,
    /// Each live holder's record (`<weight> <fence> <meta>`) and lease left.
    pub(crate) holders: Vec<(String, Duration)>,
}

impl SharedInspectReply {
    pub(crate) fn decode(reply: &Value) -> Option<Self> {
        let Value::Array(items) = reply else {
            return None;
        };
        let (head, holders) = items.split_at_checked(3)?;
        let limit = match &head[0] {
            Value::Nil | Value::Boolean(false) => None,
            other => Some(u64::try_from(int(other)?).ok()?),
        };
        let now = int(&head[1])?;
        let waiters = usize::try_from(int(&head[2])?).ok()?;
        let holders = holders
            .chunks(3)
            .map(|h| match h {
                [_token, Value::BulkString(held), deadline] => Some((
                    String::from_utf8(held.clone()).ok()?,
                    millis(int(deadline)?.saturating_sub(now).max(0))?,
                )),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Self {
            limit,
            waiters,
            holders,
        })
    }
}

/// What `election.lua` answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ElectionReply {
    /// The record was written (or deleted) and the notice published.
    Changed,
    /// Nothing to change: the record was ours already (its expiry refreshed), or, resigning,
    /// it was not ours.
    Unchanged,
    /// The caller does not lead (its lease was lost): nothing was written.
    NotLeader,
}

impl ElectionReply {
    pub(crate) fn decode(reply: &Value) -> Option<Self> {
        match int(reply)? {
            1 => Some(Self::Changed),
            0 => Some(Self::Unchanged),
            -1 => Some(Self::NotLeader),
            _ => None,
        }
    }
}

/// What `election_read.lua` answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LeaderRead {
    /// The slot's fence counter at the read: every fence issued before it is at most this.
    pub(crate) counter: u64,
    /// The fence kept in the election's lock value at the read (0: free, or none issued).
    pub(crate) lock_fence: u64,
    /// The current holder's record (its fence and value), when it has published one.
    pub(crate) leader: Option<(u64, String)>,
    /// What is left of the lock's lease (`None`: free, or without expiry): the current
    /// leader's candidates renew it before it ends, or it ends.
    pub(crate) lease_left: Option<Duration>,
}

impl LeaderRead {
    pub(crate) fn decode(reply: &Value) -> Option<Self> {
        let Value::Array(items) = reply else {
            return None;
        };
        let [counter, lock_fence, leader_fence, value, lease] = items.as_slice() else {
            return None;
        };
        let value = match value {
            Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            Value::SimpleString(s) => s.clone(),
            _ => return None,
        };
        let leader_fence = u64::try_from(int(leader_fence)?).ok()?;
        Some(Self {
            counter: u64::try_from(int(counter)?).ok()?,
            lock_fence: u64::try_from(int(lock_fence)?).ok()?,
            leader: (leader_fence > 0).then_some((leader_fence, value)),
            lease_left: u64::try_from(int(lease)?).ok().map(Duration::from_millis),
        })
    }
}

/// What `release.lua` answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ReleaseReply {
    /// Released; nobody waits.
    Released,
    /// Released and handed to the next waiter; the grant message it was sent.
    HandedOff { grant: Vec<u8> },
    /// Nobody holds the lock: the caller's lease had expired.
    Expired,
    /// Another owner holds the lock.
    TakenOver,
}

impl ReleaseReply {
    pub(crate) fn decode(reply: &Value) -> Option<Self> {
        match reply {
            Value::Array(items) => match items.as_slice() {
                [Value::Int(2), Value::BulkString(grant)] => Some(Self::HandedOff {
                    grant: grant.clone(),
                }),
                _ => None,
            },
            other => match int(other)? {
                1 => Some(Self::Released),
                0 => Some(Self::Expired),
                -1 => Some(Self::TakenOver),
                _ => None,
            },
        }
    }

    /// Whether the caller still owned the lock (or, forced, whether anybody held it).
    pub(crate) fn was_held(&self) -> bool {
        matches!(self, Self::Released | Self::HandedOff { .. })
    }
}

/// What `extend.lua` answered for one lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ExtendStatus {
    /// Extended.
    Extended,
    /// Extended, and the holder was asked to give the lock back (`ask.lua`).
    Asked,
    /// Nobody holds the lock.
    Gone,
    /// Another owner (or data dlock did not write) holds the key.
    Other,
}

impl ExtendStatus {
    /// Whether the lease was extended (with or without a release request).
    pub(crate) fn is_extended(self) -> bool {
        matches!(self, Self::Extended | Self::Asked)
    }

    /// The statuses of a batch of `expected` locks; `None` for a reply of another shape. A lock
    /// whose status is `None` was not renewed: the call reached a node that does not serve its
    /// key (an undeclared key of a shard batch whose slot has moved).
    pub(crate) fn decode_batch(reply: &Value, expected: usize) -> Option<Vec<Option<Self>>> {
        let Value::Array(items) = reply else {
            return None;
        };
        if items.len() != expected {
            return None;
        }
        items
            .iter()
            .map(|item| match int(item)? {
                2 => Some(Some(Self::Asked)),
                1 => Some(Some(Self::Extended)),
                0 => Some(Some(Self::Gone)),
                -1 => Some(Some(Self::Other)),
                -2 => Some(None),
                _ => None,
            })
            .collect()
    }
}

/// A non-negative PTTL as a duration.
fn millis(ms: i64) -> Option<Duration> {
    u64::try_from(ms).ok().map(Duration::from_millis)
}

/// The integers of an array reply of exactly `N` integers.
pub(crate) fn ints<const N: usize>(reply: &Value) -> Option<[i64; N]> {
    let Value::Array(items) = reply else {
        return None;
    };
    let mut out = [0; N];
    if items.len() != N {
        return None;
    }
    for (slot, item) in out.iter_mut().zip(items) {
        *slot = int(item)?;
    }
    Some(out)
}

/// A string reply (bulk or simple) as text; `None` for another reply or bytes that are not
/// UTF-8.
pub(crate) fn text(reply: &Value) -> Option<String> {
    match reply {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

/// An integer reply (or an integer sent as a string).
pub(crate) fn int(reply: &Value) -> Option<i64> {
    match reply {
        Value::Int(n) => Some(*n),
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok()?.parse().ok(),
        Value::SimpleString(s) => s.parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_evalsha_with_the_scripts_hash() {
        let mut call = Call::new(&EXTEND, 1);
        call.arg("k").arg("tok").arg(5000u64);
        let packed = String::from_utf8(call.cmd.get_packed_command()).unwrap();
        assert!(packed.starts_with("*6\r\n$7\r\nEVALSHA\r\n$40\r\n"));
        assert!(packed.contains(EXTEND.get_hash()));
        assert!(packed.ends_with("$1\r\n1\r\n$1\r\nk\r\n$3\r\ntok\r\n$4\r\n5000\r\n"));
    }

    #[test]
    fn replies_parse_without_surprises() {
        let reply = Value::Array(vec![Value::Int(1), Value::Int(7), Value::Int(900)]);
        assert_eq!(ints::<3>(&reply), Some([1, 7, 900]));
        assert_eq!(ints::<2>(&reply), None);
        assert_eq!(int(&Value::BulkString(b"42".to_vec())), Some(42));
        assert_eq!(int(&Value::Nil), None);
    }

    #[test]
    fn acquire_replies_are_typed() {
        assert_eq!(
            AcquireReply::decode(&Value::Int(17)),
            Some(AcquireReply::Taken { fence: 17 })
        );
        let owned = Value::Array(vec![Value::Int(1), Value::Int(9), Value::Int(250)]);
        assert_eq!(
            AcquireReply::decode(&owned),
            Some(AcquireReply::Owned {
                fence: Some(9),
                pttl: Duration::from_millis(250)
            })
        );
        let held = Value::Array(vec![Value::Int(0), Value::Int(40), Value::Int(1_700)]);
        assert_eq!(
            AcquireReply::decode(&held),
            Some(AcquireReply::Held {
                pttl: Duration::from_millis(40),
                server_ms: 1_700
            })
        );
        // A PTTL of -1 (no expiry) is refused by the script; never read as "held for a TTL".
        let persistent = Value::Array(vec![Value::Int(0), Value::Int(-1), Value::Int(1_700)]);
        assert_eq!(AcquireReply::decode(&persistent), None);
        assert_eq!(AcquireReply::decode(&Value::Int(-3)), None);
        assert_eq!(AcquireReply::decode(&Value::Nil), None);
    }

    #[test]
    fn fast_acquire_and_fence_replies_are_typed() {
        assert_eq!(FastReply::decode(&Value::Nil), Some(FastReply::Taken));
        assert_eq!(
            FastReply::decode(&Value::BulkString(b"v".to_vec())),
            Some(FastReply::Held(b"v".to_vec()))
        );
        assert_eq!(FastReply::decode(&Value::Int(1)), None);
        assert_eq!(FastReply::decode(&Value::Okay), None);
        assert_eq!(
            FenceReply::decode(&Value::Int(17)),
            Some(FenceReply::Fence(17))
        );
        assert_eq!(FenceReply::decode(&Value::Int(-1)), Some(FenceReply::Other));
        assert_eq!(FenceReply::decode(&Value::Int(0)), Some(FenceReply::Gone));
        assert_eq!(FenceReply::decode(&Value::Nil), None);
        assert_eq!(FenceReply::Fence(17).fence(), Some(17));
        assert_eq!(FenceReply::Gone.fence(), None);
        assert_eq!(FenceReply::Other.fence(), None);
    }

    #[test]
    fn rw_change_replies_are_typed() {
        let reply = |a, b, c| Value::Array(vec![Value::Int(a), Value::Int(b), Value::Int(c)]);
        assert_eq!(
            RwChangeReply::decode(&reply(1, 42, 900)),
            Some(RwChangeReply::Changed {
                fence: 42,
                pttl: Duration::from_millis(900)
            })
        );
        assert_eq!(
            RwChangeReply::decode(&reply(0, 0, 0)),
            Some(RwChangeReply::Gone)
        );
        assert_eq!(
            RwChangeReply::decode(&reply(-1, 3, 1)),
            Some(RwChangeReply::Refused {
                used: 3,
                waiting: 1
            })
        );
        // A fence is never 0, and nothing else is an answer.
        assert_eq!(RwChangeReply::decode(&reply(1, 0, 900)), None);
        assert_eq!(RwChangeReply::decode(&reply(2, 0, 0)), None);
        assert_eq!(RwChangeReply::decode(&Value::Int(1)), None);
    }

    #[test]
    fn shared_inspect_replies_are_typed() {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let reply = Value::Array(vec![
            bulk("4"),
            Value::Int(1_000),
            Value::Int(2),
            bulk("aa"),
            bulk("3 17 web\x1f42\x1f"),
            Value::Int(1_500),
        ]);
        assert_eq!(
            SharedInspectReply::decode(&reply),
            Some(SharedInspectReply {
                limit: Some(4),
                waiters: 2,
                holders: vec![("3 17 web\x1f42\x1f".to_owned(), Duration::from_millis(500))],
            })
        );
        let free = Value::Array(vec![Value::Nil, Value::Int(1_000), Value::Int(0)]);
        let decoded = SharedInspectReply::decode(&free).unwrap();
        assert_eq!((decoded.limit, decoded.holders.len()), (None, 0));
        let torn = Value::Array(vec![Value::Nil, Value::Int(1), Value::Int(0), bulk("aa")]);
        assert_eq!(SharedInspectReply::decode(&torn), None);
    }

    #[test]
    fn inspect_replies_are_typed() {
        let reply = |value: Value, pttl: i64, waiters: i64| {
            Value::Array(vec![value, Value::Int(pttl), Value::Int(waiters)])
        };
        let held = reply(Value::BulkString(b"v".to_vec()), 1_500, 2);
        assert_eq!(
            InspectReply::decode(&held),
            Some(InspectReply::Held {
                value: b"v".to_vec(),
                remaining: Duration::from_millis(1_500),
                waiters: 2,
            })
        );
        // A lease without expiry.
        let persisted = reply(Value::BulkString(b"v".to_vec()), -1, 0);
        assert_eq!(
            InspectReply::decode(&persisted),
            Some(InspectReply::Held {
                value: b"v".to_vec(),
                remaining: Duration::ZERO,
                waiters: 0,
            })
        );
        // Nobody holds it (RESP2 and RESP3 spellings of Lua's `false`).
        for free in [Value::Nil, Value::Boolean(false)] {
            let free = reply(free, -2, 3);
            assert_eq!(InspectReply::decode(&free), Some(InspectReply::Free));
        }
        // Replies of another length.
        let four = Value::Array(vec![
            Value::BulkString(b"v".to_vec()),
            Value::Nil,
            Value::Int(10),
            Value::Int(0),
        ]);
        assert_eq!(InspectReply::decode(&four), None);
        let two = Value::Array(vec![Value::Nil, Value::Int(-2)]);
        assert_eq!(InspectReply::decode(&two), None);
        let not_a_value = reply(Value::Int(7), 10, 0);
        assert_eq!(InspectReply::decode(&not_a_value), None);
        assert_eq!(InspectReply::decode(&Value::Int(0)), None);
    }

    #[test]
    fn the_release_script_has_its_fast_path_before_the_shared_functions() {
        let code = RELEASE.get_hash();
        assert_eq!(code.len(), 40);
        let text = Source::Release.text();
        let fast = text.find("redis.call('DEL', lock)").unwrap();
        let shared = text.find("local function hand_off").unwrap();
        assert!(fast < shared);
        assert!(!text.contains("--@common"));
    }

    #[test]
    fn release_replies_are_typed_and_unknown_ones_refused() {
        assert_eq!(
            ReleaseReply::decode(&Value::Int(1)),
            Some(ReleaseReply::Released)
        );
        assert_eq!(
            ReleaseReply::decode(&Value::Int(0)),
            Some(ReleaseReply::Expired)
        );
        assert_eq!(
            ReleaseReply::decode(&Value::Int(-1)),
            Some(ReleaseReply::TakenOver)
        );
        let handed = Value::Array(vec![Value::Int(2), Value::BulkString(b"g".to_vec())]);
        let handed = ReleaseReply::decode(&handed).unwrap();
        assert!(handed.was_held());
        assert_eq!(ReleaseReply::decode(&Value::Int(7)), None);
        assert_eq!(ReleaseReply::decode(&Value::Okay), None);
    }

    #[test]
    fn election_replies_are_typed() {
        assert_eq!(
            ElectionReply::decode(&Value::Int(1)),
            Some(ElectionReply::Changed)
        );
        assert_eq!(
            ElectionReply::decode(&Value::Int(0)),
            Some(ElectionReply::Unchanged)
        );
        assert_eq!(
            ElectionReply::decode(&Value::Int(-1)),
            Some(ElectionReply::NotLeader)
        );
        assert_eq!(ElectionReply::decode(&Value::Int(2)), None);
        let read = |leader: i64, value: &[u8], lease: i64| {
            Value::Array(vec![
                Value::Int(90),
                Value::Int(80),
                Value::Int(leader),
                Value::BulkString(value.to_vec()),
                Value::Int(lease),
            ])
        };
        assert_eq!(
            LeaderRead::decode(&read(80, b"10.0.0.7:8080", 900)),
            Some(LeaderRead {
                counter: 90,
                lock_fence: 80,
                leader: Some((80, "10.0.0.7:8080".into())),
                lease_left: Some(Duration::from_millis(900)),
            })
        );
        assert_eq!(
            LeaderRead::decode(&read(0, b"", -2)),
            Some(LeaderRead {
                counter: 90,
                lock_fence: 80,
                leader: None,
                lease_left: None,
            })
        );
        assert_eq!(LeaderRead::decode(&read(-1, b"", 900)), None);
        assert_eq!(LeaderRead::decode(&Value::Int(0)), None);
    }

    #[test]
    fn extend_batches_are_typed() {
        let reply = Value::Array(vec![Value::Int(1), Value::Int(0), Value::Int(-1)]);
        assert_eq!(
            ExtendStatus::decode_batch(&reply, 3),
            Some(vec![
                Some(ExtendStatus::Extended),
                Some(ExtendStatus::Gone),
                Some(ExtendStatus::Other)
            ])
        );
        assert_eq!(ExtendStatus::decode_batch(&reply, 2), None);
        let moved = Value::Array(vec![Value::Int(-2)]);
        assert_eq!(ExtendStatus::decode_batch(&moved, 1), Some(vec![None]));
        let odd = Value::Array(vec![Value::Int(5)]);
        assert_eq!(ExtendStatus::decode_batch(&odd, 1), None);
    }
}
