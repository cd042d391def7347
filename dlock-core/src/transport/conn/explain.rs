//! Errors a user can act on: a failed request's error names the server it went to
//! (`host:port`), says what that port speaks when plain and TLS are mixed up or it is not Redis
//! (`transport/tls_probe.rs`, at most one probe per address per failure streak: what a probe found is
//! kept until a request succeeds), and a refused permission names the command, key or channel
//! and the key prefix in use.
//!
//! Every explanation is bounded by the failed request's deadline (`by`, the end of its command
//! timeout): what cannot be learnt by then is left out, so that an error is never later than
//! the command timeout for being explained.
//!
//! Addresses are named for standalone and Sentinel clients; a cluster's missing connection is
//! explained from its seed nodes (`ConnSlot::explain`, below, which probes them the same
//! way). Permission errors are explained on every kind of client.

use std::time::{Duration, Instant};

use redis::Value;

use super::{ConnSlot, EXPLANATION_REUSE, Explanation, Factory};
use crate::error::{Error, ErrorKind};
use crate::runtime::lock;
use crate::server_texts::{self, Said};
use crate::transport::tls_probe::{self, Answer, Endpoint};

impl ConnSlot {
    /// Tells the slot the client's key prefix and connect timeout (once, when it is built).
    pub(crate) fn describe_client(&self, key_prefix: &str, connect_timeout: Duration) {
        self.diagnosis.describe(key_prefix, connect_timeout);
    }

    /// A request succeeded: the failure streak, if any, is over (the next failure may probe
    /// again).
    pub(crate) fn succeeded(&self) {
        self.diagnosis.succeeded();
    }

    /// The server a standalone or Sentinel client's requests go to now (`None` for a cluster,
    /// a Unix socket, or a Sentinel client that knows no master yet).
    fn endpoint(&self) -> Option<Endpoint> {
        match &self.factory {
            Factory::Single(client, _) => Endpoint::of(client.get_connection_info().addr()),
            Factory::Sentinel(sentinel) => lock(&sentinel.current)
                .as_ref()
                .and_then(|master| Endpoint::of(master.info.addr())),
            Factory::Cluster(..) => None,
        }
    }

    /// `request` bounded by `limit`, as `tokio::time::timeout` bounds it (the same deadline,
    /// one timer at a time), with one addition: a request still unanswered shortly before its
    /// deadline ([`tls_probe::PROBE_CAP`] before, at most half its time) has its server's port
    /// probed then, in the background, so that the error of its timeout — which waits for no
    /// probe — can say what the port speaks (see `transport/tls_probe.rs`). A cluster client names no
    /// server: nothing is probed.
    ///
    /// # Cancel safety
    /// As `request`'s: it is only awaited.
    pub(crate) async fn within<F: Future>(
        &self,
        limit: Duration,
        request: F,
    ) -> Result<F::Output, tokio::time::error::Elapsed> {
        let deadline = tokio::time::Instant::now() + limit;
        let lead = tls_probe::PROBE_CAP.min(limit / 2);
        let mut request = std::pin::pin!(request);
        if let Ok(output) = tokio::time::timeout_at(deadline - lead, request.as_mut()).await {
            return Ok(output);
        }
        if let Some(endpoint) = self.endpoint() {
            self.diagnosis.probe_ahead(&endpoint);
        }
        tokio::time::timeout_at(deadline, request).await
    }

    /// What `endpoint` answers to a plain `PING` (probed once per failure streak), as far as
    /// it is known by `by`.
    ///
    /// # Cancel safety
    /// Cancel safe: the probe runs on in the background.
    pub(super) async fn answer(&self, endpoint: &Endpoint, by: Instant) -> Answer {
        self.diagnosis.answer(endpoint, by).await
    }

    /// `error`, a timed-out request, with the server it waited for and what that port speaks
    /// when it is not what the URL says — as far as an earlier probe of this failure streak
    /// found: the request's command timeout is spent, so this one waits for no probe (it
    /// starts one, for the next error of the streak).
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub(crate) async fn explain_timeout(&self, error: Error) -> Error {
        let Some(endpoint) = self.endpoint() else {
            return error;
        };
        let answer = self.answer(&endpoint, Instant::now()).await;
        match tls_probe::hint(&endpoint, &answer) {
            Some(hint) => error.with_hint(&hint),
            None => error.with_hint(&format!("the server asked is {}", endpoint.addr())),
        }
    }

    /// `error` of a request (`context`, on the lock `name`, empty when none) as a dlock error:
    /// on a standalone or Sentinel client a connection error names `host:port` (and what the
    /// port speaks, when that explains it by `by`) and a reply that is not RESP names the
    /// address; on every client a refused permission names what is missing. Anything else as
    /// [`Error::from_redis`] puts it.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads (a probe, or a `TIME` on the client's connection).
    pub(super) async fn explain_standalone(
        &self,
        context: &str,
        name: &str,
        error: redis::RedisError,
        by: Instant,
    ) -> Error {
        let plain = Error::from_redis(context, error.clone());
        match plain.kind() {
            ErrorKind::Permission => {
                self.explain_permission(context, name, error, plain, by)
                    .await
            }
            ErrorKind::Connection | ErrorKind::Protocol => {
                let Some(endpoint) = self.endpoint() else {
                    return plain;
                };
                if plain.kind() == ErrorKind::Protocol && error.kind() != redis::ErrorKind::Parse {
                    return plain;
                }
                self.explain_unreachable(context, &endpoint, error, plain.kind(), by)
                    .await
            }
            _ => plain,
        }
    }

    /// A connection error or an answer that is not RESP, at `endpoint`, explained by what its
    /// port speaks as far as that is known by `by`.
    async fn explain_unreachable(
        &self,
        context: &str,
        endpoint: &Endpoint,
        error: redis::RedisError,
        kind: ErrorKind,
        by: Instant,
    ) -> Error {
        let addr = endpoint.addr();
        let why = if error.is_connection_refusal() {
            // Nothing listens there: no probe could tell more.
            format!(
                "cannot connect to {addr} ({error}); is Redis running there? the client \
                 reconnects on the next request"
            )
        } else {
            let answer = self.answer(endpoint, by).await;
            match (tls_probe::hint(endpoint, &answer), kind) {
                (Some(hint), _) => format!("{hint} ({error})"),
                (None, ErrorKind::Protocol) => format!(
                    "{addr} does not speak the Redis protocol, so it is not Redis ({error}); \
                     check the host and port of the Redis URL"
                ),
                (None, _) => format!(
                    "the connection to {addr} failed ({error}); the client reconnects on the \
                     next request"
                ),
            }
        };
        Error::explained(context, kind, &why, error)
    }

    /// A refused permission: what was refused (the command, or the key or channel of lock
    /// `name` under the client's key prefix) and the right to grant.
    async fn explain_permission(
        &self,
        context: &str,
        name: &str,
        error: redis::RedisError,
        plain: Error,
        by: Instant,
    ) -> Error {
        let prefix = self.diagnosis.key_prefix();
        let text = error.to_string();
        let what = match refusal(&text) {
            Refusal::Command(command) => format!(
                "the Redis user may not run `{upper}`: grant it `+{command}` (the guide's ACL \
                 lines, \"Production Redis: TLS and ACL\" in dlock_core::_guide::production, list every right dlock needs); on a \
                 managed service this may be its allow-list rather than an ACL: a service with \
                 a fixed list of commands answers `NOPERM` for `{upper}` if it does not offer it",
                upper = command.to_uppercase()
            ),
            Refusal::InScript => match self.may_run_time(by).await {
                Some(false) => "the command refused is `TIME` (dlock's scripts read the \
                                server clock): grant the user `+time`, as the guide's ACL \
                                lines do (\"Production Redis: TLS and ACL\" in dlock_core::_guide::production)"
                    .to_owned(),
                _ => "a command a dlock script runs was refused: grant the rights \
                      the guide's ACL lines list (\"Production Redis: TLS and ACL\" in dlock_core::_guide::production)"
                    .to_owned(),
            },
            Refusal::Key => key_refusal(prefix, name, self.username().as_deref()),
            Refusal::Channel => {
                let channel = lock_key(prefix, name);
                format!(
                    "the Redis user's ACL allows no channel `{channel}` (this client's key \
                     prefix is `{prefix}`; its wake channels are named like its keys): grant \
                     `&{prefix}*`"
                )
            }
            Refusal::Other => return plain,
        };
        Error::explained(
            context,
            ErrorKind::Permission,
            &format!("{text}; {what}"),
            error,
        )
    }

    /// Whether the user may run `TIME` (`None` when the question could not be asked by `by`):
    /// a script that was refused a command is most often refused `TIME`, which the error does
    /// not name.
    async fn may_run_time(&self, by: Instant) -> Option<bool> {
        let (mut conn, _) = self.conn().ok()?;
        let limit = self
            .diagnosis
            .probe_limit()
            .min(by.saturating_duration_since(Instant::now()));
        let asked = tokio::time::timeout(limit, redis::cmd("TIME").query_async::<Value>(&mut conn))
            .await
            .ok()?;
        match asked {
            Ok(_) => Some(true),
            Err(e) if e.code() == Some("NOPERM") => Some(false),
            Err(_) => None,
        }
    }

    /// The user name the client authenticates as, if the URL gives one.
    fn username(&self) -> Option<String> {
        match &self.factory {
            Factory::Single(client, _) => client
                .get_connection_info()
                .redis_settings()
                .username()
                .map(str::to_owned),
            Factory::Cluster(_, seeds) => seeds
                .first()
                .and_then(|seed| seed.redis_settings().username().map(str::to_owned)),
            Factory::Sentinel(sentinel) => lock(&sentinel.current)
                .as_ref()
                .and_then(|master| master.info.redis_settings().username().map(str::to_owned)),
        }
    }
}

/// The lock key of `name` under `prefix` (without the kind's suffix): `<prefix>{<name>}`.
fn lock_key(prefix: &str, name: &str) -> String {
    if name.is_empty() {
        format!("{prefix}…")
    } else {
        format!("{prefix}{{{name}}}")
    }
}

/// What to say about a refused key of lock `name` under `prefix`, for the user `username`.
fn key_refusal(prefix: &str, name: &str, username: Option<&str>) -> String {
    let key = lock_key(prefix, name);
    // The README gives each application a user named like its key prefix (`billing` with
    // `~billing:*`): a client built without `.key_prefix(…)` uses `dlock:` instead.
    let guess = username
        .filter(|user| !user.is_empty() && *user != "default" && !prefix.starts_with(*user))
        .map(|user| format!("; did you mean `.key_prefix(\"{user}:\")`?"))
        .unwrap_or_default();
    format!(
        "the Redis user's ACL allows no key `{key}`: this client's key prefix is `{prefix}`, \
         so its keys are `{prefix}*`; build the client with the prefix the user's key pattern \
         allows (`.key_prefix(…)`), or grant `~{prefix}*` and `&{prefix}*`{guess}"
    )
}

/// What a permission error refused.
#[derive(Debug, PartialEq, Eq)]
enum Refusal {
    /// A command, lower case as the ACL spells it (`time`, `cluster|slots`).
    Command(String),
    /// A command inside a script; the server does not say which.
    InScript,
    Key,
    Channel,
    /// A refusal this does not recognise (the server's text stays as it is).
    Other,
}

/// Reads a refusal's text: `NOPERM this user has no permissions to run the 'time' command`
/// (Valkey: `NOPERM User u has no permissions to run …`, and inside a script `ACL failure in
/// script: User u has no permissions to run the 'set' command`), `… to access one of the keys
/// used as arguments` / `No permissions to access a key`, the same for channels, and a
/// refusal inside a script as `server_texts.rs` reads it for each server (Redis 7.0 does not
/// name the command).
fn refusal(text: &str) -> Refusal {
    let lower = text.to_lowercase();
    if let Some(rest) = lower.split("permissions to run the '").nth(1)
        && let Some((command, _)) = rest.split_once('\'')
    {
        return Refusal::Command(command.to_owned());
    }
    // Inside a script the refusal has no code, and each server words it its own way.
    match server_texts::read(text) {
        Some(Said::ScriptCommand) => return Refusal::InScript,
        Some(Said::ScriptKey) => return Refusal::Key,
        Some(Said::ScriptChannel) => return Refusal::Channel,
        Some(Said::ClusterDisabled) | None => {}
    }
    if lower.contains("one of the keys") || lower.contains("access a key") {
        return Refusal::Key;
    }
    if lower.contains("one of the channels") || lower.contains("access a channel") {
        return Refusal::Channel;
    }
    Refusal::Other
}

impl ConnSlot {
    /// `error` (of a request described by `context`, on the lock `name` or `""`) as a dlock
    /// error that names what the user can act on.
    ///
    /// A standalone or Sentinel client's error names the server (`host:port`), what its port
    /// speaks when plain and TLS are mixed up or it is not Redis, and what a refused permission
    /// lacked (see `transport/conn/explain.rs`). The cluster client only says "no connections found"
    /// when it could not reach any node; this asks the seed nodes one by one and names one
    /// that does not speak the Redis protocol, is a standalone server or refuses the user
    /// (ACL, credentials), or says why none could be reached (each seed's address, and what
    /// its port speaks when that explains it). A refused permission on a cluster is explained
    /// as on one server; any other cluster error, or a seed that answers as a cluster node, is
    /// reported as the `redis` crate put it.
    ///
    /// Everything it learns, it learns by `by`, the failed request's deadline (the end of its
    /// command timeout): the error is never later for being explained. What is not known by
    /// then is left out (a seed not asked is named so; a port probe goes on in the background,
    /// for the next error of the failure streak).
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub(crate) async fn explain(
        &self,
        context: &str,
        name: &str,
        error: redis::RedisError,
        by: Instant,
    ) -> Error {
        let Factory::Cluster(_, seeds) = &self.factory else {
            return self.explain_standalone(context, name, error, by).await;
        };
        if error.kind() != redis::ErrorKind::ClusterConnectionNotFound {
            // A refused permission is explained as on one server (no address to name here).
            return self.explain_standalone(context, name, error, by).await;
        }
        let cached = lock(&self.explained)
            .as_ref()
            .filter(|(at, _)| at.elapsed() < EXPLANATION_REUSE)
            .map(|(_, found)| found.clone());
        let found = match cached {
            Some(found) => found,
            None => {
                let mut complete = true;
                let found = self.explain_seeds(seeds, by, &mut complete).await;
                if complete {
                    *lock(&self.explained) = Some((Instant::now(), found.clone()));
                }
                found
            }
        };
        match found {
            Some((kind, why)) => Error::explained(context, kind, &why, error),
            None => Error::from_redis(context, error),
        }
    }

    /// Asks each seed node, as a standalone server, what it is, by `by`. `None` once one
    /// answers as a cluster node. A seed that could not be asked is named with its reason, and
    /// with what its port speaks when plain and TLS are mixed up or it is not Redis (one probe
    /// per seed per failure streak, as far as it answered by `by`). `complete` is cleared when
    /// `by` came before a seed could be asked (such an explanation is not kept for the next
    /// error).
    async fn explain_seeds(
        &self,
        seeds: &[redis::ConnectionInfo],
        by: Instant,
        complete: &mut bool,
    ) -> Explanation {
        let mut unreachable = Vec::new();
        for seed in seeds {
            let addr = seed.addr().to_string();
            let timeout = by.saturating_duration_since(Instant::now());
            if timeout.is_zero() {
                unreachable.push(format!("{addr}: not asked within the command timeout"));
                *complete = false;
                continue;
            }
            let asked = tokio::time::timeout(timeout, async {
                let client = redis::Client::open(seed.clone())?;
                let mut con = client.get_multiplexed_async_connection().await?;
                // The command the cluster client learns the topology with, which the README's ACL
                // for a cluster user allows (`+cluster|slots`).
                redis::cmd("CLUSTER")
                    .arg("SLOTS")
                    .query_async::<Value>(&mut con)
                    .await
            })
            .await;
            match asked {
                Ok(Ok(_)) => return None,
                Ok(Err(e)) if e.code() == Some("NOPERM") => {
                    return Some((
                        ErrorKind::Permission,
                        format!(
                            "the cluster node {addr} refuses this user the cluster topology ({e}); \
                         a cluster user needs `+cluster|slots +cluster|shards` besides the \
                         rights listed in the guide (\"Production Redis: TLS and ACL\" in dlock_core::_guide::production)"
                        ),
                    ));
                }
                Ok(Err(e)) if crate::error::is_authentication(&e) => {
                    return Some((
                        ErrorKind::Authentication,
                        format!(
                            "the cluster node {addr} refuses the credentials ({e}); check the user \
                         and password of the node URLs"
                        ),
                    ));
                }
                Ok(Err(e)) if e.kind() == redis::ErrorKind::Parse => {
                    return Some((
                        ErrorKind::Protocol,
                        format!(
                            "the cluster node {addr} does not speak the Redis protocol ({e}); check \
                         the host and port of the node URLs"
                        ),
                    ));
                }
                Ok(Err(e)) if server_texts::read(&e.to_string()) == Some(Said::ClusterDisabled) => {
                    return Some((
                        ErrorKind::InvalidInput,
                        format!(
                            "{addr} is a standalone Redis server, not a cluster node (cluster \
                         support disabled); build the client with `Client::builder(url)` for \
                         it, or give the nodes of a Redis Cluster"
                        ),
                    ));
                }
                Ok(Err(e)) if e.is_connection_refusal() => {
                    unreachable.push(format!("{addr}: {e}, is Redis running there?"));
                }
                Ok(Err(e)) => {
                    unreachable.push(self.seed_failure(seed, format!("{addr}: {e}"), by).await)
                }
                Err(_) => {
                    let why = format!("{addr}: no answer within {timeout:?}");
                    unreachable.push(self.seed_failure(seed, why, by).await);
                }
            }
        }
        Some((
            ErrorKind::Connection,
            format!(
                "no cluster node could be reached ({}); the client reconnects on the next request",
                unreachable.join("; ")
            ),
        ))
    }

    /// `why` a seed could not be asked, with what its port speaks when that explains it (as
    /// far as it is known by `by`).
    async fn seed_failure(&self, seed: &redis::ConnectionInfo, why: String, by: Instant) -> String {
        let Some(endpoint) = crate::transport::tls_probe::Endpoint::of(seed.addr()) else {
            return why;
        };
        match crate::transport::tls_probe::hint(&endpoint, &self.answer(&endpoint, by).await) {
            Some(hint) => format!("{why}: {hint}"),
            None => why,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_read_from_the_servers_text() {
        assert_eq!(
            refusal("NOPERM: this user has no permissions to run the 'time' command"),
            Refusal::Command("time".into())
        );
        assert_eq!(
            refusal(
                "ERR The user executing the script can't run this command or subcommand \
                 script: 104ae65d, on @user_script:78."
            ),
            Refusal::InScript
        );
        assert_eq!(
            refusal(
                "NOPERM: this user has no permissions to access one of the keys used as arguments"
            ),
            Refusal::Key
        );
        assert_eq!(
            refusal(
                "ERR The user executing the script can't access at least one of the keys \
                 mentioned in the command arguments"
            ),
            Refusal::Key
        );
        assert_eq!(
            refusal(
                "NOPERM: this user has no permissions to access one of the channels used as arguments"
            ),
            Refusal::Channel
        );
        assert_eq!(
            refusal(
                "ERR ACL failure in script: User u has no permissions to run the 'set' command \
                 script: ee5bed0f, on @user_script:1."
            ),
            Refusal::Command("set".into())
        );
        assert_eq!(
            refusal(
                "ERR ACL failure in script: No permissions to access a key script: on @user_script:1."
            ),
            Refusal::Key
        );
        assert_eq!(
            refusal(
                "ERR The user executing the script can't publish to the channel mentioned in \
                 the command script: 32b731ac, on @user_script:1."
            ),
            Refusal::Channel
        );
        assert_eq!(
            refusal("WRONGPASS invalid username-password pair"),
            Refusal::Other
        );
    }

    #[test]
    fn a_refused_key_names_the_prefix_in_use_and_guesses_the_users() {
        let said = key_refusal("dlock:", "x", Some("billing"));
        assert!(said.contains("`dlock:{x}`"), "{said}");
        assert!(said.contains("key prefix is `dlock:`"), "{said}");
        assert!(said.contains(".key_prefix(\"billing:\")"), "{said}");
        let said = key_refusal("billing:", "x", Some("billing"));
        assert!(!said.contains("did you mean"), "{said}");
    }
}
