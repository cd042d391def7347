//! Talking to the benchmark's own redis-server outside the measured code: plain connections with
//! dlock's socket settings, and a control connection for `FLUSHALL`, `INFO` and the workloads' own
//! counters. What the counters mean is [`crate::redis_stats`]'s business.

use std::collections::BTreeMap;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, IntoConnectionInfo, ProtocolVersion, PushInfo};
use tokio::sync::mpsc::UnboundedSender;

use crate::rt::BoxError;

/// Opens a multiplexed connection the way dlock's client does: RESP3 and `TCP_NODELAY` (dlock's
/// `tcp_settings` turns Nagle off; the raw floor must not pay a Nagle delay dlock does not pay).
pub(crate) async fn raw_connection(url: &str) -> Result<MultiplexedConnection, BoxError> {
    connection(url, None).await
}

/// [`raw_connection`], with RESP3 push messages (pub/sub) sent to `pushes` when given.
pub(crate) async fn connection(
    url: &str,
    pushes: Option<UnboundedSender<PushInfo>>,
) -> Result<MultiplexedConnection, BoxError> {
    let mut config = AsyncConnectionConfig::new();
    if let Some(pushes) = pushes {
        config = config.set_push_sender(pushes);
    }
    open(url, &config).await
}

/// [`raw_connection`] without a response timeout (the `redis` crate's default gives up after
/// 500 ms): for watching a server that the workload may stall longer than that (W7's deep
/// queue), whose stall is a figure to measure, not an error.
pub(crate) async fn patient_connection(url: &str) -> Result<MultiplexedConnection, BoxError> {
    open(
        url,
        &AsyncConnectionConfig::new().set_response_timeout(None),
    )
    .await
}

/// Opens a connection with dlock's socket settings and `config`.
async fn open(
    url: &str,
    config: &AsyncConnectionConfig,
) -> Result<MultiplexedConnection, BoxError> {
    let info = url.into_connection_info()?;
    let redis_settings = info
        .redis_settings()
        .clone()
        .set_protocol(ProtocolVersion::RESP3);
    let tcp = info.tcp_settings().clone().set_nodelay(true);
    let info = info
        .set_redis_settings(redis_settings)
        .set_tcp_settings(tcp);
    let conn = redis::Client::open(info)?
        .get_multiplexed_async_connection_with_config(config)
        .await
        .map_err(|e| format!("cannot connect to redis at {url}: {e}"))?;
    Ok(conn)
}

/// A control connection to the benchmark's server: never used by the code being measured.
#[derive(Debug)]
pub(crate) struct Control {
    conn: MultiplexedConnection,
}

impl Control {
    pub(crate) async fn connect(url: &str) -> Result<Self, BoxError> {
        Ok(Self {
            conn: raw_connection(url).await?,
        })
    }

    /// A control connection without a response timeout ([`patient_connection`]).
    pub(crate) async fn patient(url: &str) -> Result<Self, BoxError> {
        Ok(Self {
            conn: patient_connection(url).await?,
        })
    }

    /// The connection, for a workload's own set-up outside the measured window.
    pub(crate) fn conn(&mut self) -> &mut MultiplexedConnection {
        &mut self.conn
    }

    /// A control connection after a `FLUSHALL` (synchronous): every workload starts on an empty
    /// database; scripts stay cached.
    pub(crate) async fn fresh(url: &str) -> Result<Self, BoxError> {
        let mut control = Self::connect(url).await?;
        redis::cmd("FLUSHALL")
            .arg("SYNC")
            .query_async::<()>(&mut control.conn)
            .await
            .map_err(|e| format!("FLUSHALL failed: {e}"))?;
        Ok(control)
    }

    /// The text of `INFO <sections…>`.
    pub(crate) async fn info(&mut self, sections: &[&str]) -> Result<String, BoxError> {
        let text: String = redis::cmd("INFO")
            .arg(sections)
            .query_async(&mut self.conn)
            .await
            .map_err(|e| format!("INFO {} failed: {e}", sections.join(" ")))?;
        Ok(text)
    }

    /// `used_memory` from `INFO memory`, bytes.
    pub(crate) async fn used_memory(&mut self) -> Result<u64, BoxError> {
        let text = self.info(&["memory"]).await?;
        info_field(&text, "used_memory")
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| "INFO memory has no used_memory field".into())
    }

    /// `redis_version` from `INFO server`, and the server it names (issue #48): "Valkey 9.1.2"
    /// from `server_name` and `valkey_version` where the server has them (Valkey reports
    /// `redis_version:7.2.4` whatever its own version), else "Redis <redis_version>".
    pub(crate) async fn server_version(&mut self) -> Result<(String, String), BoxError> {
        let text = self.info(&["server"]).await?;
        Ok(server_of(&text))
    }

    /// Sum of `LLEN` of the given keys.
    pub(crate) async fn total_llen(&mut self, keys: &[String]) -> Result<u64, BoxError> {
        let mut pipe = redis::pipe();
        for key in keys {
            pipe.cmd("LLEN").arg(key);
        }
        let lens: Vec<u64> = pipe.query_async(&mut self.conn).await?;
        Ok(lens.iter().sum())
    }

    /// An integer key (nil reads as 0).
    pub(crate) async fn get_u64(&mut self, key: &str) -> Result<u64, BoxError> {
        let value: Option<u64> = redis::cmd("GET")
            .arg(key)
            .query_async(&mut self.conn)
            .await?;
        Ok(value.unwrap_or(0))
    }

    /// Every key matching `pattern` with its integer value (`KEYS`, then `MGET`; for the
    /// scheduler's small per-occurrence counters only).
    pub(crate) async fn int_keys(
        &mut self,
        pattern: &str,
    ) -> Result<BTreeMap<String, u64>, BoxError> {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(pattern)
            .query_async(&mut self.conn)
            .await?;
        if keys.is_empty() {
            return Ok(BTreeMap::new());
        }
        let values: Vec<Option<u64>> = redis::cmd("MGET")
            .arg(&keys)
            .query_async(&mut self.conn)
            .await?;
        let values = values.into_iter().map(Option::unwrap_or_default);
        Ok(keys.into_iter().zip(values).collect())
    }
}

/// The value of field `name` in the text of `INFO` (`name:value` lines).
pub(crate) fn info_field<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines().find_map(|line| {
        line.trim()
            .strip_prefix(name)
            .and_then(|rest| rest.strip_prefix(':'))
    })
}

/// `redis_version` and the server's own name and version, from `INFO server`'s `text`.
fn server_of(text: &str) -> (String, String) {
    let redis = info_field(text, "redis_version").unwrap_or("unknown");
    let server = match info_field(text, "valkey_version") {
        Some(valkey) => format!("Valkey {valkey} (redis_version {redis})"),
        None => match info_field(text, "server_name") {
            Some(name) if name != "redis" => format!("{name} (redis_version {redis})"),
            _ => format!("Redis {redis}"),
        },
    };
    (redis.to_owned(), server)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_is_named_by_its_own_version() {
        let valkey =
            "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:9.1.2\r\n";
        assert_eq!(server_of(valkey).1, "Valkey 9.1.2 (redis_version 7.2.4)");
        assert_eq!(server_of("redis_version:7.0.15\r\n").1, "Redis 7.0.15");
    }

    #[test]
    fn reads_info_fields() {
        let text = "# Memory\r\nused_memory:1234\r\nused_memory_human:1.2K\r\n";
        assert_eq!(info_field(text, "used_memory"), Some("1234"));
        assert_eq!(info_field(text, "nope"), None);
    }
}
