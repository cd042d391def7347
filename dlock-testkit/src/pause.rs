//! [`Paused`]: a process frozen with SIGSTOP until the guard is dropped or resumed — a lock
//! holder in a GC pause, a VM migration, a debugger stop.
//!
//! The guard sends SIGCONT when it drops, so a test that fails (panics) while the process is
//! frozen never leaves a stopped process behind: a stopped process ignores everything but
//! SIGKILL and SIGCONT, and would hold its sockets and files until someone noticed.
//!
//! Two ways in: [`ChildGuard::pause`] for a child the harness spawned, which is signalled only
//! while it is known not to have been reaped (see `process.rs`); [`pause_process`] for any
//! pid (a `tokio::process::Child`, a process started by other code), which cannot be checked
//! that way — keep the process unreaped while it is paused.

use std::fmt;

use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;

use crate::{ChildGuard, HarnessError};

/// A process frozen with SIGSTOP; SIGCONT when dropped (or [`resume`](Self::resume)d).
///
/// Made by [`ChildGuard::pause`] or [`pause_process`]. While it is frozen, the process runs no
/// code: a lock holder renews nothing, its lease runs out in Redis, and another process may
/// take the lock; when it resumes it carries on where it stopped, believing what it believed
/// before — what fencing tokens are for.
///
/// # Example
///
/// ```no_run
/// use std::process::Command;
/// use dlock_testkit::ChildGuard;
///
/// let holder = ChildGuard::spawn(Command::new("my-worker"))?; // takes a lock, then works
/// let paused = holder.pause()?;
/// // ... wait until its lease ran out and another process took the lock ...
/// paused.resume()?; // or drop it
/// # Ok::<(), dlock_testkit::HarnessError>(())
/// ```
#[must_use = "the process resumes as soon as the guard is dropped"]
pub struct Paused<'a> {
    target: Target<'a>,
    /// Cleared once SIGCONT was sent, so the drop sends nothing more.
    stopped: bool,
}

/// Who is paused: a guarded child (signalled under its reaping check) or a bare pid.
enum Target<'a> {
    Child(&'a ChildGuard),
    Pid(Pid),
}

impl Paused<'_> {
    /// The paused process's id.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let child = dlock_testkit::ChildGuard::spawn(std::process::Command::new("sleep"))?;
    /// let paused = child.pause()?;
    /// assert_eq!(paused.pid(), child.pid());
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn pid(&self) -> u32 {
        match &self.target {
            Target::Child(child) => child.pid(),
            // Built from a u32 by `pause_process`, so never negative.
            Target::Pid(pid) => pid.as_raw().unsigned_abs(),
        }
    }

    /// Lets the process run again (SIGCONT) now, and reports whether that worked — unlike
    /// dropping the guard, which resumes it too but cannot report.
    ///
    /// # Errors
    ///
    /// When the process has exited meanwhile (it was killed: SIGKILL reaches a stopped
    /// process), or the signal cannot be sent.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let child = dlock_testkit::ChildGuard::spawn(std::process::Command::new("sleep"))?;
    /// let paused = child.pause()?;
    /// paused.resume()?;
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn resume(mut self) -> Result<(), HarnessError> {
        self.stopped = false;
        send(&self.target, Signal::SIGCONT)
    }
}

impl Drop for Paused<'_> {
    fn drop(&mut self) {
        if self.stopped {
            // The process may be gone (killed while stopped): nothing to resume then.
            let _ = send(&self.target, Signal::SIGCONT);
        }
    }
}

impl fmt::Debug for Paused<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self { target: _, stopped } = self;
        f.debug_struct("Paused")
            .field("pid", &self.pid())
            .field("stopped", stopped)
            .finish()
    }
}

impl ChildGuard {
    /// Freezes the child (SIGSTOP) until the returned guard is dropped or
    /// [`resume`](Paused::resume)d: a lock holder that stops running, as in a long GC pause.
    /// Unlike [`stop`](Self::stop), it cannot be left frozen by a test that fails before it
    /// resumes the child. The guard borrows the child, so [`kill`](Self::kill) (a crash while
    /// frozen) needs the guard dropped first; to crash a frozen child, drop the `ChildGuard`
    /// itself (SIGKILL reaches a stopped process) after the guard.
    ///
    /// # Errors
    ///
    /// When the child has already exited, or the signal cannot be sent.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let holder = dlock_testkit::ChildGuard::spawn(std::process::Command::new("sleep"))?;
    /// {
    ///     let _paused = holder.pause()?;
    ///     // ... the holder's lease runs out; another process takes the lock ...
    /// } // SIGCONT: the holder runs on, unaware
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn pause(&self) -> Result<Paused<'_>, HarnessError> {
        let target = Target::Child(self);
        send(&target, Signal::SIGSTOP)?;
        Ok(Paused {
            target,
            stopped: true,
        })
    }
}

/// Freezes the process `pid` (SIGSTOP) until the returned guard is dropped or
/// [`resume`](Paused::resume)d — for a process the harness did not spawn, such as a
/// `tokio::process::Child` that holds a lock (`child.id()`). For a [`ChildGuard`] or a
/// [`LineChild`](crate::LineChild) prefer [`ChildGuard::pause`], which never signals a child
/// that was already reaped.
///
/// Keep the process unreaped while it is paused (do not `wait` for it): a reaped pid can be
/// reused by an unrelated process, which the guard's SIGCONT would then reach.
///
/// # Errors
///
/// When `pid` is 0 or does not fit a pid (it would signal a process group), is the test's own
/// process (it would freeze the test), or names no process the test may signal.
///
/// # Example
///
/// ```no_run
/// // A process started by other code (with Tokio: `tokio::process::Child::id()`).
/// let mut holder = std::process::Command::new("my-worker").spawn()?;
/// let paused = dlock_testkit::pause_process(holder.id())?;
/// // ... the holder's lease runs out ...
/// drop(paused); // SIGCONT
/// holder.kill()?;
/// holder.wait()?; // reaped only once no guard can signal it
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn pause_process(pid: u32) -> Result<Paused<'static>, HarnessError> {
    let raw = i32::try_from(pid)
        .ok()
        .filter(|raw| *raw > 0)
        .ok_or_else(|| HarnessError::new(format!("pause_process: {pid} is not a process id")))?;
    if pid == std::process::id() {
        return Err(HarnessError::new(
            "pause_process: that is the test's own process, which would freeze for good",
        ));
    }
    let target = Target::Pid(Pid::from_raw(raw));
    send(&target, Signal::SIGSTOP)?;
    Ok(Paused {
        target,
        stopped: true,
    })
}

fn send(target: &Target<'_>, sig: Signal) -> Result<(), HarnessError> {
    match target {
        Target::Child(child) => child.signal(sig),
        Target::Pid(pid) => signal::kill(*pid, sig).map_err(|error| {
            HarnessError::new(format!("cannot send {sig} to process {pid}")).with_source(error)
        }),
    }
}
