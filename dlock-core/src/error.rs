//! The one error type of dlock: an opaque [`Error`] that carries an [`ErrorKind`], a message that
//! says what went wrong and how to fix it, and (where there is one) the Redis error as `source()`.
//!
//! Expected outcomes are not errors: a lock held by someone else is `Ok(None)` from `try_acquire`,
//! and a release that finds the lease already gone is a [`crate::ReleaseOutcome`] value.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

/// The error code of a script's reply when a lock key holds data dlock did not write (see
/// `unusable` in `scripts/common.lua`).
pub(crate) const FOREIGN_CODE: &str = "DLOCKFOREIGN";
/// The error code of a shared lock whose stored limit differs from the caller's
/// (`scripts/shared_acquire.lua`).
pub(crate) const LIMIT_CODE: &str = "DLOCKLIMIT";
/// The error code of a shared-lock request heavier than the limit in force, one set by
/// `Semaphore::set_limit` (`scripts/shared_acquire.lua`).
pub(crate) const WEIGHT_CODE: &str = "DLOCKWEIGHT";

/// What kind of failure an [`Error`] is. Each variant says when it happens and what to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// An argument was rejected before anything was sent to Redis: an empty or malformed lock
    /// name, a zero or absurd TTL, a bad URL or option. The message names the argument and the
    /// accepted range. Fix the caller; retrying cannot help. Also an option the server cannot
    /// honour, found on first use (nothing is held then): [`crate::Durability::Aof`] on a
    /// server without the `WAITAOF` command (asked with `COMMAND INFO`).
    InvalidInput,
    /// Redis could not be reached, refused the connection, or the connection dropped while a
    /// request was in flight. The client reconnects by itself on the next request; retry later.
    /// A request that was in flight may still have taken effect: see [`Error::may_have_taken_effect`].
    Connection,
    /// Redis did not answer within the configured command timeout
    /// ([`crate::ClientBuilder::command_timeout`]). The request may still have taken effect.
    Timeout,
    /// The lock stayed held by another owner for the whole wait given to `acquire`. Nothing is
    /// held and nothing is left queued. Retry later, wait longer, or report "busy" upstream.
    Busy,
    /// A key that dlock uses holds data dlock did not write — a value of another Redis type, or
    /// a string in another format, or a lock without expiry — so another program writes the same
    /// key. dlock never modifies such a key; the message names it. Choose another lock name or
    /// key prefix ([`crate::ClientBuilder::key_prefix`]), or delete the key if it is debris.
    WrongType,
    /// Redis answered something dlock does not understand: usually a server older than dlock
    /// supports (Redis 7.0 or newer is required) or a key modified by another program. Also
    /// [`crate::ClientBuilder::connect`]'s refusal of a server dlock cannot run on (Dragonfly,
    /// KeyDB, Redis before 7.0), whose message names the server and the reason.
    Protocol,
    /// Any other error reported by the Redis server (out of memory, a cluster that is down …).
    /// The message carries the server's text.
    Redis,
    /// A dlock call that needs a Tokio runtime was made outside one. Call it from within a
    /// runtime (for example under `#[tokio::main]`).
    NoRuntime,
    /// The guard's lease is gone: it expired, was taken over by another owner, or was removed by
    /// an operator. The protected work must stop; anything it writes may race another holder.
    LeaseLost,
    /// A reentrancy rule was broken: code running inside the body that holds a lock acquired it
    /// again through a non-reentrant handle (waiting would never end), nested it deeper than 64
    /// levels, or released an outer guard while a nested one was still held. A bug in the
    /// caller: fix the nesting.
    Reentrancy,
    /// The operating system failed a request dlock made (its random number generator). Nothing
    /// was sent to Redis; retrying may help if the failure was transient.
    System,
    /// The client was shut down ([`crate::Client::shutdown`]): it acquires nothing any more.
    /// Build a new client if the process goes on locking.
    Shutdown,
    /// The lock was granted, but fewer replicas acknowledged the grant (or fsynced it to their
    /// AOF) than [`crate::MutexOptions::durability`] asks for, within its timeout. The lock was
    /// released again (owner-checked): a failover could have lost it unnoticed. The message
    /// says how many acknowledged, out of how many asked, within what timeout. Check the
    /// replicas (`INFO replication` on the master: a replica down or lagging), give them
    /// longer, or ask for fewer; retrying helps once they are back.
    NotDurable,
    /// The Redis user may not do what dlock asked: its ACL lacks a command, the key or the
    /// channel (`NOPERM`, or the server's text for a refusal inside a script), or a managed
    /// service with a fixed list of commands (an allow-list) does not offer the command, which
    /// it also answers with `NOPERM`. Nothing was changed. The message carries the server's text, which
    /// names the command, key or channel; give the user the rights the README lists
    /// ("Production Redis: TLS and ACL"), with the key pattern `~<prefix>*` and the channel
    /// pattern `&<prefix>*` of the client's key prefix. Retrying cannot help. (A refused user
    /// name or password is [`ErrorKind::Authentication`].)
    Permission,
    /// Redis refused to log the client in: the user name or password is wrong, the user does
    /// not exist or is disabled (`WRONGPASS`), or the server requires a password and none was
    /// given (`NOAUTH`). Nothing was sent but the log-in. Check the user and password of the
    /// URL (`redis://user:password@host:port/`; for Sentinel, [`crate::ClientBuilder::node_password`]
    /// and the sentinels' URLs) against the server's `requirepass` or `ACL SETUSER` line.
    /// Retrying with the same credentials cannot help.
    Authentication,
    /// A rate limiter did not admit the call: its cells conform only later than the call was
    /// willing to wait ([`crate::RateLimiter::acquire_timeout`], `#[rate_limited]`). Nothing
    /// was reserved. [`Error::retry_after`] says how long until they would conform (for an
    /// HTTP `Retry-After`); retry then, or report "too many requests" upstream.
    RateLimited,
}

impl ErrorKind {
    fn as_str(self) -> &'static str {
        match self {
            Self::InvalidInput => "invalid input",
            Self::Connection => "connection error",
            Self::Timeout => "timed out",
            Self::Busy => "lock busy",
            Self::WrongType => "wrong key type",
            Self::Protocol => "unexpected reply",
            Self::Redis => "redis error",
            Self::NoRuntime => "no tokio runtime",
            Self::LeaseLost => "lease lost",
            Self::Reentrancy => "reentrancy misuse",
            Self::System => "system error",
            Self::Shutdown => "client shut down",
            Self::NotDurable => "not durable",
            Self::Permission => "permission denied",
            Self::Authentication => "authentication failed",
            Self::RateLimited => "rate limited",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of every fallible dlock operation.
///
/// Opaque on purpose: match on [`Error::kind`] or use the predicates ([`Error::is_busy`],
/// [`Error::is_timeout`] …). The Redis error, when there is one, is available through
/// [`std::error::Error::source`].
///
/// ```
/// use dlock_core::{Error, ErrorKind};
///
/// fn describe(err: &Error) -> &'static str {
///     match err.kind() {
///         ErrorKind::Busy => "someone else holds it",
///         ErrorKind::Connection | ErrorKind::Timeout => "redis trouble, retry later",
///         _ => "bug or misconfiguration",
///     }
/// }
/// # let _ = describe;
/// ```
///
/// # With dlock-scheduler
/// `dlock_scheduler::Error` converts from this error (`impl From<dlock_core::Error> for
/// dlock_scheduler::Error`; this error stays whole as its `source()`, and its `as_core()` gives
/// it back). A function that uses `?` on calls of both crates returns
/// `Result<T, dlock_scheduler::Error>` and needs no conversion of its own; an application's
/// own error type implements `From<dlock_scheduler::Error>` and joins this one with one line:
///
/// ```text
/// impl From<dlock_core::Error> for AppError {
///     fn from(e: dlock_core::Error) -> Self { dlock_scheduler::Error::from(e).into() }
/// }
/// ```
/// (dlock-scheduler's `Error` docs compile and run this.)
pub struct Error {
    kind: ErrorKind,
    message: Cow<'static, str>,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<Cow<'static, str>>) -> Self {
        Self {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// `err` of the `redis` crate, explained better than it explains itself (`why`, of kind
    /// `kind`); `err` stays the source.
    pub(crate) fn explained(
        context: &str,
        kind: ErrorKind,
        why: &str,
        err: redis::RedisError,
    ) -> Self {
        Self {
            kind,
            message: format!("{context}: {why}").into(),
            source: Some(Box::new(err)),
        }
    }

    /// This error with `hint` appended to its message (same kind and source).
    pub(crate) fn with_hint(mut self, hint: &str) -> Self {
        self.message = format!("{}; {hint}", self.message).into();
        self
    }

    pub(crate) fn invalid(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(ErrorKind::InvalidInput, message)
    }

    pub(crate) fn protocol(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(ErrorKind::Protocol, message)
    }

    pub(crate) fn timeout(what: &str, after: Duration) -> Self {
        Self::new(
            ErrorKind::Timeout,
            format!(
                "{what}: Redis did not answer within the command timeout of {after:?}; \
                 the request may still have taken effect"
            ),
        )
    }

    pub(crate) fn no_runtime(what: &str) -> Self {
        Self::new(
            ErrorKind::NoRuntime,
            format!("{what} must be called from within a Tokio runtime"),
        )
    }

    /// A lock key that holds data this dlock cannot take or change (`why` says what): never
    /// modified, reported by name.
    pub(crate) fn foreign(context: &str, key: &str, why: &str) -> Self {
        Self::new(
            ErrorKind::WrongType,
            format!(
                "{context}: the key `{key}` {why}; another program writes it, and dlock leaves it \
                 untouched. Choose another lock name or key prefix, or delete the key if it is \
                 debris"
            ),
        )
    }

    /// Classifies an error of the `redis` crate, keeping it as the source.
    pub(crate) fn from_redis(context: &str, err: redis::RedisError) -> Self {
        if err.code() == Some(FOREIGN_CODE) {
            // "DLOCKFOREIGN <key> <why>" from a script: name the key, say what to do.
            let detail = err.detail().unwrap_or_default().to_owned();
            let (key, why) = detail.split_once(' ').unwrap_or((&detail, ""));
            let mut error = Self::foreign(context, key, why);
            error.source = Some(Box::new(err));
            return error;
        }
        if err.code() == Some(LIMIT_CODE) {
            // "DLOCKLIMIT <key> <stored limit>" from shared_acquire.lua.
            let detail = err.detail().unwrap_or_default();
            let stored = detail.split(' ').nth(1).unwrap_or("another number of");
            return Self {
                kind: ErrorKind::InvalidInput,
                message: format!(
                    "{context}: the semaphore exists in Redis with a limit of {stored} permits, \
                     and this handle was built with another; every process must use the same \
                     limit (a limit stored by a handle is forgotten once nobody holds or waits; \
                     `Semaphore::set_limit` sets one that every handle follows)"
                )
                .into(),
                source: Some(Box::new(err)),
            };
        }
        if err.code() == Some(WEIGHT_CODE) {
            // "DLOCKWEIGHT <key> <weight> <limit>" from shared_acquire.lua.
            let detail = err.detail().unwrap_or_default();
            let mut parts = detail.split(' ').skip(1);
            let weight = parts.next().unwrap_or("this many");
            let limit = parts.next().unwrap_or("fewer");
            return Self {
                kind: ErrorKind::InvalidInput,
                message: format!(
                    "{context}: this request asks for {weight} permits, but the semaphore's limit \
                     in Redis is {limit} (set with `Semaphore::set_limit`, which every handle \
                     follows), so it could never be served; ask for at most {limit}, or raise \
                     the limit"
                )
                .into(),
                source: Some(Box::new(err)),
            };
        }
        if err.kind() == redis::ErrorKind::Parse {
            // Redis never sends what the RESP parser rejects: something else answered.
            return Self {
                kind: ErrorKind::Protocol,
                message: format!(
                    "{context}: the server at this address does not speak the Redis protocol \
                     ({err}); check the host and port of the Redis URL"
                )
                .into(),
                source: Some(Box::new(err)),
            };
        }
        let kind = classify(&err);
        let hint = match kind {
            ErrorKind::WrongType => {
                "; a key dlock uses holds another Redis type: another program writes it, \
                 choose another lock name or key prefix"
            }
            ErrorKind::Connection => "; the client reconnects on the next request",
            ErrorKind::Authentication => {
                "; Redis refused the user name or password (or none was given): check the user \
                 and password in the Redis URL against the server's requirepass or ACL user"
            }
            ErrorKind::Permission => {
                "; the Redis user's ACL does not allow it, or the service offers a fixed list \
                 of commands (an allow-list) without it: grant the rights listed in the guide \
                 (\"Production Redis: TLS and ACL\" in dlock_core::_guide::production), with the key pattern ~<prefix>* and the \
                 channel pattern &<prefix>*, or check the service's supported commands"
            }
            ErrorKind::Redis if refused_in_script_unknown(&err) => {
                "; a command inside a dlock script was refused with a text dlock does not \
                 know: maybe an ACL or an allow-list refused this (grant the rights listed in \
                 the guide, \"Production Redis: TLS and ACL\" in dlock_core::_guide::production, or check the service's \
                 supported commands)"
            }
            _ => "",
        };
        Self {
            kind,
            message: format!("{context}: {err}{hint}").into(),
            source: Some(Box::new(err)),
        }
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The lock stayed held by another owner for the whole wait.
    pub fn is_busy(&self) -> bool {
        self.kind == ErrorKind::Busy
    }

    /// Redis did not answer within the command timeout.
    pub fn is_timeout(&self) -> bool {
        self.kind == ErrorKind::Timeout
    }

    /// Redis could not be reached or the connection dropped.
    pub fn is_connection(&self) -> bool {
        self.kind == ErrorKind::Connection
    }

    /// An argument was rejected before anything was sent.
    pub fn is_invalid_input(&self) -> bool {
        self.kind == ErrorKind::InvalidInput
    }

    /// The guard's lease is gone (expired, taken over, or removed by an operator).
    pub fn is_lease_lost(&self) -> bool {
        self.kind == ErrorKind::LeaseLost
    }

    /// The lock was granted but not acknowledged by the replicas asked for (and released
    /// again); see [`ErrorKind::NotDurable`].
    pub fn is_not_durable(&self) -> bool {
        self.kind == ErrorKind::NotDurable
    }

    /// A rate limiter did not admit the call within its wait; see [`ErrorKind::RateLimited`].
    pub fn is_rate_limited(&self) -> bool {
        self.kind == ErrorKind::RateLimited
    }

    /// For [`ErrorKind::RateLimited`]: how long, from the server's decision, until the cells
    /// would conform if nobody else takes them first. `None` for every other kind.
    ///
    /// ```
    /// fn status(err: &dlock_core::Error) -> (u16, Option<u64>) {
    ///     match err.retry_after() {
    ///         Some(wait) => (429, Some(wait.as_secs() + 1)), // Retry-After, in whole seconds
    ///         None => (503, None),
    ///     }
    /// }
    /// # let _ = status;
    /// ```
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        if self.kind != ErrorKind::RateLimited {
            return None;
        }
        self.source
            .as_deref()
            .and_then(|source| source.downcast_ref::<RetryAfter>())
            .map(|retry| retry.0)
    }

    /// [`ErrorKind::RateLimited`], with the wait that [`Error::retry_after`] returns.
    pub(crate) fn rate_limited(message: String, wait: std::time::Duration) -> Self {
        Self {
            kind: ErrorKind::RateLimited,
            message: message.into(),
            source: Some(Box::new(RetryAfter(wait))),
        }
    }

    /// A copy with the same kind and message, without the source (one failure reported to
    /// several callers).
    pub(crate) fn duplicate(&self) -> Self {
        Self::new(self.kind, self.message.to_string())
    }

    /// Whether the failed request may nevertheless have run on the server (its reply was lost or
    /// late). dlock's scripts are safe to retry and dlock cleans up after its own lost acquire
    /// requests in the background, so this is informational.
    pub fn may_have_taken_effect(&self) -> bool {
        matches!(self.kind, ErrorKind::Timeout | ErrorKind::Connection)
    }
}

/// The source of a [`ErrorKind::RateLimited`] error: the wait until the cells conform.
#[derive(Debug)]
struct RetryAfter(std::time::Duration);

impl fmt::Display for RetryAfter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "retry in {}", wait_text(self.0))
    }
}

impl std::error::Error for RetryAfter {}

/// A wait as a person reads it: `250 ms` below a second (rounded up: retrying earlier is
/// refused), `19.98 s` below an hour, `2 h 5 min` beyond.
pub(crate) fn wait_text(wait: Duration) -> String {
    if wait < Duration::from_secs(1) {
        return format!("{} ms", wait.as_micros().div_ceil(1_000));
    }
    if wait < Duration::from_secs(3_600) {
        // Hundredths, rounded up for the same reason.
        let hundredths = wait.as_micros().div_ceil(10_000);
        return format!("{}.{:02} s", hundredths / 100, hundredths % 100);
    }
    let minutes = wait.as_secs().div_ceil(60);
    format!("{} h {} min", minutes / 60, minutes % 60)
}

/// A bare `ERR` raised by a command inside a script whose text no row of `server_texts.rs`
/// knows: it may be a refusal of a server or service not tested (hence the hint), or any other
/// error of that command.
fn refused_in_script_unknown(err: &redis::RedisError) -> bool {
    err.code() == Some("ERR") && err.to_string().contains(crate::server_texts::SCRIPT_MARK)
}

/// A `MULTI` the server discarded because the user's ACL refused one of its commands when it
/// was queued (the `redis` crate reports "Transaction aborted" with each refusal inside).
fn denied_in_a_transaction(err: &redis::RedisError) -> bool {
    let text = err.to_string();
    text.contains("Transaction aborted") && (text.contains("NoPerm") || text.contains("NOPERM"))
}

/// The server refused the log-in: a wrong user name or password (`WRONGPASS`), or no password
/// where one is required (`NOAUTH`).
pub(crate) fn is_authentication(err: &redis::RedisError) -> bool {
    matches!(err.code(), Some("WRONGPASS" | "NOAUTH"))
        || err.kind() == redis::ErrorKind::AuthenticationFailed
}

fn classify(err: &redis::RedisError) -> ErrorKind {
    if err.is_timeout() {
        return ErrorKind::Timeout;
    }
    // Before the connection kinds: the `redis` crate counts a refused log-in as unrecoverable.
    if is_authentication(err) {
        return ErrorKind::Authentication;
    }
    if err.is_io_error()
        || err.is_connection_refusal()
        || err.is_connection_dropped()
        || err.is_unrecoverable_error()
    {
        return ErrorKind::Connection;
    }
    let code = err.code().unwrap_or_default();
    // Coded where the server sends a code; a refusal inside a script has none, and its text
    // differs between servers (`server_texts.rs`, one row per flavour).
    if code == "NOPERM"
        || crate::server_texts::denied_in_script(&err.to_string())
        || denied_in_a_transaction(err)
    {
        return ErrorKind::Permission;
    }
    if code == "WRONGTYPE" || err.detail().is_some_and(|d| d.contains("WRONGTYPE")) {
        return ErrorKind::WrongType;
    }
    match err.kind() {
        redis::ErrorKind::Parse | redis::ErrorKind::UnexpectedReturnType => ErrorKind::Protocol,
        redis::ErrorKind::InvalidClientConfig => ErrorKind::InvalidInput,
        _ => ErrorKind::Redis,
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            kind,
            message,
            source,
        } = self;
        f.debug_struct("Error")
            .field("kind", kind)
            .field("message", message)
            .field("source", source)
            .finish()
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Shorthand for `Result<T, dlock_core::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_kind_and_message() {
        let err = Error::invalid("lock name is empty; give the lock a name");
        assert_eq!(
            err.to_string(),
            "invalid input: lock name is empty; give the lock a name"
        );
        assert!(err.is_invalid_input());
        assert!(!err.may_have_taken_effect());
    }

    #[test]
    fn redis_errors_are_classified_and_chained() {
        let io = redis::RedisError::from(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "refused",
        ));
        let err = Error::from_redis("acquire `a`", io);
        assert_eq!(err.kind(), ErrorKind::Connection);
        assert!(std::error::Error::source(&err).is_some());

        let timeout =
            redis::RedisError::from(std::io::Error::new(std::io::ErrorKind::TimedOut, "slow"));
        assert_eq!(
            Error::from_redis("acquire `a`", timeout).kind(),
            ErrorKind::Timeout
        );
    }

    /// A server's error reply as the `redis` crate reads it off the wire.
    fn server_error(line: &str) -> redis::RedisError {
        match redis::parse_redis_value(format!("-{line}\r\n").as_bytes())
            .and_then(redis::Value::extract_error)
        {
            Err(e) => e,
            Ok(value) => panic!("not an error: {value:?}"),
        }
    }

    #[test]
    fn refusals_inside_scripts_are_permission_errors_on_every_tested_server() {
        for line in [
            "ERR The user executing the script can't run this command or subcommand script: \
             ee5bed0f, on @user_script:1.",
            "ERR The user executing the script can't publish to the channel mentioned in the \
             command script: 32b731ac, on @user_script:1.",
            "ERR ACL failure in script: User u has no permissions to run the 'set' command \
             script: ee5bed0f, on @user_script:1.",
            "ERR ACL failure in script: No permissions to access a key script: on @user_script:1.",
        ] {
            let err = Error::from_redis("force unlock `a`", server_error(line));
            assert_eq!(err.kind(), ErrorKind::Permission, "{line}");
        }
    }

    #[test]
    fn a_noperm_says_it_may_be_the_services_allow_list() {
        let line = "NOPERM User u has no permissions to run the 'set' command";
        let err = Error::from_redis("acquire `a`", server_error(line));
        assert_eq!(err.kind(), ErrorKind::Permission);
        let text = err.to_string();
        assert!(text.contains("'set'"), "{text}");
        assert!(text.contains("allow-list"), "{text}");
        assert!(text.contains("ACL"), "{text}");
    }

    #[test]
    fn an_unknown_refusal_inside_a_script_says_what_it_may_be() {
        let line = "ERR Command not offered by this plan script: ee5bed0f, on @user_script:4.";
        let err = Error::from_redis("acquire `a`", server_error(line));
        assert_eq!(err.kind(), ErrorKind::Redis);
        assert!(
            err.to_string()
                .contains("maybe an ACL or an allow-list refused this"),
            "{err}"
        );
        // An error outside a script is not guessed at.
        let plain = Error::from_redis("acquire `a`", server_error("ERR something else"));
        assert!(!plain.to_string().contains("allow-list"), "{plain}");
    }
}
