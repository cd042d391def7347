//! CPU pinning for W1 1-CPU: the benchmark process and redis-server on one CPU (`taskset -c 1`).
//!
//! `sched_setaffinity` acts on one thread. The W1 1-CPU child pins itself first thing in `main`,
//! before it starts any thread, so every thread it creates inherits the mask (the multi-thread
//! runtime's workers too). redis-server already
//! runs, with background threads (`bio_*`, jemalloc): every thread listed in `/proc/<pid>/task` is
//! pinned, and restored to its old mask afterwards, so the later workloads run unpinned.

use std::fs;

use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;

use crate::rt::BoxError;

/// Pins the calling thread (and every thread it starts later) to `cpu`.
pub(crate) fn pin_current_thread(cpu: usize) -> Result<(), BoxError> {
    sched_setaffinity(Pid::from_raw(0), &single(cpu)?)
        .map_err(|e| format!("cannot pin the benchmark to CPU {cpu}: {e}"))?;
    Ok(())
}

/// Threads of another process pinned to one CPU; their old masks come back on drop.
#[derive(Debug)]
pub(crate) struct PinnedProcess {
    saved: Vec<(Pid, CpuSet)>,
}

impl PinnedProcess {
    /// Pins every thread of process `pid` to `cpu`.
    pub(crate) fn pin(pid: u32, cpu: usize) -> Result<PinnedProcess, BoxError> {
        let set = single(cpu)?;
        let mut pinned = PinnedProcess { saved: Vec::new() };
        for tid in threads(pid)? {
            let old = sched_getaffinity(tid)
                .map_err(|e| format!("cannot read the CPU mask of thread {tid}: {e}"))?;
            sched_setaffinity(tid, &set)
                .map_err(|e| format!("cannot pin thread {tid} of pid {pid} to CPU {cpu}: {e}"))?;
            pinned.saved.push((tid, old));
        }
        Ok(pinned)
    }

    /// How many threads were pinned.
    pub(crate) fn threads(&self) -> usize {
        self.saved.len()
    }
}

impl Drop for PinnedProcess {
    fn drop(&mut self) {
        for (tid, old) in &self.saved {
            // A thread that exited meanwhile needs no restoring.
            let _ = sched_setaffinity(*tid, old);
        }
    }
}

fn single(cpu: usize) -> Result<CpuSet, BoxError> {
    let mut set = CpuSet::new();
    set.set(cpu)
        .map_err(|e| format!("CPU {cpu} cannot be put in a CPU set: {e}"))?;
    Ok(set)
}

/// The thread ids of process `pid`.
fn threads(pid: u32) -> Result<Vec<Pid>, BoxError> {
    let dir = format!("/proc/{pid}/task");
    let mut tids = Vec::new();
    for entry in fs::read_dir(&dir).map_err(|e| format!("cannot list {dir}: {e}"))? {
        let name = entry?.file_name();
        if let Some(tid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) {
            tids.push(Pid::from_raw(tid));
        }
    }
    if tids.is_empty() {
        return Err(format!("{dir} lists no threads").into());
    }
    Ok(tids)
}
