//! Servers dlock cannot run on, refused by name when a client connects
//! ([`crate::ClientBuilder::connect`]) instead of failing later inside a script with an error
//! that names neither the server nor the reason.
//!
//! Read from `INFO server`: `server_name` (Valkey writes `valkey`), a fork's own version field
//! (`dragonfly_version`, `keydb_version`), the `executable` path, and `redis_version`. The
//! version is read for this refusal only, never to choose a feature (features are detected by
//! `COMMAND INFO` or by the first refusal: `transport/durable.rs`). A server that refuses `INFO`
//! to this user (`NOPERM`: an ACL, or a service's allow-list) is an unknown server, and the
//! client goes on: its scripts then say what they lack.

use redis::Value;

use crate::error::{Error, ErrorKind, Result};
use crate::transport::Transport;

/// The first Redis version dlock runs on: its requests use `SET … NX GET` and sharded pub/sub
/// (`SPUBLISH`), both of Redis 7.0.
const FIRST_REDIS: u32 = 7;

/// Refuses, by name and reason, a server dlock cannot run on (see the module docs).
///
/// # Errors
/// [`ErrorKind::Protocol`] naming the server and why; the `INFO` request's own error other than
/// a refused permission (which means "unknown server, go on").
///
/// # Cancel safety
/// Cancel safe: `INFO` changes nothing.
pub(crate) async fn refuse_unsupported(transport: &Transport) -> Result<()> {
    let mut info = redis::cmd("INFO");
    info.arg("server");
    let reply: Value = match transport.query(&info, "INFO server").await {
        Ok(reply) => reply,
        Err(e) if e.kind() == ErrorKind::Permission => return Ok(()),
        Err(e) => return Err(e),
    };
    // A cluster client gathers every node's answer: each must be supported.
    let mut texts = Vec::new();
    collect_texts(&reply, &mut texts);
    match texts.iter().find_map(|text| unsupported(text)) {
        Some(why) => Err(Error::new(ErrorKind::Protocol, why)),
        None => Ok(()),
    }
}

/// Every text in an `INFO` reply (one server's, or a map of each node's).
fn collect_texts(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::BulkString(bytes) => out.push(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(text) | Value::VerbatimString { text, .. } => out.push(text.clone()),
        Value::Array(items) | Value::Set(items) => {
            items.iter().for_each(|item| collect_texts(item, out));
        }
        Value::Map(pairs) => pairs.iter().for_each(|(_, item)| collect_texts(item, out)),
        _ => {}
    }
}

/// The value of `name:value` in an `INFO` text.
fn field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

/// Why dlock cannot run on the server whose `INFO server` is `info`, or `None` when it can (or
/// the server is one it does not know: those go on).
fn unsupported(info: &str) -> Option<String> {
    let name = field(info, "server_name").map(str::to_lowercase);
    let executable = field(info, "executable")
        .and_then(|path| path.rsplit('/').next())
        .unwrap_or_default()
        .to_lowercase();
    let is = |fork: &str| {
        name.as_deref() == Some(fork)
            || field(info, &format!("{fork}_version")).is_some()
            || executable.starts_with(fork)
    };
    if is("dragonfly") {
        let version = field(info, "dragonfly_version").unwrap_or("of unknown version");
        return Some(format!(
            "the server is Dragonfly ({version}), which dlock does not support: by default it \
             refuses a script's keys that are not passed in KEYS (dlock's scripts derive their \
             queue and marker keys from the lock's key, `KEYS[1]..':queue'`) and reads only its \
             own `--!df` script flags; use Redis 7 or newer, or Valkey"
        ));
    }
    if is("keydb") {
        let version = field(info, "redis_version").unwrap_or("unknown");
        return Some(format!(
            "the server is KeyDB (redis_version {version}), which dlock does not support: it \
             follows Redis 6 and lacks commands dlock needs (`SET … NX GET`, sharded pub/sub \
             `SPUBLISH`, both Redis 7.0); use Redis 7 or newer, or Valkey"
        ));
    }
    if name.is_some_and(|name| name != "redis") {
        // Valkey, or a server dlock does not know: not refused (its features are detected).
        return None;
    }
    let version = field(info, "redis_version")?;
    let major: u32 = version.split('.').next()?.parse().ok()?;
    (major < FIRST_REDIS).then(|| {
        format!(
            "the server runs Redis {version}, and dlock needs Redis 7.0 or newer: its requests \
             use `SET … NX GET` and sharded pub/sub (`SPUBLISH`), which came with 7.0; upgrade \
             the server (or use Valkey)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn supported_servers_go_on() {
        for info in [
            "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n",
            "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:9.1.2\r\n",
            "# Server\r\nredis_version:8.4.0\r\n",
            // A server dlock does not know, reporting an old version: not guessed.
            "# Server\r\nredis_version:6.0.0\r\nserver_name:someday\r\n",
            // No version at all: nothing to refuse by.
            "# Server\r\nrun_id:abc\r\n",
        ] {
            assert_eq!(unsupported(info), None, "{info}");
        }
    }

    #[test]
    fn unsupported_servers_are_named_with_the_reason() {
        let dragonfly = "# Server\r\nredis_version:7.4.0\r\ndragonfly_version:df-v1.40.1\r\n";
        let said = unsupported(dragonfly).unwrap_or_default();
        assert!(said.contains("Dragonfly (df-v1.40.1)"), "{said}");
        assert!(said.contains("--!df"), "{said}");
        let keydb = "# Server\r\nredis_version:6.3.4\r\nexecutable:/usr/bin/keydb-server\r\n";
        let said = unsupported(keydb).unwrap_or_default();
        assert!(said.starts_with("the server is KeyDB"), "{said}");
        let old = "# Server\r\nredis_version:6.2.14\r\nredis_mode:standalone\r\n";
        let said = unsupported(old).unwrap_or_default();
        assert!(said.contains("Redis 6.2.14"), "{said}");
        assert!(said.contains("7.0 or newer"), "{said}");
    }

    #[test]
    fn every_node_of_a_cluster_is_read() {
        let reply = Value::Map(vec![
            (
                Value::SimpleString("a:1".into()),
                Value::VerbatimString {
                    format: redis::VerbatimFormat::Text,
                    text: "redis_version:7.0.15\r\n".into(),
                },
            ),
            (
                Value::SimpleString("b:2".into()),
                Value::BulkString(b"redis_version:6.2.1\r\n".to_vec()),
            ),
        ]);
        let mut texts = Vec::new();
        collect_texts(&reply, &mut texts);
        assert_eq!(texts.len(), 2);
        assert!(texts.iter().any(|text| unsupported(text).is_some()));
    }
}
