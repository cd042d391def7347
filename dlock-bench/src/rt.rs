//! The floor every other module stands on: the benchmark's error type, its two Tokio runtime
//! shapes (and [`Flavour`], naming one where a workload runs on either), its clocks (monotonic ns
//! in-process and across processes, CPU time of this process), and its allocation counter (the
//! process's global allocator). Nothing here knows a workload.

use std::alloc::System;
use std::time::Instant;

use nix::sys::resource::{UsageWho, getrusage};
use nix::sys::time::TimeVal;
use nix::time::{ClockId, clock_gettime};

use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

use crate::spec::WORKER_THREADS;

/// Every allocation of this process goes through a counting wrapper of the system allocator,
/// from `stats_alloc`: its `unsafe impl GlobalAlloc` lives in that crate, so this one keeps the
/// workspace's `unsafe_code = "forbid"`. It counts process-wide (every thread: W2's runtime has
/// two), at the price of a few atomic additions per allocation and free, paid by every subject
/// alike.
#[global_allocator]
static ALLOCATOR: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Allocator calls of this process so far, every thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Allocations {
    /// New blocks and reallocations (each one call into the allocator).
    pub(crate) calls: u64,
    /// Bytes asked for by new blocks and by reallocations that grew one.
    pub(crate) bytes: u64,
}

impl Allocations {
    /// The counts now.
    pub(crate) fn now() -> Allocations {
        let stats = ALLOCATOR.stats();
        let count = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
        Allocations {
            calls: count(stats.allocations) + count(stats.reallocations),
            bytes: count(stats.bytes_allocated),
        }
    }

    /// The calls and bytes from `self` to `later`.
    pub(crate) fn until(self, later: Allocations) -> Allocations {
        Allocations {
            calls: later.calls.saturating_sub(self.calls),
            bytes: later.bytes.saturating_sub(self.bytes),
        }
    }
}

/// Bytes this process has allocated and not yet freed (every thread): the heap it holds, as the
/// program asked for it (without the allocator's own overhead, which RSS also counts).
pub(crate) fn live_heap_bytes() -> i64 {
    let stats = ALLOCATOR.stats();
    let bytes = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    bytes(stats.bytes_allocated) - bytes(stats.bytes_deallocated)
}

/// Errors of the benchmark: reported with their message, the run stops.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A current-thread runtime (W1, W1 1-CPU, W2 current-thread; control work of the parent).
pub(crate) fn current_thread_runtime() -> Result<tokio::runtime::Runtime, BoxError> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// A multi-thread runtime with one worker per vCPU (W1 1-CPU multi-thread, W2, W3 workers,
/// memory probes).
pub(crate) fn multi_thread_runtime() -> Result<tokio::runtime::Runtime, BoxError> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKER_THREADS)
        .enable_all()
        .build()?)
}

/// Which of the two runtimes a workload that runs on either (W1 1-CPU, W2) runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flavour {
    /// [`current_thread_runtime`].
    CurrentThread,
    /// [`multi_thread_runtime`].
    MultiThread,
}

impl Flavour {
    /// Both.
    const ALL: [Flavour; 2] = [Flavour::CurrentThread, Flavour::MultiThread];

    /// A fresh runtime of this flavour.
    pub(crate) fn runtime(self) -> Result<tokio::runtime::Runtime, BoxError> {
        match self {
            Flavour::CurrentThread => current_thread_runtime(),
            Flavour::MultiThread => multi_thread_runtime(),
        }
    }

    /// Name on a child's command line (`--runtime NAME`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Flavour::CurrentThread => "current_thread",
            Flavour::MultiThread => "multi_thread",
        }
    }

    /// The flavour named `name` on the command line.
    pub(crate) fn parse(name: &str) -> Result<Flavour, BoxError> {
        Flavour::ALL
            .into_iter()
            .find(|f| f.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Flavour::ALL.iter().map(|f| f.name()).collect();
                format!("unknown runtime `{name}`; use {}", names.join(", ")).into()
            })
    }
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

/// The wall clock (CLOCK_REALTIME) in µs since the Unix epoch: the clock Redis' `TIME` reads on
/// this machine, so instants taken here, in another process of the benchmark and by the
/// benchmark's redis-server (the scheduler ledger's ms) compare directly.
pub(crate) fn wall_us() -> Result<u64, BoxError> {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?;
    Ok(u64::try_from(since.as_micros())?)
}

/// Sleeps until the wall clock reads `at_us` ([`wall_us`]); returns at once if it has passed.
pub(crate) fn sleep_until_wall_us(at_us: u64) -> Result<(), BoxError> {
    let now = wall_us()?;
    if at_us > now {
        std::thread::sleep(std::time::Duration::from_micros(at_us - now));
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flavours_parse_back() {
        for flavour in Flavour::ALL {
            assert_eq!(Flavour::parse(flavour.name()).unwrap(), flavour);
        }
        assert!(Flavour::parse("multi").is_err());
    }

    #[test]
    fn the_allocator_counts_this_threads_allocations() {
        let before = Allocations::now();
        let boxed = std::hint::black_box(Box::new([0_u8; 100]));
        let delta = before.until(Allocations::now());
        drop(boxed);
        // Other test threads may allocate too: at least ours is counted.
        assert!(delta.calls >= 1 && delta.bytes >= 100, "{delta:?}");
    }
}
