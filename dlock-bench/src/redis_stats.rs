//! Talking to the benchmark's own redis-server outside the measured code: plain connections with
//! dlock's socket settings, `FLUSHALL`, and the counters the report is built from
//! (`INFO commandstats`, `INFO memory`, queue lengths, the scheduler workload's counters).

use std::collections::BTreeMap;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, IntoConnectionInfo, ProtocolVersion};
use serde::{Deserialize, Serialize};

use crate::rt::BoxError;

/// Commands only a client can send (never issued by a Lua script): every call of one of these is
/// a client round trip. Everything else (`get`, `set`, `lpop` …) may run inside a script and is
/// counted as a round trip only where the benchmark itself sent it.
const CLIENT_ONLY: &[&str] = &[
    "evalsha",
    "eval",
    "evalsha_ro",
    "eval_ro",
    "fcall",
    "fcall_ro",
    "subscribe",
    "unsubscribe",
    "psubscribe",
    "punsubscribe",
    "ssubscribe",
    "sunsubscribe",
    "ping",
    "hello",
    "select",
    "auth",
    "multi",
    "exec",
];

/// Opens a multiplexed connection the way dlock's client does: RESP3 and `TCP_NODELAY` (dlock's
/// `tcp_settings` turns Nagle off; the raw floor must not pay a Nagle delay dlock does not pay).
pub(crate) async fn raw_connection(url: &str) -> Result<MultiplexedConnection, BoxError> {
    let info = url.into_connection_info()?;
    let redis_settings = info
        .redis_settings()
        .clone()
        .set_protocol(ProtocolVersion::RESP3);
    let tcp = info.tcp_settings().clone().set_nodelay(true);
    let info = info
        .set_redis_settings(redis_settings)
        .set_tcp_settings(tcp);
    let client = redis::Client::open(info)?;
    let conn = client
        .get_multiplexed_async_connection_with_config(&AsyncConnectionConfig::new())
        .await
        .map_err(|e| format!("cannot connect to redis at {url}: {e}"))?;
    Ok(conn)
}

/// Calls per command name from `INFO commandstats` (without `info` itself).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CommandStats(pub(crate) BTreeMap<String, u64>);

/// Server CPU time per command name (`usec` of `INFO commandstats`, without `info`). A script's
/// time includes the time of the commands it calls, which are also listed on their own.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CommandUsec(pub(crate) BTreeMap<String, u64>);

impl CommandUsec {
    /// Parses the `usec=` fields of `INFO commandstats`.
    pub(crate) fn parse(text: &str) -> Self {
        Self(parse_field(text, "usec="))
    }

    /// `after − self`, per command.
    pub(crate) fn delta(&self, after: &CommandUsec) -> CommandUsec {
        CommandUsec(delta_map(&self.0, &after.0))
    }

    /// Server time spent on what the client sent: scripts (their inner commands included) and
    /// client-only commands, plus the plain commands in `plain` (those the caller sent itself).
    pub(crate) fn client_usec(&self, plain: &[&str]) -> u64 {
        self.0
            .iter()
            .filter(|(name, _)| is_client_only(name) || plain.contains(&name.as_str()))
            .map(|(_, usec)| usec)
            .sum()
    }
}

fn is_client_only(name: &str) -> bool {
    let base = name.split('|').next().unwrap_or(name);
    CLIENT_ONLY.contains(&base) || base == "script" || base == "client"
}

/// One numeric field (`calls=`, `usec=`) of every `cmdstat_<name>` line but `info`.
fn parse_field(text: &str, field: &str) -> BTreeMap<String, u64> {
    let mut map = BTreeMap::new();
    for line in text.lines() {
        let Some((name, fields)) = line
            .trim()
            .strip_prefix("cmdstat_")
            .and_then(|l| l.split_once(':'))
        else {
            continue;
        };
        if name == "info" {
            continue;
        }
        let value = fields
            .split(',')
            .find_map(|f| f.strip_prefix(field))
            .and_then(|c| c.parse().ok());
        if let Some(value) = value {
            map.insert(name.to_owned(), value);
        }
    }
    map
}

/// `after − before` per key, leaving out keys that did not grow.
fn delta_map(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .filter_map(|(name, &value)| {
            let grown = value.saturating_sub(before.get(name).copied().unwrap_or(0));
            (grown > 0).then(|| (name.clone(), grown))
        })
        .collect()
}

impl CommandStats {
    /// Parses the text of `INFO commandstats` (`cmdstat_<name>:calls=N,usec=…`).
    pub(crate) fn parse(text: &str) -> Self {
        Self(parse_field(text, "calls="))
    }

    /// `after − self`, per command (commands whose count did not grow are left out).
    pub(crate) fn delta(&self, after: &CommandStats) -> CommandStats {
        CommandStats(delta_map(&self.0, &after.0))
    }

    /// Takes `count` calls of `name` away (the workload's own commands, in W3).
    pub(crate) fn subtract(&mut self, name: &str, count: u64) {
        if let Some(calls) = self.0.get_mut(name) {
            *calls = calls.saturating_sub(count);
            if *calls == 0 {
                self.0.remove(name);
            }
        }
    }

    /// Every command Redis executed, Lua-internal `redis.call`s included.
    pub(crate) fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// Client round trips: calls of commands only a client sends (scripts, pub/sub, `PING` …),
    /// plus `own_plain` plain commands the caller knows it sent itself (the floor's `SET`).
    pub(crate) fn round_trips(&self, own_plain: u64) -> u64 {
        let client_only: u64 = self
            .0
            .iter()
            .filter(|(name, _)| is_client_only(name))
            .map(|(_, calls)| calls)
            .sum();
        client_only + own_plain
    }

    /// `name=calls` pairs, for the report.
    pub(crate) fn summary(&self) -> String {
        self.0
            .iter()
            .map(|(name, calls)| format!("{name}={calls}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A control connection to the benchmark's server: never used by the code being measured.
pub(crate) struct Control {
    conn: MultiplexedConnection,
}

impl Control {
    pub(crate) async fn connect(url: &str) -> Result<Self, BoxError> {
        Ok(Self {
            conn: raw_connection(url).await?,
        })
    }

    /// `FLUSHALL` (synchronous): every workload starts on an empty database; scripts stay cached.
    pub(crate) async fn flushall(&mut self) -> Result<(), BoxError> {
        redis::cmd("FLUSHALL")
            .arg("SYNC")
            .query_async::<()>(&mut self.conn)
            .await
            .map_err(|e| format!("FLUSHALL failed: {e}"))?;
        Ok(())
    }

    /// Calls and server time per command, and the server's CPU time (user + system, µs), from
    /// one `INFO commandstats cpu`.
    pub(crate) async fn commandstats_and_cpu(
        &mut self,
    ) -> Result<(CommandStats, CommandUsec, u64), BoxError> {
        let text: String = redis::cmd("INFO")
            .arg("commandstats")
            .arg("cpu")
            .query_async(&mut self.conn)
            .await
            .map_err(|e| format!("INFO commandstats cpu failed: {e}"))?;
        let seconds = |name: &str| -> Result<f64, BoxError> {
            info_field(&text, name)
                .and_then(|v| v.parse::<f64>().ok())
                .ok_or_else(|| format!("INFO cpu has no {name} field").into())
        };
        let cpu = seconds("used_cpu_user")? + seconds("used_cpu_sys")?;
        // Seconds with 6 decimals: whole microseconds, far below 2^53.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let cpu_us = (cpu * 1e6).round() as u64;
        Ok((
            CommandStats::parse(&text),
            CommandUsec::parse(&text),
            cpu_us,
        ))
    }

    /// `used_memory` from `INFO memory`, bytes.
    pub(crate) async fn used_memory(&mut self) -> Result<u64, BoxError> {
        let text = self.info("memory").await?;
        info_field(&text, "used_memory")
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| "INFO memory has no used_memory field".into())
    }

    /// `redis_version` from `INFO server`.
    pub(crate) async fn redis_version(&mut self) -> Result<String, BoxError> {
        let text = self.info("server").await?;
        Ok(info_field(&text, "redis_version")
            .unwrap_or("unknown")
            .to_owned())
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
        Ok(keys
            .into_iter()
            .zip(values)
            .map(|(key, value)| (key, value.unwrap_or(0)))
            .collect())
    }

    async fn info(&mut self, section: &str) -> Result<String, BoxError> {
        let text: String = redis::cmd("INFO")
            .arg(section)
            .query_async(&mut self.conn)
            .await
            .map_err(|e| format!("INFO {section} failed: {e}"))?;
        Ok(text)
    }
}

fn info_field<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines().find_map(|line| {
        line.trim()
            .strip_prefix(name)
            .and_then(|rest| rest.strip_prefix(':'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "# Commandstats\r\n\
        cmdstat_set:calls=10,usec=12,usec_per_call=1.20,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_get:calls=5,usec=3,usec_per_call=0.60,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_evalsha:calls=4,usec=90,usec_per_call=22.5,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_script|load:calls=1,usec=9,usec_per_call=9.0,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_info:calls=2,usec=64,usec_per_call=32.00,rejected_calls=0,failed_calls=0\r\n";

    #[test]
    fn parses_commandstats_without_info() {
        let stats = CommandStats::parse(SAMPLE);
        assert_eq!(stats.0.get("set"), Some(&10));
        assert_eq!(stats.0.get("script|load"), Some(&1));
        assert!(!stats.0.contains_key("info"));
        assert_eq!(stats.total(), 20);
        // evalsha + script|load are client-only; plus 3 plain commands we sent ourselves.
        assert_eq!(stats.round_trips(3), 8);
        let usec = CommandUsec::parse(SAMPLE);
        assert_eq!(usec.client_usec(&[]), 99);
        assert_eq!(usec.client_usec(&["set"]), 111);
        assert_eq!(CommandUsec::default().delta(&usec).0.get("get"), Some(&3));
    }

    #[test]
    fn delta_and_subtract() {
        let before = CommandStats::parse(SAMPLE);
        let mut after = before.clone();
        after.0.insert("set".into(), 15);
        after.0.insert("incr".into(), 7);
        let mut delta = before.delta(&after);
        assert_eq!(delta.summary(), "incr=7 set=5");
        delta.subtract("incr", 7);
        delta.subtract("missing", 1);
        assert_eq!(delta.summary(), "set=5");
    }

    #[test]
    fn reads_info_fields() {
        let text = "# Memory\r\nused_memory:1234\r\nused_memory_human:1.2K\r\n";
        assert_eq!(info_field(text, "used_memory"), Some("1234"));
        assert_eq!(info_field(text, "nope"), None);
    }
}
