//! The raw floor: a lock pair with the bare `redis` crate and no lock library, as WORKLOADS.md
//! defines it: `SET k token NX PX 10000`, then `EVALSHA <compare-and-delete> 1 k token`.
//!
//! It runs on one [`MultiplexedConnection`] opened like dlock's (RESP3, `TCP_NODELAY`, see
//! [`raw_connection`]) and, like dlock, clones the connection handle per request and sends the
//! script through [`redis::Script`] (EVALSHA with a NOSCRIPT fallback). It pays two round trips
//! per pair and nothing else: any lock library needs at least as much.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};

use redis::Script;
use redis::aio::MultiplexedConnection;

use crate::redis_stats::raw_connection;
use crate::rt::BoxError;
use crate::spec::TTL_MS;

/// Deletes `KEYS[1]` only if it still holds `ARGV[1]`; returns the number of keys deleted.
static COMPARE_AND_DELETE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) \
         else return 0 end",
    )
});

/// A raw-Redis "lock client": one shared connection and a token generator.
pub(crate) struct Floor {
    conn: MultiplexedConnection,
    /// 16 random hex digits per client; a counter makes each token unique (32 hex digits, the
    /// length of dlock's owner tokens).
    prefix: String,
    seq: AtomicU64,
}

impl Floor {
    pub(crate) async fn connect(url: &str) -> Result<Self, BoxError> {
        let conn = raw_connection(url).await?;
        let prefix = format!("{:016x}", getrandom::u64()?);
        Ok(Self {
            conn,
            prefix,
            seq: AtomicU64::new(0),
        })
    }

    /// One acquire + release of `key`. An error when the key was taken or the release did not
    /// delete it: the workloads use distinct keys, so either means a broken benchmark.
    pub(crate) async fn pair(&self, key: &str) -> Result<(), BoxError> {
        let token = format!(
            "{}{:016x}",
            self.prefix,
            self.seq.fetch_add(1, Ordering::Relaxed)
        );
        let mut conn = self.conn.clone();
        let set: Option<String> = redis::cmd("SET")
            .arg(key)
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(TTL_MS)
            .query_async(&mut conn)
            .await?;
        if set.is_none() {
            return Err(format!("raw floor: `{key}` was already held").into());
        }
        let deleted: i64 = COMPARE_AND_DELETE
            .key(key)
            .arg(&token)
            .invoke_async(&mut conn)
            .await?;
        if deleted != 1 {
            return Err(format!("raw floor: releasing `{key}` deleted {deleted} keys").into());
        }
        Ok(())
    }
}
