//! One typed reply per script, decoded in one place: what each script can answer, and
//! nothing else (an unknown reply is `None`, which the caller reports as a protocol error).

use std::time::Duration;

use redis::Value;

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
    /// The lock's value as stored (read it with [`wire::parse_lock_value`](super::wire::parse_lock_value)), and what lies
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
