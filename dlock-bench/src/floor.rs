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

use crate::control::raw_connection;
use crate::rt::BoxError;
use crate::spec::TTL_MS;
use crate::subject::Subject;

/// Deletes `KEYS[1]` only if it still holds `ARGV[1]`; returns the number of keys deleted.
static COMPARE_AND_DELETE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) \
         else return 0 end",
    )
});

/// A raw-Redis "lock client": one shared connection and a token generator.
#[derive(Debug)]
pub(crate) struct Floor {
    conn: MultiplexedConnection,
    /// 16 random hex digits per client; a counter makes each token unique (32 hex digits, the
    /// length of dlock's owner tokens).
    prefix: String,
    seq: AtomicU64,
}

/// The floor's handle on one key: nothing but the name.
#[derive(Debug)]
pub(crate) struct FloorLock<'a> {
    floor: &'a Floor,
    key: &'a str,
}

/// A key the floor holds: the connection handle it was taken on, and the token to delete.
#[derive(Debug)]
pub(crate) struct FloorGuard<'a> {
    conn: MultiplexedConnection,
    key: &'a str,
    token: String,
}

impl Subject for Floor {
    const NAME: &'static str = "floor";
    const LABEL: &'static str = "raw floor";
    const WAITS: bool = false;
    const OWN_PLAIN: &'static [&'static str] = &["set"];
    type Lock<'a> = FloorLock<'a>;
    type Guard<'a> = FloorGuard<'a>;

    async fn connect(url: &str) -> Result<Self, BoxError> {
        Ok(Self {
            conn: raw_connection(url).await?,
            prefix: format!("{:016x}", getrandom::u64()?),
            seq: AtomicU64::new(0),
        })
    }

    fn lock<'a>(&'a self, key: &'a str) -> Result<FloorLock<'a>, BoxError> {
        Ok(FloorLock { floor: self, key })
    }

    async fn acquire<'a, 'l: 'a>(
        lock: &'a Self::Lock<'l>,
    ) -> Result<Option<FloorGuard<'a>>, BoxError> {
        let FloorLock { floor, key } = *lock;
        let token = format!(
            "{}{:016x}",
            floor.prefix,
            floor.seq.fetch_add(1, Ordering::Relaxed)
        );
        let mut conn = floor.conn.clone();
        let set: Option<String> = redis::cmd("SET")
            .arg(key)
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(TTL_MS)
            .query_async(&mut conn)
            .await?;
        Ok(set.map(|_| FloorGuard { conn, key, token }))
    }

    async fn release(guard: Self::Guard<'_>) -> Result<bool, BoxError> {
        let FloorGuard {
            mut conn,
            key,
            token,
        } = guard;
        let deleted: i64 = COMPARE_AND_DELETE
            .key(key)
            .arg(&token)
            .invoke_async(&mut conn)
            .await?;
        Ok(deleted == 1)
    }
}
