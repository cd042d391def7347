//! [`Error`]: what the scheduler reports — a refused schedule or job, or a Redis failure.

use std::borrow::Cow;
use std::fmt;

use dlock_cron::ScheduleError;

/// What kind of failure an [`Error`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A cron expression or time zone was refused; the source is the [`ScheduleError`] with
    /// the details. Fix the job definition.
    InvalidSchedule,
    /// A job or scheduler option was refused (name, lease, jitter, a name used twice …). The
    /// message says which and how to fix it.
    InvalidJob,
    /// Redis failed or answered something unexpected (the source is the `dlock_core::Error`,
    /// with its own kind: connection, timeout …). Retry later.
    Redis,
}

/// The error of the scheduler's fallible operations.
pub struct Error {
    kind: ErrorKind,
    message: Cow<'static, str>,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl Error {
    pub(crate) fn invalid_job(message: impl Into<Cow<'static, str>>) -> Self {
        Self {
            kind: ErrorKind::InvalidJob,
            message: message.into(),
            source: None,
        }
    }

    pub(crate) fn redis_data(message: impl Into<Cow<'static, str>>) -> Self {
        Self {
            kind: ErrorKind::Redis,
            message: message.into(),
            source: None,
        }
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
}

impl From<ScheduleError> for Error {
    fn from(e: ScheduleError) -> Self {
        Self {
            kind: ErrorKind::InvalidSchedule,
            message: e.to_string().into(),
            source: Some(Box::new(e)),
        }
    }
}

impl From<dlock_core::Error> for Error {
    fn from(e: dlock_core::Error) -> Self {
        Self {
            kind: ErrorKind::Redis,
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
