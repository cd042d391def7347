//! [`ChildGuard`]: a child process that is SIGKILLed and reaped on drop.
//!
//! Used for every `redis-server` the harness starts and offered to tests that spawn helper
//! processes (lock holders in multi-process tests). Reaping matters: a killed but unreaped child
//! stays a zombie, and only once it is reaped is its listening socket certainly closed.
//!
//! Signals go through `nix` because the workspace forbids `unsafe`. A signal is only sent while
//! the child is known not to have been reaped (checked under the lock that guards the `Child`),
//! so it can never hit an unrelated process that reused the pid.

use std::fmt;
use std::process::{Child, Command, ExitStatus};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;

use crate::HarnessError;

/// How often [`ChildGuard::wait_timeout`] polls.
const POLL_INTERVAL: Duration = Duration::from_millis(10);

/// A child process that is SIGKILLed and reaped on drop (for multi-process tests).
///
/// # Example
///
/// ```no_run
/// use std::process::Command;
/// use std::time::Duration;
/// use dlock_testkit::ChildGuard;
///
/// let mut cmd = Command::new("sleep");
/// cmd.arg("60");
/// let mut worker = ChildGuard::spawn(cmd)?;
/// worker.stop()?; // freeze it, e.g. to let its lease expire
/// worker.cont()?;
/// assert!(worker.wait_timeout(Duration::from_millis(100))?.is_none());
/// worker.kill(); // or just drop it
/// # Ok::<(), dlock_testkit::HarnessError>(())
/// ```
pub struct ChildGuard {
    // A mutex so that `stop`/`cont` (`&self`) can check the child was not reaped before
    // signalling its pid; `child_mut` reaches it without locking through `get_mut`.
    child: Mutex<Child>,
    pid: u32,
    command: String,
}

impl ChildGuard {
    /// Spawns `cmd` and guards the child. Takes the command by value, so the caller configures
    /// stdio, environment and arguments beforehand.
    ///
    /// # Errors
    ///
    /// When the process cannot be spawned (missing executable, permissions); the error names the
    /// command line.
    ///
    /// # Example
    ///
    /// ```no_run
    /// let mut cmd = std::process::Command::new("sleep");
    /// cmd.arg("60");
    /// let guard = dlock_testkit::ChildGuard::spawn(cmd)?;
    /// println!("spawned pid {}", guard.pid());
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn spawn(mut cmd: Command) -> Result<ChildGuard, HarnessError> {
        let command = command_line(&cmd);
        let child = cmd.spawn().map_err(|error| {
            HarnessError::new(format!("cannot spawn `{command}`"))
                .with_command(command.clone())
                .with_source(error)
        })?;
        Ok(ChildGuard {
            pid: child.id(),
            child: Mutex::new(child),
            command,
        })
    }

    /// The child's process id (still returned after the child was reaped).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let guard = dlock_testkit::ChildGuard::spawn(std::process::Command::new("true"))?;
    /// println!("pid {}", guard.pid());
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The command line the child was spawned with, shell-quoted, for messages.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let guard = dlock_testkit::ChildGuard::spawn(std::process::Command::new("true"))?;
    /// eprintln!("running: {}", guard.command_line());
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn command_line(&self) -> &str {
        &self.command
    }

    /// Sends SIGKILL (if the child still runs) and reaps it. Idempotent; never panics. Also works
    /// on a stopped child: SIGKILL is delivered to stopped processes.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let mut guard = dlock_testkit::ChildGuard::spawn(std::process::Command::new("sleep"))?;
    /// guard.kill(); // simulate a crash of the process
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn kill(&mut self) {
        let child = self.child_mut();
        // Already exited and now reaped (or reaped earlier): nothing to kill.
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        // `Child::kill` sends SIGKILL on Unix. Errors only mean the child is already gone.
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Sends SIGSTOP: the child freezes (a "GC pause", a hung process) until [`cont`](Self::cont).
    ///
    /// # Errors
    ///
    /// When the child has already exited, or the signal cannot be sent.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let guard = dlock_testkit::ChildGuard::spawn(std::process::Command::new("sleep"))?;
    /// guard.stop()?;
    /// guard.cont()?;
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn stop(&self) -> Result<(), HarnessError> {
        self.signal(Signal::SIGSTOP)
    }

    /// Sends SIGCONT: a child frozen by [`stop`](Self::stop) runs again.
    ///
    /// # Errors
    ///
    /// When the child has already exited, or the signal cannot be sent.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let guard = dlock_testkit::ChildGuard::spawn(std::process::Command::new("sleep"))?;
    /// guard.stop()?;
    /// guard.cont()?;
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn cont(&self) -> Result<(), HarnessError> {
        self.signal(Signal::SIGCONT)
    }

    /// Waits up to `timeout` for the child to exit; `Ok(None)` if it is still running then.
    /// A child that exited is reaped.
    ///
    /// # Errors
    ///
    /// When the child's status cannot be queried (`waitpid` fails).
    ///
    /// # Example
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # let mut guard = dlock_testkit::ChildGuard::spawn(std::process::Command::new("true"))?;
    /// match guard.wait_timeout(Duration::from_secs(5))? {
    ///     Some(status) => assert!(status.success()),
    ///     None => panic!("still running after 5 s"),
    /// }
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn wait_timeout(&mut self, timeout: Duration) -> Result<Option<ExitStatus>, HarnessError> {
        let start = Instant::now();
        let pid = self.pid;
        loop {
            let status = self.child_mut().try_wait().map_err(|error| {
                HarnessError::new(format!("cannot query the status of process {pid}"))
                    .with_source(error)
            })?;
            let elapsed = start.elapsed();
            if status.is_some() || elapsed >= timeout {
                return Ok(status);
            }
            thread::sleep(POLL_INTERVAL.min(timeout - elapsed));
        }
    }

    /// The guarded [`Child`], e.g. to take its `stdout` pipe. If you reap it yourself
    /// (`wait`), the guard notices and does not signal the pid again.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let mut guard = dlock_testkit::ChildGuard::spawn(std::process::Command::new("true"))?;
    /// let stdout = guard.child_mut().stdout.take();
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn child_mut(&mut self) -> &mut Child {
        self.child.get_mut().unwrap_or_else(PoisonError::into_inner)
    }

    // dlock-core's `runtime::lock` does the same, but the harness stays free of the crate it tests.
    fn lock(&self) -> MutexGuard<'_, Child> {
        self.child.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends `sig` to the child, if it was not reaped.
    pub(crate) fn signal(&self, sig: Signal) -> Result<(), HarnessError> {
        self.send(sig, false)
    }

    /// Sends `sig` to the child's process group (the child must lead one: spawned with
    /// `process_group(0)`), if the child was not reaped: its pid, and so the group id, is
    /// still its own.
    pub(crate) fn signal_group(&self, sig: Signal) -> Result<(), HarnessError> {
        self.send(sig, true)
    }

    fn send(&self, sig: Signal, group: bool) -> Result<(), HarnessError> {
        let mut child = self.lock();
        let context = || {
            format!(
                "cannot send {sig} to process {} ({})",
                self.pid, self.command
            )
        };
        match child.try_wait() {
            Ok(None) => {}
            Ok(Some(status)) => {
                return Err(HarnessError::new(format!(
                    "{}: it already exited with {status}",
                    context()
                )));
            }
            Err(error) => return Err(HarnessError::new(context()).with_source(error)),
        }
        let pid = i32::try_from(self.pid)
            .map_err(|error| HarnessError::new(context()).with_source(error))?;
        // The lock is still held: the child cannot be reaped before the signal is sent.
        let sent = if group {
            signal::killpg(Pid::from_raw(pid), sig)
        } else {
            signal::kill(Pid::from_raw(pid), sig)
        };
        sent.map_err(|error| HarnessError::new(context()).with_source(error))
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

impl fmt::Debug for ChildGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            child: _,
            pid,
            command,
        } = self;
        f.debug_struct("ChildGuard")
            .field("pid", pid)
            .field("command", command)
            .finish_non_exhaustive()
    }
}

/// `cmd` as a shell-quoted command line, for error messages a developer can paste.
pub(crate) fn command_line(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|arg| shell_quote(&arg.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ")
}

fn shell_quote(arg: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c);
    if !arg.is_empty() && arg.chars().all(plain) {
        arg.to_owned()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_line_quotes_what_the_shell_would_split() {
        let mut cmd = Command::new("/usr/bin/redis-server");
        cmd.args(["--save", "", "--port", "6379", "--x", "a b", "it's"]);
        assert_eq!(
            command_line(&cmd),
            r"/usr/bin/redis-server --save '' --port 6379 --x 'a b' 'it'\''s'"
        );
    }
}
