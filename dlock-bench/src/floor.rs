//! The raw floor: a lock pair with the bare `redis` crate and no lock library, as WORKLOADS.md
//! defines it: `SET k token NX PX 10000`, then `EVALSHA <compare-and-delete> 1 k token`.
//!
//! It runs on one [`MultiplexedConnection`], clones the connection handle per request (as dlock
//! does) and sends the script through [`redis::Script`] (EVALSHA with a NOSCRIPT fallback). It
//! pays two round trips per pair and nothing else: any lock library needs at least as much.
//!
//! Two floors, one per connection setting that matters (WORKLOADS.md: "where the library changes
//! one that matters, print the floor both ways"):
//! * [`Defaults`]: the `redis` crate's defaults (`redis::Client::open(url)`: RESP2, Nagle on), the
//!   connection rslock also runs on; issue #13's targets are ratios to this floor;
//! * [`Nodelay`]: the connection dlock opens today (RESP3, `TCP_NODELAY`, see
//!   [`raw_connection`]), for a like-for-like ratio of dlock's default client.

use std::marker::PhantomData;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};

use redis::Script;
use redis::aio::MultiplexedConnection;

use crate::control::raw_connection;
use crate::redis_stats::Plain;
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

/// How a floor opens its connection: the one thing that tells the two floors apart.
pub(crate) trait Connect: Send + Sync + 'static {
    /// [`Subject::NAME`].
    const NAME: &'static str;
    /// [`Subject::LABEL`].
    const LABEL: &'static str;
    /// Opens the floor's connection to `url`.
    fn open(url: &str) -> impl Future<Output = Result<MultiplexedConnection, BoxError>> + Send;
}

/// The `redis` crate's default connection settings (RESP2, Nagle on): rslock's connection.
#[derive(Debug)]
pub(crate) struct Defaults;

impl Connect for Defaults {
    const NAME: &'static str = "floor";
    const LABEL: &'static str = "raw floor (redis defaults)";

    async fn open(url: &str) -> Result<MultiplexedConnection, BoxError> {
        let conn = redis::Client::open(url)?
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| format!("cannot connect to redis at {url}: {e}"))?;
        Ok(conn)
    }
}

/// dlock's connection settings today (RESP3, `TCP_NODELAY`).
#[derive(Debug)]
pub(crate) struct Nodelay;

impl Connect for Nodelay {
    const NAME: &'static str = "floor_nodelay";
    const LABEL: &'static str = "raw floor (TCP_NODELAY)";

    async fn open(url: &str) -> Result<MultiplexedConnection, BoxError> {
        raw_connection(url).await
    }
}

/// A raw-Redis "lock client": one shared connection, opened as `C` says, and a token generator.
#[derive(Debug)]
pub(crate) struct Floor<C> {
    conn: MultiplexedConnection,
    /// 16 random hex digits per client; a counter makes each token unique (32 hex digits, the
    /// length of dlock's owner tokens).
    prefix: String,
    seq: AtomicU64,
    connect: PhantomData<C>,
}

/// The floor's handle on one key: nothing but the name.
#[derive(Debug)]
pub(crate) struct FloorLock<'a, C> {
    floor: &'a Floor<C>,
    key: &'a str,
}

/// A key the floor holds: the connection handle it was taken on, and the token to delete.
#[derive(Debug)]
pub(crate) struct FloorGuard<'a> {
    conn: MultiplexedConnection,
    key: &'a str,
    token: String,
}

impl<C: Connect> Subject for Floor<C> {
    const NAME: &'static str = C::NAME;
    const LABEL: &'static str = C::LABEL;
    const WAITS: bool = false;
    const OWN_PLAIN: Plain = Plain::client_only(&["set"]);
    type Lock<'a> = FloorLock<'a, C>;
    type Guard<'a> = FloorGuard<'a>;

    async fn connect(url: &str) -> Result<Self, BoxError> {
        Ok(Self {
            conn: C::open(url).await?,
            prefix: format!("{:016x}", getrandom::u64()?),
            seq: AtomicU64::new(0),
            connect: PhantomData,
        })
    }

    fn lock<'a>(&'a self, key: &'a str) -> Result<FloorLock<'a, C>, BoxError> {
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
