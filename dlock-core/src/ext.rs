//! For crates built on dlock (dlock-scheduler, the `dlock` CLI, the benchmark, your own): Redis
//! requests on a [`Client`]'s own connection with its command timeout and its error
//! explanations, the keys dlock names, subscriptions on that connection, and what identifies
//! dlock's scripts on the server.
//!
//! Why a module of its own: a crate that keeps state next to dlock's (a run ledger beside a
//! lock, a counter in the lock's cluster slot) should not open a second connection, invent its
//! own timeouts or report a refused command less clearly than dlock does. These functions give
//! it dlock's request path. They are public API with the same semver promise as the rest of
//! the crate; their signatures name [`redis`] types (re-exported as [`crate::redis`]), so a
//! new major version of `redis` is a new major version of dlock-core.
//!
//! What they do not give: atomicity across calls. Each call is one command, one pipeline or
//! one script; a state change that must be atomic belongs in one script ([`invoke`]). A request
//! whose reply was lost (a timeout) may have run: write scripts so that a retry is safe.
//!
//! ```no_run
//! # async fn demo() -> Result<(), dlock_core::Error> {
//! use dlock_core::{ext, redis};
//!
//! let client = dlock_core::Client::open("redis://127.0.0.1:6379/")?;
//! // A key in the cluster slot of the lock `report`: `dlock:{report}:runs`.
//! let runs = format!("{}:runs", ext::base_key(&client, "report")?);
//! let count: u64 = ext::query(&client, redis::cmd("INCR").arg(&runs), "count a run").await?;
//! // The server's clock, for comparisons across processes.
//! let (secs, micros): (u64, u64) = ext::query(&client, &redis::cmd("TIME"), "read the time").await?;
//! println!("run {count} at {secs}.{micros:06}");
//! # Ok(()) }
//! ```

use redis::FromRedisValue;

use crate::client::Client;
use crate::error::Result;
use crate::key::{LockKeys, validate_name};
use crate::scripts::Source;

pub use crate::transport::listen::{Heard, Subscription};

/// Sends one command over `client`'s connection under its command timeout and converts the
/// reply to `T`. `what` says what the request was for ("read the run ledger"); errors carry it.
///
/// On a Sentinel client, a failure that suggests the master moved (a dropped connection, a
/// timeout, `READONLY`) makes the client ask the sentinels again; the failed command itself is
/// not retried (its reply may have been lost after it ran).
///
/// # Errors
/// [`crate::ErrorKind::Timeout`] when no reply came within the command timeout (the command may
/// have run), [`crate::ErrorKind::Connection`] when the server could not be reached (the error
/// names it and, where that explains it, what its port speaks), the kind of a server error
/// (e.g. [`crate::ErrorKind::WrongType`], [`crate::ErrorKind::Permission`]) with the `redis`
/// error as [`std::error::Error::source`]; and an error whose source is the `redis` conversion
/// error when the reply does not convert to `T`.
///
/// # Cancel safety
/// Dropping the future abandons the request: the command may or may not have run, as with a
/// lost reply; the connection stays usable for other requests.
pub async fn query<T: FromRedisValue>(client: &Client, cmd: &redis::Cmd, what: &str) -> Result<T> {
    client.ctx.transport.query(cmd, what).await
}

/// Sends a pipeline over `client`'s connection under its command timeout (one bound for the
/// whole pipeline) and converts its replies to `T`, as [`query`]. A `MULTI`/`EXEC` pipeline
/// ([`redis::Pipeline::atomic`]) runs as one transaction; a plain one does not.
///
/// # Errors
/// As [`query`]; a command of the pipeline that the server refused fails the whole call.
///
/// # Cancel safety
/// As [`query`]: the pipeline may have run in part or in full.
pub async fn query_pipe<T: FromRedisValue>(
    client: &Client,
    pipe: &redis::Pipeline,
    what: &str,
) -> Result<T> {
    client.ctx.transport.query_pipe(pipe, what).await
}

/// Runs a Lua script over `client`'s connection under its command timeout (`EVALSHA`, loading
/// the script first when the server does not know it, e.g. after a restart) and converts its
/// reply to `T`, as [`query`]. Build `invocation` from a [`redis::Script`] kept in a static,
/// so that it is hashed once. On a cluster every key of one invocation must share a hash tag
/// (see [`base_key`]).
///
/// # Errors
/// As [`query`]; a script error (`ERR … user_script …`) is the script's server error.
///
/// # Cancel safety
/// As [`query`]: the script runs atomically on the server, whole or not at all, but the caller
/// may not learn which.
pub async fn invoke<T: FromRedisValue>(
    client: &Client,
    invocation: &redis::ScriptInvocation<'_>,
    what: &str,
) -> Result<T> {
    client.ctx.transport.invoke(invocation, what).await
}

/// The hash-tagged base key of `name` under `client`'s key prefix, `<prefix>{<name>}`: the
/// lock key of the mutex `name`, and the stem of every key that must share its cluster slot
/// (append to it: `<prefix>{<name>}:runs`).
///
/// ```no_run
/// # fn demo() -> Result<(), dlock_core::Error> {
/// let client = dlock_core::Client::open("redis://127.0.0.1:6379/")?;
/// assert_eq!(dlock_core::ext::base_key(&client, "report")?, "dlock:{report}");
/// # Ok(()) }
/// ```
///
/// # Errors
/// [`crate::ErrorKind::InvalidInput`] for a name a lock could not have (empty, longer than
/// [`crate::MAX_NAME_LEN`], or with a character that keys do not allow).
pub fn base_key(client: &Client, name: &str) -> Result<String> {
    validate_name(name)?;
    Ok(LockKeys::new(client.key_prefix(), name).lock.to_string())
}

/// The key of the fence counter that the lock `name` under the key prefix `prefix` shares
/// with every other lock of its cluster slot, `<prefix>fence:{<tag>}` (`<tag>`: a short string
/// of that slot, not the name): for tools and tests that read or watch the counters. dlock
/// alone writes it; raising or deleting it by hand breaks the fencing tokens' order.
///
/// ```
/// # fn demo() -> Result<(), dlock_core::Error> {
/// use dlock_core::ext::fence_counter_key;
///
/// let key = fence_counter_key("dlock:", "order:42")?;
/// assert!(key.starts_with("dlock:fence:{"));
/// # Ok(()) }
/// # demo().unwrap();
/// ```
///
/// # Errors
/// [`crate::ErrorKind::InvalidInput`] for a name a lock could not have, as [`base_key`].
pub fn fence_counter_key(prefix: &str, name: &str) -> Result<String> {
    validate_name(name)?;
    Ok(LockKeys::new(prefix, name).counter().to_string())
}

/// Listens on `channel` over `client`'s own connection (no extra connection): every message
/// published there, and a [`Heard::Gap`] after a disconnection, when messages may have been
/// lost: look again for whatever they announce. Several subscriptions of one channel share one
/// server subscription, which ends with the last one dropped.
///
/// On a cluster this is `SSUBSCRIBE` (sharded pub/sub): publish with [`publish_command`], on a
/// channel that carries the hash tag of the keys it is about.
///
/// # Errors
/// [`crate::ErrorKind::Connection`] or [`crate::ErrorKind::Timeout`] when the server did not
/// confirm the subscription, as [`query`].
///
/// # Cancel safety
/// Cancel safe: a dropped future leaves no listener behind (the server subscription, if it was
/// made, ends in the background).
pub async fn subscribe(client: &Client, channel: &str) -> Result<Subscription> {
    client.ctx.transport.subscribe(channel).await
}

/// The command that reaches the [`subscribe`]rs of a channel on `client`'s kind of deployment:
/// `PUBLISH` on a standalone server (or a Sentinel master), `SPUBLISH` on a cluster, where the
/// message stays on the channel's shard. A script that publishes takes it as an argument, so
/// one script serves both.
pub fn publish_command(client: &Client) -> &'static str {
    client.ctx.transport.slot().publish_command()
}

/// This machine's host name as dlock stores it with a lock and reports it in
/// [`crate::HolderInfo`] (control characters removed; `unknown-host` when it cannot be read).
pub fn host_name() -> String {
    crate::token::host_name()
}

/// One of the Lua scripts dlock-core sends: its file name and the SHA1 the server knows it by
/// (`EVALSHA`), e.g. to attribute `SLOWLOG` or `INFO commandstats` entries to scripts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScriptId {
    /// The script's file name, e.g. `acquire.lua`.
    pub name: &'static str,
    /// The SHA1 of the text the client loads (the file with the shared functions it needs).
    pub sha1: &'static str,
}

/// Every Lua script dlock-core sends, once each. Which scripts there are, and their texts,
/// change between releases: look them up, never store the hashes.
///
/// ```
/// let names: Vec<&str> = dlock_core::ext::scripts().map(|s| s.name).collect();
/// assert!(names.contains(&"acquire.lua"));
/// ```
pub fn scripts() -> impl Iterator<Item = ScriptId> {
    Source::ALL.into_iter().map(|source| ScriptId {
        name: file_name(source),
        sha1: source.script().get_hash(),
    })
}

/// The file a script's own part lives in (`scripts/<file>`).
fn file_name(source: Source) -> &'static str {
    match source {
        Source::Acquire => "acquire.lua",
        Source::Release => "release.lua",
        Source::Fence => "fence.lua",
        Source::FenceRaise => "fence_raise.lua",
        Source::Extend => "extend.lua",
        Source::SharedAcquire => "shared_acquire.lua",
        Source::SharedRelease => "shared_release.lua",
        Source::SharedLimit => "shared_limit.lua",
        Source::RwChange => "rw_change.lua",
        Source::SharedInspect => "shared_inspect.lua",
        Source::Election => "election.lua",
        Source::ElectionRead => "election_read.lua",
        Source::Inspect => "inspect.lua",
        Source::Guarded => "guarded.lua",
        Source::Fenced => "fenced.lua",
        Source::Ask => "ask.lua",
        Source::Rate => "rate.lua",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_script_has_its_own_file_and_hash() {
        let all: Vec<ScriptId> = scripts().collect();
        assert_eq!(all.len(), Source::ALL.len());
        let names: std::collections::BTreeSet<_> = all.iter().map(|s| s.name).collect();
        let hashes: std::collections::BTreeSet<_> = all.iter().map(|s| s.sha1).collect();
        assert_eq!((names.len(), hashes.len()), (all.len(), all.len()));
        // Each name is the file whose whole text the script's contains (`release.lua` has the
        // shared functions at a marker inside it).
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/scripts/");
        for (id, source) in scripts().zip(Source::ALL) {
            assert_eq!(id.sha1.len(), 40, "{id:?}");
            let own = std::fs::read_to_string(format!("{dir}{}", id.name)).unwrap();
            let text = source.text();
            assert!(
                own.split("--@common\n").all(|part| text.contains(part)),
                "{id:?} is not {source:?}'s file"
            );
        }
    }

    #[test]
    fn keys_are_named_as_the_locks_name_them() {
        assert_eq!(
            fence_counter_key("t:", "a").ok().as_deref(),
            Some("t:fence:{a}")
        );
        assert!(fence_counter_key("t:", "").is_err());
    }
}
