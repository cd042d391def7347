//! [`Error`]: the one error of dlock-tower, opaque, with an [`ErrorKind`] to branch on.
//!
//! Why not `dlock_core::Error`: its constructors are dlock-core's own, and this crate has
//! failures dlock-core has not (a configuration the layer refuses, a stored record in a format
//! it cannot read, a single-flight computation that failed). A lock or Redis failure keeps the
//! `dlock_core::Error` as its [`std::error::Error::source`] ([`Error::as_core`] gives it back).

use std::fmt;

/// What went wrong, to branch on. New kinds may be added.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A configuration or argument was refused before anything ran: an empty name, a zero
    /// duration, a header name that is not one, a trusted-proxy range that does not parse. The
    /// message names the argument; fix the call.
    InvalidInput,
    /// A lock or Redis request failed ([`Error::as_core`] has dlock-core's error): Redis down or
    /// slow, data of another program under the key.
    Core,
    /// A stored record (an idempotency record, a single-flight result) is not in a format this
    /// version reads: written by a newer dlock-tower, or not by dlock-tower at all. It is left
    /// untouched; the message names the key and the version found.
    Format,
    /// A value is larger than the configured limit (a single-flight result).
    TooLarge,
    /// The caller's lease was lost before its result could be stored: nothing was stored
    /// (a successor's result is never replaced by a stale holder's).
    LeaseLost,
    /// Waiting for another caller's result took longer than the configured timeout.
    Timeout,
    /// The caller's own computation failed (single-flight); its error is the source.
    Compute,
}

/// The error of every fallible function of dlock-tower.
pub struct Error {
    kind: ErrorKind,
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

/// `Result<T, dlock_tower::Error>`.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            source: None,
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidInput, message)
    }

    pub(crate) fn with_source(
        mut self,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        self.source = Some(source.into());
        self
    }

    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The dlock-core error this one was made from, for [`ErrorKind::Core`].
    pub fn as_core(&self) -> Option<&dlock_core::Error> {
        self.source.as_ref()?.downcast_ref::<dlock_core::Error>()
    }

    /// Whether Redis could not be reached in time (a connection error or a timeout of
    /// dlock-core): the case the layers' fail-open / fail-closed choice is about.
    pub fn is_unavailable(&self) -> bool {
        self.as_core()
            .is_some_and(|e| e.is_connection() || e.is_timeout())
    }
}

impl From<dlock_core::Error> for Error {
    fn from(error: dlock_core::Error) -> Self {
        Self::new(ErrorKind::Core, error.to_string()).with_source(error)
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
