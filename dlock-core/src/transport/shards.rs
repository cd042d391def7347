//! Which shard (primary and its replicas) of a Redis Cluster serves each key slot: the watchdog
//! renews the locks of one shard in one call (see `extend.lua`), not one call per slot.
//!
//! Locks spread over a cluster's 16,384 slots would otherwise cost one renewal call each: 1,000
//! locks on 100 ms leases are ~30,000 calls a second (measured: 690 of them lost on a 3-master
//! cluster), against ~300 when grouped by shard. The map comes from `CLUSTER SHARDS`, read when
//! the watchdog starts, and again when a renewal found a key on another node (slots were moved)
//! or failed, or when it is a minute old; at most once a second. A read that fails keeps the
//! last map. A lock whose key a shard call found elsewhere is renewed in a call of its own slot
//! next (the cluster client routes that one right); so is every lock until a first map is read.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::Value;
use redis::cluster_routing::Slot;

use crate::runtime::lock;
use crate::transport::Transport;

/// Slots in a Redis Cluster.
const SLOTS: usize = 16_384;
/// A map older than this is read again (cheap, and it notices a resharding before any error).
const MAX_AGE: Duration = Duration::from_secs(60);
/// Reads of the map are at least this far apart.
const MIN_GAP: Duration = Duration::from_secs(1);

/// The shard of every served slot: an index into the `CLUSTER SHARDS` reply it was read from.
/// (Keyed by the `redis` crate's [`Slot`], so that a key's slot is computed exactly as the
/// cluster client routes it.)
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ShardMap {
    shard_of: HashMap<Slot, u16>,
}

impl ShardMap {
    /// The shard serving `key`'s slot, if the map knows one.
    pub(crate) fn shard_of_key(&self, key: &str) -> Option<u16> {
        self.shard_of.get(&Slot::for_key(key)).copied()
    }

    /// Reads a `CLUSTER SHARDS` reply (RESP3 maps, or RESP2 flat key/value arrays). `None`
    /// for a reply of another shape.
    fn parse(reply: &Value) -> Option<Self> {
        let Value::Array(shards) = reply else {
            return None;
        };
        let mut shard_of = HashMap::with_capacity(SLOTS);
        for (index, shard) in shards.iter().enumerate() {
            let index = u16::try_from(index).ok()?;
            let ranges = field(shard, "slots")?;
            let Value::Array(bounds) = ranges else {
                return None;
            };
            for pair in bounds.chunks(2) {
                let [start, end] = pair else {
                    return None;
                };
                for slot in slot(start)?..=slot(end)? {
                    shard_of.insert(Slot::new(slot)?, index);
                }
            }
        }
        Some(Self { shard_of })
    }
}

/// The value of `name` in a map reply (or a flat key/value array).
pub(crate) fn field<'a>(value: &'a Value, name: &str) -> Option<&'a Value> {
    let is_name = |k: &Value| match k {
        Value::BulkString(b) => b.as_slice() == name.as_bytes(),
        Value::SimpleString(s) => s == name,
        _ => false,
    };
    match value {
        Value::Map(pairs) => pairs.iter().find(|(k, _)| is_name(k)).map(|(_, v)| v),
        Value::Array(items) => items
            .chunks(2)
            .find(|pair| is_name(&pair[0]))
            .and_then(|pair| pair.get(1)),
        _ => None,
    }
}

fn slot(value: &Value) -> Option<u16> {
    match value {
        Value::Int(n) => u16::try_from(*n).ok().filter(|&n| usize::from(n) < SLOTS),
        _ => None,
    }
}

#[derive(Default)]
struct State {
    /// The last map read (kept when a later read fails: most of it is still right).
    map: Option<Arc<ShardMap>>,
    read_at: Option<Instant>,
    /// A renewal found a key on another node, or the last read failed: read again.
    stale: bool,
}

/// The shard map of one cluster client, read on demand.
#[derive(Default)]
pub(crate) struct Shards {
    state: Mutex<State>,
}

impl Shards {
    /// The map to group this round's renewals by, read again first when it is missing, stale
    /// or old (and the last read is at least a second ago). `None` until one read worked:
    /// group by slot.
    pub(crate) async fn current(&self, transport: &Transport) -> Option<Arc<ShardMap>> {
        let now = Instant::now();
        {
            let state = lock(&self.state);
            let fresh = state
                .read_at
                .is_some_and(|at| now.saturating_duration_since(at) < MAX_AGE);
            let may_read = state
                .read_at
                .is_none_or(|at| now.saturating_duration_since(at) >= MIN_GAP);
            if (fresh && !state.stale) || !may_read {
                return state.map.clone();
            }
        }
        let read = transport
            .query::<Value>(
                redis::cmd("CLUSTER").arg("SHARDS"),
                "read the cluster's shards",
            )
            .await;
        let map = match read {
            Ok(reply) => ShardMap::parse(&reply).map(Arc::new),
            Err(e) => {
                tracing::debug!(error = %e, "dlock: could not read the cluster's shards");
                None
            }
        };
        let mut state = lock(&self.state);
        state.read_at = Some(Instant::now());
        state.stale = map.is_none();
        if map.is_some() {
            state.map = map;
        }
        state.map.clone()
    }

    /// A renewal found a lock key served by another node, or failed: read the map again before
    /// the next round that may.
    pub(crate) fn invalidate(&self) {
        lock(&self.state).stale = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn a_shards_reply_maps_every_slot_to_its_shard() {
        let shard = |ranges: &[i64]| {
            Value::Map(vec![
                (
                    bulk("slots"),
                    Value::Array(ranges.iter().map(|&n| Value::Int(n)).collect()),
                ),
                (bulk("nodes"), Value::Array(vec![])),
            ])
        };
        let reply = Value::Array(vec![shard(&[0, 5460, 16000, 16383]), shard(&[5461, 15999])]);
        let map = ShardMap::parse(&reply).unwrap();
        let at = |n| map.shard_of.get(&Slot::new(n).unwrap()).copied();
        assert_eq!(at(0), Some(0));
        assert_eq!(at(5460), Some(0));
        assert_eq!(at(5461), Some(1));
        assert_eq!(at(15999), Some(1));
        assert_eq!(at(16383), Some(0));
        assert_eq!(map.shard_of.len(), SLOTS);
        // "b" is in slot 3300, "a" in 15495.
        assert_eq!(map.shard_of_key("b"), Some(0));
        assert_eq!(map.shard_of_key("a"), Some(1));

        // RESP2: flat key/value arrays; a slot no shard serves has none.
        let flat = Value::Array(vec![Value::Array(vec![
            bulk("slots"),
            Value::Array(vec![Value::Int(0), Value::Int(100)]),
        ])]);
        let map = ShardMap::parse(&flat).unwrap();
        assert_eq!(map.shard_of.get(&Slot::new(100).unwrap()), Some(&0));
        assert_eq!(map.shard_of_key("b"), None);

        // Other shapes, and slots out of range, are not maps.
        assert_eq!(ShardMap::parse(&Value::Int(1)), None);
        assert_eq!(
            ShardMap::parse(&Value::Array(vec![shard(&[0, 16384])])),
            None
        );
        assert_eq!(ShardMap::parse(&Value::Array(vec![shard(&[0])])), None);
    }
}
