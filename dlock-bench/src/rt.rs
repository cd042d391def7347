//! The floor every other module stands on: the benchmark's error type, its two Tokio runtime
//! shapes, and its clocks (monotonic ns in-process and across processes, CPU time of this
//! process). Nothing here knows a workload.

use std::time::Instant;

use nix::sys::resource::{UsageWho, getrusage};
use nix::sys::time::TimeVal;
use nix::time::{ClockId, clock_gettime};

use crate::spec::WORKER_THREADS;

/// Errors of the benchmark: reported with their message, the run stops.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A current-thread runtime (W1; control work of the parent).
pub(crate) fn current_thread_runtime() -> Result<tokio::runtime::Runtime, BoxError> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// A multi-thread runtime with one worker per vCPU (W2, W3 workers, memory probes).
pub(crate) fn multi_thread_runtime() -> Result<tokio::runtime::Runtime, BoxError> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKER_THREADS)
        .enable_all()
        .build()?)
}

/// Nanoseconds since `start`, saturating.
pub(crate) fn elapsed_ns(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process of this machine, so W3 events of
/// different processes can be merged.
pub(crate) fn monotonic_ns() -> Result<u64, BoxError> {
    let now = clock_gettime(ClockId::CLOCK_MONOTONIC)?;
    let secs = u64::try_from(now.tv_sec())?;
    let nanos = u64::try_from(now.tv_nsec())?;
    Ok(secs * 1_000_000_000 + nanos)
}

/// User + system CPU time of this process (all threads), µs.
pub(crate) fn process_cpu_us() -> Result<u64, BoxError> {
    let usage = getrusage(UsageWho::RUSAGE_SELF)?;
    Ok(timeval_us(usage.user_time())? + timeval_us(usage.system_time())?)
}

fn timeval_us(t: TimeVal) -> Result<u64, BoxError> {
    let secs = u64::try_from(t.tv_sec())?;
    let micros = u64::try_from(t.tv_usec())?;
    Ok(secs * 1_000_000 + micros)
}
