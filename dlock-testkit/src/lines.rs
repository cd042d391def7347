//! [`LineChild`]: a child process that talks in lines, killed and reaped on drop.
//!
//! The integration tests' worker processes, the `web` example's replicas and the benchmark's
//! children all speak a line protocol: the parent awaits lines on the child's stdout (`ready`,
//! `RESULT {…}`) and may write lines to its stdin (`GO`, `STOP`). Stdout is read on a thread of
//! its own, so that a wait can give up after a limit (a stuck child fails the test instead of
//! hanging it) and the child never blocks on a full pipe while the parent is busy elsewhere.

use std::fmt;
use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use crate::HarnessError;
use crate::process::ChildGuard;

/// A child process whose stdout is read a line at a time, with a time limit, and whose stdin
/// takes lines. Killed and reaped on drop, like the [`ChildGuard`] it holds.
///
/// # Example
///
/// ```no_run
/// use std::process::Command;
/// use std::time::Duration;
/// use dlock_testkit::LineChild;
///
/// let mut cmd = Command::new("sh");
/// cmd.args(["-c", "echo ready; read go; echo RESULT 42"]);
/// let mut child = LineChild::spawn(cmd)?;
/// assert_eq!(child.line(Duration::from_secs(5))?, "ready");
/// child.send("go")?;
/// assert_eq!(child.wait_for("RESULT ", Duration::from_secs(5))?, "42");
/// assert!(child.wait(Duration::from_secs(5))?.success());
/// # Ok::<(), dlock_testkit::HarnessError>(())
/// ```
pub struct LineChild {
    process: ChildGuard,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl LineChild {
    /// Spawns `cmd` with its stdin and stdout piped; stderr is left as `cmd` has it (inherited
    /// unless set), so the child's errors show in the parent's output.
    ///
    /// # Errors
    ///
    /// When the process cannot be spawned; the error names the command line.
    pub fn spawn(mut cmd: Command) -> Result<LineChild, HarnessError> {
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
        let mut process = ChildGuard::spawn(cmd)?;
        let child = process.child_mut();
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().ok_or_else(|| {
            HarnessError::new("the child has no stdout pipe").with_command(process.command_line())
        })?;
        let (tx, lines) = mpsc::channel();
        // Ends when the child closes its stdout (it exited) or the receiver is gone.
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Ok(LineChild {
            process,
            stdin,
            lines,
        })
    }

    /// The next line the child prints (without its line ending), waiting up to `limit`
    /// (`Duration::MAX`: no limit).
    ///
    /// # Errors
    ///
    /// When no line comes within `limit`, or the child closed its stdout (it exited) first.
    pub fn line(&self, limit: Duration) -> Result<String, HarnessError> {
        self.lines.recv_timeout(limit).map_err(|error| match error {
            RecvTimeoutError::Timeout => self.error(format!("printed no line within {limit:?}")),
            RecvTimeoutError::Disconnected => self.error("closed its stdout (exited)"),
        })
    }

    /// The next line the child has printed, if there is one already (does not wait).
    pub fn try_line(&self) -> Option<String> {
        self.lines.try_recv().ok()
    }

    /// Skips lines until one starts with `prefix`, and returns the rest of it (trailing white
    /// space trimmed); waits up to `limit` in all (`Duration::MAX`: no limit).
    ///
    /// # Errors
    ///
    /// When no such line comes within `limit`, or the child closed its stdout (it exited) first.
    pub fn wait_for(&self, prefix: &str, limit: Duration) -> Result<String, HarnessError> {
        let deadline = Instant::now().checked_add(limit);
        loop {
            let left = deadline.map_or(Duration::MAX, |d| {
                d.saturating_duration_since(Instant::now())
            });
            let line = self.lines.recv_timeout(left).map_err(|error| match error {
                RecvTimeoutError::Timeout => {
                    self.error(format!("did not print `{prefix}` within {limit:?}"))
                }
                RecvTimeoutError::Disconnected => self.error(format!(
                    "closed its stdout (exited) before printing `{prefix}`"
                )),
            })?;
            if let Some(rest) = line.trim_end().strip_prefix(prefix) {
                return Ok(rest.to_owned());
            }
        }
    }

    /// Writes `line` and a line ending to the child's stdin, and flushes it.
    ///
    /// # Errors
    ///
    /// When the pipe is closed (the child exited, or [`wait`](Self::wait) closed it).
    pub fn send(&mut self, line: &str) -> Result<(), HarnessError> {
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(self.error(format_args!("has its stdin closed: cannot send `{line}`")));
        };
        writeln!(stdin, "{line}")
            .and_then(|()| stdin.flush())
            .map_err(|e| {
                self.error(format_args!("did not take `{line}` on its stdin"))
                    .with_source(e)
            })
    }

    /// Closes the child's stdin (a child that reads it sees the end), then waits up to `limit`
    /// for the child to exit (`Duration::MAX`: no limit) and reaps it.
    ///
    /// # Errors
    ///
    /// When the child is still running after `limit` (it is killed on drop), or its status
    /// cannot be queried.
    pub fn wait(&mut self, limit: Duration) -> Result<ExitStatus, HarnessError> {
        drop(self.stdin.take());
        let status = self.process.wait_timeout(limit)?;
        status.ok_or_else(|| self.error(format_args!("did not exit within {limit:?}")))
    }

    /// "`<command line>` `what`", with the command line attached.
    fn error(&self, what: impl fmt::Display) -> HarnessError {
        let command = self.process.command_line();
        HarnessError::new(format!("`{command}` {what}")).with_command(command)
    }

    /// The process: its pid, signals (stop, continue), [`kill`](ChildGuard::kill).
    pub fn process(&self) -> &ChildGuard {
        &self.process
    }

    /// The process, for what needs it mutably ([`kill`](ChildGuard::kill),
    /// [`wait_timeout`](ChildGuard::wait_timeout)).
    pub fn process_mut(&mut self) -> &mut ChildGuard {
        &mut self.process
    }
}

impl fmt::Debug for LineChild {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            process,
            stdin,
            lines: _,
        } = self;
        f.debug_struct("LineChild")
            .field("process", process)
            .field("stdin_open", &stdin.is_some())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const LIMIT: Duration = Duration::from_secs(10);

    fn sh(script: &str) -> LineChild {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script]);
        LineChild::spawn(cmd).unwrap()
    }

    #[test]
    fn lines_go_both_ways() {
        let mut child = sh("echo ready; read x; echo \"got $x\"; echo noise; echo 'RESULT {}  '");
        assert_eq!(child.line(LIMIT).unwrap(), "ready");
        child.send("go").unwrap();
        assert_eq!(child.line(LIMIT).unwrap(), "got go");
        assert_eq!(child.wait_for("RESULT ", LIMIT).unwrap(), "{}");
        assert!(child.wait(LIMIT).unwrap().success());
        assert!(child.try_line().is_none());
        assert!(child.send("late").is_err(), "stdin closed by wait");
    }

    #[test]
    fn a_silent_or_finished_child_is_an_error_not_a_hang() {
        let child = sh("read x");
        let error = child.line(Duration::from_millis(50)).unwrap_err();
        assert!(
            error.message().contains("printed no line within"),
            "{error}"
        );

        let mut child = sh("echo one");
        let error = child.wait_for("RESULT ", LIMIT).unwrap_err();
        assert!(
            error
                .message()
                .ends_with("closed its stdout (exited) before printing `RESULT `"),
            "{error}"
        );
        assert!(child.wait(LIMIT).unwrap().success());
    }
}
