//! The plain client of the partition matrix (`tests/partitions/matrix/`): the lock most Redis
//! users write by hand — `SET key token NX PX ttl` to acquire, a Lua compare-and-delete to
//! release — with no fence, no durability and no guard, run under the same harness as dlock
//! for comparison. It is written here, not in dlock-core: it is what dlock is compared with.
//!
//! It finds the master as a careful hand-written client would: through the sentinels
//! (`SENTINEL GET-MASTER-ADDR-BY-NAME`; the first named server that says `ROLE` master), and
//! after any error or timeout
//! it drops its connection and asks them again (so it follows a failover, and a `READONLY`
//! from a demoted master sends it on). Every command is bounded by the command timeout.

use std::time::Duration;

use redis::aio::MultiplexedConnection;

use crate::BoxError;

/// The compare-and-delete release: deletes the key only if it still holds our token.
const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0";

/// A connection to the master, found through the sentinels (or a fixed URL), replaced after
/// any failure.
pub(crate) struct PlainConn {
    url: Option<String>,
    sentinels: Vec<String>,
    master_name: String,
    timeout: Duration,
    conn: Option<MultiplexedConnection>,
}

impl PlainConn {
    /// `url`: a fixed server; else `sentinels` (URLs) naming `master_name`.
    pub(crate) fn new(
        url: Option<String>,
        sentinels: Vec<String>,
        master_name: &str,
        timeout: Duration,
    ) -> PlainConn {
        PlainConn {
            url,
            sentinels,
            master_name: master_name.to_owned(),
            timeout,
            conn: None,
        }
    }

    /// A connection to the master: the fixed URL's, or the first server a sentinel names that
    /// says it is a master (`ROLE`; a sentinel cut off with the old master still names it).
    async fn open_master(&self) -> Result<MultiplexedConnection, BoxError> {
        if let Some(url) = &self.url {
            return self.open(url).await;
        }
        for sentinel in &self.sentinels {
            let Ok(url) = self.ask(sentinel).await else {
                continue;
            };
            let Ok(mut conn) = self.open(&url).await else {
                continue;
            };
            let ask = redis::cmd("ROLE");
            let role = ask.query_async::<Vec<redis::Value>>(&mut conn);
            if let Ok(Ok(role)) = tokio::time::timeout(self.timeout, role).await
                && matches!(role.first(), Some(redis::Value::BulkString(r)) if r == b"master")
            {
                return Ok(conn);
            }
        }
        Err("no sentinel named a server that says it is the master".into())
    }

    async fn open(&self, url: &str) -> Result<MultiplexedConnection, BoxError> {
        let open = async {
            Ok::<_, BoxError>(
                redis::Client::open(url)?
                    .get_multiplexed_async_connection()
                    .await?,
            )
        };
        tokio::time::timeout(self.timeout, open).await?
    }

    /// The master's URL as `sentinel` names it.
    async fn ask(&self, sentinel: &str) -> Result<String, BoxError> {
        {
            let ask = async {
                let mut con = redis::Client::open(sentinel)?
                    .get_multiplexed_async_connection()
                    .await?;
                let addr: Option<(String, u16)> = redis::cmd("SENTINEL")
                    .arg("GET-MASTER-ADDR-BY-NAME")
                    .arg(&self.master_name)
                    .query_async(&mut con)
                    .await?;
                Ok::<_, BoxError>(addr)
            };
            match tokio::time::timeout(self.timeout, ask).await {
                Ok(Ok(Some((host, port)))) => Ok(format!("redis://{host}:{port}/")),
                _ => Err(format!("{sentinel} named no master").into()),
            }
        }
    }

    async fn connection(&mut self) -> Result<MultiplexedConnection, BoxError> {
        if let Some(conn) = &self.conn {
            return Ok(conn.clone());
        }
        let conn = self.open_master().await?;
        self.conn = Some(conn.clone());
        Ok(conn)
    }

    /// Runs `cmd` within the timeout; any failure drops the connection.
    pub(crate) async fn query<T: redis::FromRedisValue>(
        &mut self,
        cmd: &redis::Cmd,
    ) -> Result<T, BoxError> {
        let result = async {
            let mut conn = self.connection().await?;
            let run = cmd.query_async::<T>(&mut conn);
            Ok::<_, BoxError>(tokio::time::timeout(self.timeout, run).await??)
        }
        .await;
        if result.is_err() {
            self.conn = None;
        }
        result
    }
}

/// `SET key token NX PX ttl`: whether it was taken (`Err`: no answer, it may have been).
pub(crate) async fn acquire(
    conn: &mut PlainConn,
    key: &str,
    token: &str,
    ttl: Duration,
) -> Result<bool, BoxError> {
    let mut set = redis::cmd("SET");
    set.arg(key)
        .arg(token)
        .arg("NX")
        .arg("PX")
        .arg(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX));
    let reply: Option<String> = conn.query(&set).await?;
    Ok(reply.is_some())
}

/// The compare-and-delete release: whether the key was still ours.
pub(crate) async fn release(
    conn: &mut PlainConn,
    key: &str,
    token: &str,
) -> Result<bool, BoxError> {
    let mut eval = redis::cmd("EVAL");
    eval.arg(RELEASE).arg(1).arg(key).arg(token);
    let deleted: i64 = conn.query(&eval).await?;
    Ok(deleted == 1)
}
