//! [`Error`]: what the scheduler reports — a refused schedule or job, or a Redis failure.
//!
//! Every Redis request of the scheduler goes through dlock-core's request path
//! (`dlock_core::ext::{query, query_pipe, invoke}`: the client's connection, its command
//! timeout, its error classification), so a Redis failure *is* a `dlock_core::Error`: it is the
//! [`source`](std::error::Error::source) of the scheduler's error, [`Error::redis_kind`] is its
//! [`dlock_core::ErrorKind`] (connection, timeout …), and the predicates
//! ([`Error::is_timeout`], [`Error::may_have_taken_effect`] …) answer as its own do. The one
//! Redis failure without a source is a reply the scheduler itself finds malformed (a ledger
//! record it did not write).

use std::borrow::Cow;
use std::fmt;

use dlock_core::ErrorKind as CoreKind;
use dlock_cron::ScheduleError;

/// What kind of failure an [`Error`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A cron expression or time zone was refused; the source is the [`ScheduleError`] with
    /// the details. Fix the job definition.
    InvalidSchedule,
    /// A job, job name or scheduler option was refused (an empty name, a lease out of range, a
    /// jitter as long as the schedule's interval, a name used twice …). The message says which
    /// and how to fix it; when dlock-core refused it, the source is its `dlock_core::Error`
    /// (also any `dlock_core::ErrorKind::InvalidInput` converted with `?`: a bad URL, a lock
    /// name; [`Error::as_core`] has it).
    InvalidJob,
    /// A control call ([`crate::Scheduler::pause`], `resume`, `run_now`) named a job that is
    /// not known under the client's key prefix: no running replica registered it (nor has
    /// this scheduler), and it has no ledger entries and no pause record — most likely a typo.
    /// The message names the job and up to five registered jobs with close names. Check the
    /// name (`dlock jobs`); to act on it anyway (a job not deployed yet), use the `force_`
    /// variants. Nothing was changed.
    UnknownJob,
    /// A run-time schedule's or one-off job's arguments were refused: they are not valid JSON,
    /// or do not deserialize into the type the handler asked for ([`crate::JobContext::args`]).
    /// The message says which job and why.
    InvalidArgs,
    /// Redis failed or answered something unexpected. [`Error::redis_kind`] says how
    /// (connection, timeout …); [`Error::may_have_taken_effect`] whether the request may still
    /// have run. Retry later.
    Redis,
}

/// The error of the scheduler's fallible operations.
///
/// # One error for both crates
/// This error converts from [`dlock_core::Error`] (`impl From<dlock_core::Error> for Error`),
/// so a function that uses `?` on calls of both crates returns `Result<T, dlock_scheduler::Error>`
/// and needs no conversion of its own; [`Error::as_core`] gives core's error back. The direction
/// is the lossless one: core's error is kept whole as the [`source`](std::error::Error::source)
/// (its kind is [`Error::redis_kind`]), whereas this error's kinds ([`ErrorKind::InvalidSchedule`],
/// [`ErrorKind::UnknownJob`], [`ErrorKind::InvalidArgs`]) have no counterpart in core's. An
/// application's own error type takes this one with one `From`, and core's with the one line
/// that joins them:
///
/// ```
/// # #[derive(Debug)]
/// enum AppError { Jobs(dlock_scheduler::Error) }
///
/// impl From<dlock_scheduler::Error> for AppError {
///     fn from(e: dlock_scheduler::Error) -> Self { AppError::Jobs(e) }
/// }
/// // The one line: core's error goes through the scheduler's.
/// impl From<dlock_core::Error> for AppError {
///     fn from(e: dlock_core::Error) -> Self { dlock_scheduler::Error::from(e).into() }
/// }
///
/// async fn start(url: &str) -> Result<dlock_scheduler::Scheduler, AppError> {
///     let client = dlock_core::Client::builder(url).connect().await?; // core's error
///     Ok(dlock_scheduler::Scheduler::builder(client).build()?) // the scheduler's
/// }
/// # let _ = start;
/// ```
///
/// ```
/// use dlock_scheduler::{Error, ErrorKind};
///
/// fn retry_later(err: &Error) -> bool {
///     err.kind() == ErrorKind::Redis && (err.is_connection() || err.is_timeout())
/// }
/// # let _ = retry_later;
/// ```
pub struct Error {
    kind: ErrorKind,
    redis_kind: Option<CoreKind>,
    message: Cow<'static, str>,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl Error {
    pub(crate) fn invalid_job(message: impl Into<Cow<'static, str>>) -> Self {
        Self {
            kind: ErrorKind::InvalidJob,
            redis_kind: None,
            message: message.into(),
            source: None,
        }
    }

    /// Arguments that are not JSON or not of the handler's type (see [`ErrorKind::InvalidArgs`]).
    pub(crate) fn invalid_args(message: String) -> Self {
        Self {
            kind: ErrorKind::InvalidArgs,
            redis_kind: None,
            message: message.into(),
            source: None,
        }
    }

    /// A control call for a job that is not known (see [`ErrorKind::UnknownJob`]).
    pub(crate) fn unknown_job(message: String) -> Self {
        Self {
            kind: ErrorKind::UnknownJob,
            redis_kind: None,
            message: message.into(),
            source: None,
        }
    }

    /// A job option that dlock-core refused (`context` says which job); keeps core's error.
    pub(crate) fn refused_by_core(context: &str, error: dlock_core::Error) -> Self {
        Self {
            kind: ErrorKind::InvalidJob,
            redis_kind: None,
            message: format!("{context}: {error}").into(),
            source: Some(Box::new(error)),
        }
    }

    /// A failed dlock-core request, with what the scheduler was doing (for a request whose
    /// error does not say it already; else use `From`).
    pub(crate) fn core(context: &str, error: dlock_core::Error) -> Self {
        Self {
            kind: ErrorKind::Redis,
            redis_kind: Some(error.kind()),
            message: format!("{context}: {error}").into(),
            source: Some(Box::new(error)),
        }
    }

    /// Redis answered something the scheduler did not write or does not understand.
    pub(crate) fn protocol(message: impl Into<Cow<'static, str>>) -> Self {
        Self {
            kind: ErrorKind::Redis,
            redis_kind: Some(CoreKind::Protocol),
            message: message.into(),
            source: None,
        }
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// For a Redis failure ([`ErrorKind::Redis`]), how it failed, in dlock-core's terms
    /// (`Connection`, `Timeout`, `WrongType`, `Protocol`, `Redis` …); `None` otherwise.
    pub fn redis_kind(&self) -> Option<CoreKind> {
        self.redis_kind
    }

    /// Redis did not answer within the client's command timeout.
    pub fn is_timeout(&self) -> bool {
        self.redis_kind == Some(CoreKind::Timeout)
    }

    /// Redis could not be reached, or the connection dropped.
    pub fn is_connection(&self) -> bool {
        self.redis_kind == Some(CoreKind::Connection)
    }

    /// The dlock-core error this one was made from (a Redis failure, or an input dlock-core
    /// refused), if any: the way back from `?` (see [One error for both crates](Error#one-error-for-both-crates)).
    pub fn as_core(&self) -> Option<&dlock_core::Error> {
        self.source.as_deref()?.downcast_ref::<dlock_core::Error>()
    }

    /// Whether the failed request may nevertheless have run on the server (its reply was lost
    /// or late), as [`dlock_core::Error::may_have_taken_effect`]. Every scheduler request is
    /// safe to repeat: pausing twice is pausing once, and a `run_now` repeated after such an
    /// error may queue a second run.
    pub fn may_have_taken_effect(&self) -> bool {
        matches!(
            self.redis_kind,
            Some(CoreKind::Timeout | CoreKind::Connection)
        )
    }
}

impl From<ScheduleError> for Error {
    fn from(e: ScheduleError) -> Self {
        Self {
            kind: ErrorKind::InvalidSchedule,
            redis_kind: None,
            message: e.to_string().into(),
            source: Some(Box::new(e)),
        }
    }
}

/// A failed request on dlock-core's path (whose message names the request), or an input it
/// refused.
impl From<dlock_core::Error> for Error {
    fn from(e: dlock_core::Error) -> Self {
        let (kind, redis_kind) = match e.kind() {
            CoreKind::InvalidInput => (ErrorKind::InvalidJob, None),
            other => (ErrorKind::Redis, Some(other)),
        };
        Self {
            kind,
            redis_kind,
            message: e.to_string().into(),
            source: Some(Box::new(e)),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            kind,
            redis_kind,
            message,
            source,
        } = self;
        f.debug_struct("Error")
            .field("kind", kind)
            .field("redis_kind", redis_kind)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The core error of a request on dlock-core's path to a port where nothing listens.
    async fn refused() -> dlock_core::Error {
        let client = dlock_core::Client::open("redis://127.0.0.1:1/").unwrap();
        dlock_core::ext::query::<String>(&client, &redis::cmd("PING"), "pause `j`")
            .await
            .unwrap_err()
    }

    #[tokio::test]
    async fn redis_errors_carry_the_core_error_as_their_source() {
        let err = Error::from(refused().await);
        assert_eq!(err.kind(), ErrorKind::Redis);
        assert_eq!(err.redis_kind(), Some(CoreKind::Connection));
        assert!(err.is_connection() && err.may_have_taken_effect() && !err.is_timeout());
        assert!(err.to_string().contains("pause `j`"), "{err}");
        let source = std::error::Error::source(&err)
            .and_then(|s| s.downcast_ref::<dlock_core::Error>())
            .expect("the source is dlock-core's error");
        assert!(source.is_connection() && source.may_have_taken_effect());
        let bad = Error::invalid_job("an empty job name");
        assert_eq!(bad.redis_kind(), None);
        assert!(!bad.may_have_taken_effect());
    }

    /// Issue 47, "one error story": a function that uses `?` on dlock-core and on
    /// dlock-scheduler calls returns the scheduler's error with no `From` of its own, and core's
    /// error comes back whole through `as_core`; core's refused input keeps its kind there.
    #[tokio::test]
    async fn question_mark_on_both_crates_needs_no_conversion() {
        async fn start(url: &str) -> Result<crate::Scheduler, Error> {
            let client = dlock_core::Client::builder(url)
                .connect_timeout(std::time::Duration::from_secs(1))
                .connect()
                .await?;
            crate::Scheduler::builder(client).build()
        }
        let err = start("redis://127.0.0.1:1/").await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Redis);
        assert_eq!(err.redis_kind(), Some(CoreKind::Connection));
        let core = err.as_core().expect("core's error comes back");
        assert!(core.is_connection(), "{core}");
        assert!(err.to_string().contains("127.0.0.1:1"), "{err}");

        let err = start("not a url").await.unwrap_err();
        assert_eq!(
            err.as_core().map(|e| e.kind()),
            Some(CoreKind::InvalidInput)
        );
        assert!(Error::invalid_job("x").as_core().is_none());
    }
}
