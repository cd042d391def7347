//! Exit codes, and the one-line error a command ends with when it fails.

use std::fmt;

/// The variable that holds the password, for URLs that carry none (read by `main`, named in
/// the messages about credentials).
pub(crate) const PASSWORD_VAR: &str = "DLOCK_REDIS_PASSWORD";

/// How `dlock` exits (documented in `--help` and the README).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Exit {
    /// Done.
    Ok = 0,
    /// Redis unreachable or timed out, an error reply, data dlock did not write.
    Error = 1,
    /// Bad arguments or input: fix the command line (clap uses 2 too).
    Usage = 2,
    /// Nothing found: no lock held, no job registered, no run recorded.
    NotFound = 3,
    /// Not confirmed, or the holder changed while the operator answered: nothing changed.
    Aborted = 4,
}

impl Exit {
    /// The process exit code.
    pub(crate) fn code(self) -> u8 {
        self as u8
    }
}

/// A command that failed: what to print on stderr, and the exit code.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) exit: Exit,
    pub(crate) message: String,
    /// Redis refused the user name or password (`dlock_core::ErrorKind::Authentication`).
    pub(crate) refused_login: bool,
}

impl Failure {
    pub(crate) fn new(exit: Exit, message: impl Into<String>) -> Self {
        Self {
            exit,
            message: message.into(),
            refused_login: false,
        }
    }

    /// Redis refused the user name or password: `message` says so.
    pub(crate) fn refused_login(message: impl Into<String>) -> Self {
        Self {
            refused_login: true,
            ..Self::error(message)
        }
    }

    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Self::new(Exit::Usage, message)
    }

    pub(crate) fn error(message: impl Into<String>) -> Self {
        Self::new(Exit::Error, message)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<dlock_core::Error> for Failure {
    fn from(e: dlock_core::Error) -> Self {
        match e.kind() {
            dlock_core::ErrorKind::InvalidInput => Self::usage(e.to_string()),
            dlock_core::ErrorKind::Authentication => Self::refused_login(format!(
                "Redis refused the user name or password (or none was given): check the user in \
                 the URL and the password (in the URL, or {}); {e}",
                PASSWORD_VAR
            )),
            _ => Self::error(e.to_string()),
        }
    }
}

impl From<dlock_scheduler::Error> for Failure {
    fn from(e: dlock_scheduler::Error) -> Self {
        use dlock_scheduler::ErrorKind;
        // What the operator typed was refused (a name, a cron expression or zone, arguments).
        let exit = if matches!(
            e.kind(),
            ErrorKind::InvalidJob | ErrorKind::InvalidSchedule | ErrorKind::InvalidArgs
        ) {
            Exit::Usage
        } else {
            Exit::Error
        };
        Self::new(exit, e.to_string())
    }
}
