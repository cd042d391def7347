//! One log line at a time on stderr, for every part of the service.

use std::fmt;
use std::io::Write;

/// One log line on stderr (an example keeps to plain lines instead of a logging stack),
/// written at once so that the lines of replicas sharing a terminal do not interleave.
pub(crate) fn log(args: fmt::Arguments<'_>) {
    let line = format!("web[{}]: {args}\n", std::process::id());
    // Nowhere to report a failure to log.
    let _ = std::io::stderr().write_all(line.as_bytes());
}
