//! The namespaces of a [`Network`](crate::Network), made and removed with `ip` (iproute2).
//!
//! Every namespace the kit makes is named `dlock-net-<pid>-<n>-<role>`: `<pid>` is the test
//! process that made it. A namespace outlives a SIGKILLed test (no `Drop` runs), so every new
//! network first removes the namespaces of pids that no longer run ([`sweep_stale`]). Removing
//! one kills the processes still inside it first: `ip netns del` only unmounts the name, and the
//! namespace (with its redis-servers) would live on as long as a process is in it.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;

use crate::HarnessError;

/// The first part of every namespace name the kit makes.
pub(crate) const NAME_PREFIX: &str = "dlock-net-";

/// Networks made by this process so far: the `<n>` of the names.
static NETWORKS: AtomicU32 = AtomicU32::new(0);

/// `dlock-net-<pid>-<n>`: the stem of a new network's namespace names, unique on the machine
/// while this process runs.
pub(crate) fn new_stem() -> String {
    let n = NETWORKS.fetch_add(1, Ordering::SeqCst);
    format!("{NAME_PREFIX}{}-{n}", std::process::id())
}

/// Runs `ip <args>` and returns its stdout; the error carries the command line and ip's
/// stderr.
pub(crate) fn ip(args: &[&str]) -> Result<String, HarnessError> {
    let mut cmd = Command::new("ip");
    cmd.args(args);
    let line = crate::process::command_line(&cmd);
    let output = cmd.output().map_err(|e| {
        HarnessError::new(format!(
            "cannot run `{line}`: is iproute2 installed (apt-get install -y iproute2)?"
        ))
        .with_command(line.clone())
        .with_source(e)
    })?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(
            HarnessError::new(format!("`{line}` failed ({})", output.status))
                .with_command(line)
                .with_section("ip's stderr", String::from_utf8_lossy(&output.stderr)),
        )
    }
}

/// One namespace, removed (its processes killed first) on drop.
#[derive(Debug)]
pub(crate) struct Namespace {
    name: String,
}

impl Namespace {
    /// Makes the namespace `name` with its loopback up.
    pub(crate) fn add(name: String) -> Result<Namespace, HarnessError> {
        ip(&["netns", "add", &name])?;
        // From here on, a failure removes it again (drop).
        let ns = Namespace { name };
        ip(&["-n", &ns.name, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// `ip -n <ns> <args>`.
    pub(crate) fn ip(&self, args: &[&str]) -> Result<String, HarnessError> {
        let mut full = vec!["-n", self.name.as_str()];
        full.extend_from_slice(args);
        ip(&full)
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        remove(&self.name);
    }
}

/// Kills every process in namespace `name` and deletes it. Best effort, never panics: it runs
/// in `Drop`, and a namespace that is already gone is what it wants.
pub(crate) fn remove(name: &str) {
    // A few rounds: an `ip netns exec` that was entering the namespace during one round is in
    // it by the next (one that has not opened it by the deletion fails to start).
    for _ in 0..KILL_ROUNDS {
        let Ok(pids) = ip(&["netns", "pids", name]) else {
            break;
        };
        let pids: Vec<i32> = pids
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            // Listed in the namespace just now: one of ours, or one started inside it.
            let _ = signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        std::thread::sleep(KILL_PAUSE);
    }
    let _ = ip(&["netns", "del", name]);
}

/// Rounds of [`remove`]'s kill, and the pause after each that found a process.
const KILL_ROUNDS: usize = 5;
const KILL_PAUSE: std::time::Duration = std::time::Duration::from_millis(10);

/// Removes the namespaces of processes that no longer run (a test that was SIGKILLed).
/// Returns their names.
pub(crate) fn sweep_stale() -> Vec<String> {
    let Ok(list) = ip(&["netns", "list"]) else {
        return Vec::new();
    };
    let stale: Vec<String> = list
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| {
            owner_pid(name).is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
        })
        .map(str::to_owned)
        .collect();
    for name in &stale {
        remove(name);
    }
    stale
}

/// The pid in a kit namespace's name (`dlock-net-<pid>-…`), or `None` for any other name.
pub(crate) fn owner_pid(name: &str) -> Option<u32> {
    name.strip_prefix(NAME_PREFIX)?
        .split('-')
        .next()?
        .parse()
        .ok()
}

/// Why namespaces cannot be made here, or `Ok` when they can: root, `ip` present, and a probe
/// namespace made and removed.
pub(crate) fn requirements() -> Result<(), String> {
    if !nix::unistd::geteuid().is_root() {
        return Err("network namespaces need root (ip netns add)".into());
    }
    let probe = format!("{}-probe", new_stem());
    match Namespace::add(probe) {
        Ok(ns) => {
            drop(ns);
            Ok(())
        }
        Err(error) => Err(format!("cannot make a network namespace: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_kit_names_have_an_owner() {
        assert_eq!(owner_pid("dlock-net-4242-0-router"), Some(4242));
        assert_eq!(owner_pid("dlock-net-4242-3-n1"), Some(4242));
        assert_eq!(owner_pid("dlock-net-x-0-router"), None);
        assert_eq!(owner_pid("other-4242"), None);
        let stem = new_stem();
        assert_eq!(owner_pid(&stem), Some(std::process::id()));
    }
}
