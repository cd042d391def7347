//! Child processes of the benchmark binary (W1 1-CPU, the W3 workers, the memory probes): the
//! same executable started with a subcommand, talking over its stdin/stdout in lines
//! ([`dlock_testkit::LineChild`]).
//!
//! Protocol: the child writes `READY` when its set-up is done (W3, scheduler replicas), waits for
//! `GO` on stdin when asked to, runs until `STOP` where the parent decides when it ends (scheduler
//! replicas), and ends with one line `RESULT <json>`. Its stderr goes straight to ours, so its
//! errors are visible. The child is SIGKILLed and reaped if we drop it early (on an error).

use std::io::Write;
use std::process::Command;
use std::time::Duration;

use dlock_testkit::LineChild;
use serde::de::DeserializeOwned;

use crate::rt::{BoxError, wall_us};
use crate::spec::Counts;

/// A line the child writes once it is ready to start.
pub(crate) const READY: &str = "READY";
/// The line the parent sends to start a child that waits.
pub(crate) const GO: &str = "GO";
/// The line the parent sends to stop a child that runs until told.
pub(crate) const STOP: &str = "STOP";
/// Prefix of the child's result line.
pub(crate) const RESULT: &str = "RESULT ";

/// No time limit on a child's lines or exit: a workload takes as long as its counts make it.
const NO_LIMIT: Duration = Duration::MAX;

/// A running child of this binary.
pub(crate) struct Child(LineChild);

impl Child {
    /// Starts `<this binary> args…`.
    pub(crate) fn spawn(args: &[String]) -> Result<Child, BoxError> {
        let mut cmd = Command::new(std::env::current_exe()?);
        cmd.args(args);
        Ok(Child(LineChild::spawn(cmd)?))
    }

    /// Reads lines until one starts with `prefix`; returns the rest of that line.
    pub(crate) fn wait_for(&mut self, prefix: &str) -> Result<String, BoxError> {
        Ok(self.0.wait_for(prefix, NO_LIMIT)?)
    }

    /// Sends one line on the child's stdin.
    pub(crate) fn send(&mut self, line: &str) -> Result<(), BoxError> {
        Ok(self.0.send(line)?)
    }

    /// SIGKILLs the child and reaps it: a crash of the process (W7's dying holder).
    pub(crate) fn kill(mut self) {
        self.0.process_mut().kill();
    }

    /// The child's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.0.process().pid()
    }

    /// Reads the child's `RESULT` line, waits for it to exit, and checks that it succeeded.
    pub(crate) fn result<T: DeserializeOwned>(mut self) -> Result<T, BoxError> {
        let json = self.wait_for(RESULT)?;
        let status = self.0.wait(NO_LIMIT)?;
        let what = self.0.process().command_line();
        if !status.success() {
            return Err(format!("`{what}` failed: {status}").into());
        }
        serde_json::from_str(&json)
            .map_err(|e| format!("`{what}` printed a malformed result: {e}").into())
    }
}

/// The arguments that start subcommand `sub` of this binary against the server at `url`, with
/// `extra` arguments, and the run's profile: `--quick` in a quick run, `--scale` in a scale run.
pub(crate) fn args(sub: &str, url: &str, counts: &Counts, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [sub, "--url", url].into_iter().map(str::to_owned).collect();
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    if counts.quick {
        args.push("--quick".to_owned());
    } else if counts.scale {
        args.push("--scale".to_owned());
    }
    args
}

/// Children started together: every one set up and `READY` before any is sent `GO`.
pub(crate) struct Group(Vec<Child>);

impl Group {
    /// Starts one child per argument list, and waits until each is `READY`.
    pub(crate) fn ready(args: impl IntoIterator<Item = Vec<String>>) -> Result<Group, BoxError> {
        let mut children = args
            .into_iter()
            .map(|a| Child::spawn(&a))
            .collect::<Result<Vec<_>, _>>()?;
        for child in &mut children {
            child.wait_for(READY)?;
        }
        Ok(Group(children))
    }

    /// Sends `line` (`GO`, `STOP`) to every child.
    pub(crate) fn send(&mut self, line: &str) -> Result<(), BoxError> {
        self.0.iter_mut().try_for_each(|child| child.send(line))
    }

    /// SIGKILLs child `index` (a crash: it reports nothing) and starts `args` in its place at
    /// once, set up and sent `GO` (the scheduler's kill phase).
    pub(crate) fn kill_and_restart(
        &mut self,
        index: usize,
        args: &[String],
        down_for: std::time::Duration,
    ) -> Result<Restarted, BoxError> {
        let child = self
            .0
            .get_mut(index)
            .ok_or_else(|| format!("no child number {index} to kill"))?;
        let killed_pid = child.pid();
        let killed_at_us = wall_us()?;
        child.0.process_mut().kill();
        std::thread::sleep(down_for);
        let mut fresh = Child::spawn(args)?;
        fresh.wait_for(READY)?;
        fresh.send(GO)?;
        let running_at_us = wall_us()?;
        let pid = fresh.pid();
        self.0[index] = fresh;
        Ok(Restarted {
            killed_pid,
            killed_at_us,
            pid,
            running_at_us,
        })
    }

    /// Every child's process id, in start order.
    pub(crate) fn pids(&self) -> Vec<u32> {
        self.0.iter().map(Child::pid).collect()
    }

    /// Every child's result, in start order.
    pub(crate) fn results<T: DeserializeOwned>(self) -> Result<Vec<T>, BoxError> {
        self.0.into_iter().map(Child::result).collect()
    }
}

/// A child killed and started again ([`Group::kill_and_restart`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Restarted {
    pub(crate) killed_pid: u32,
    /// The wall clock ([`wall_us`]) just before the SIGKILL was sent.
    pub(crate) killed_at_us: u64,
    /// The new child's process id.
    pub(crate) pid: u32,
    /// The wall clock when the new child was ready and sent `GO`.
    pub(crate) running_at_us: u64,
}

/// In a child: writes one line for the parent, at once.
pub(crate) fn say(line: &str) -> Result<(), BoxError> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")?;
    Ok(out.flush()?)
}

/// In a child: prints the result line the parent waits for.
pub(crate) fn print_result<T: serde::Serialize>(value: &T) -> Result<(), BoxError> {
    say(&format!("{RESULT}{}", serde_json::to_string(value)?))
}

/// In a child: says it is ready, then blocks until the parent sends `GO`.
pub(crate) fn ready_then_wait_for_go() -> Result<(), BoxError> {
    say(READY)?;
    wait_for_line(GO)
}

/// In a child: blocks until the parent sends `expected` on stdin.
pub(crate) fn wait_for_line(expected: &str) -> Result<(), BoxError> {
    let mut line = String::new();
    loop {
        line.clear();
        if std::io::stdin().read_line(&mut line)? == 0 {
            return Err(format!("the parent closed stdin before sending {expected}").into());
        }
        if line.trim_end() == expected {
            return Ok(());
        }
    }
}
