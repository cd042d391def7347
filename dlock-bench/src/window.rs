//! The measured window of a workload: what Redis and this process did between its opening and
//! its closing: commands (`INFO commandstats`), server CPU (`INFO cpu`) and client CPU
//! (`getrusage`). The CPU figures show where the time of a pair goes (client, server, or waiting).

use serde::{Deserialize, Serialize};

use crate::redis_stats::{CommandStats, CommandUsec, Control};
use std::future::Future;
use std::time::Instant;

use crate::rt::{BoxError, elapsed_ns, process_cpu_us};

/// Counters at one instant.
#[derive(Clone, Debug)]
pub(crate) struct Snapshot {
    commands: CommandStats,
    usec: CommandUsec,
    server_cpu_us: u64,
    client_cpu_us: u64,
}

/// What happened inside a window.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct WindowDelta {
    /// Calls per command.
    pub(crate) commands: CommandStats,
    /// Server time per command (µs, `usec` of `INFO commandstats`).
    pub(crate) usec: CommandUsec,
    /// CPU time of the whole redis-server process (user + system), µs.
    pub(crate) server_cpu_us: u64,
    /// CPU time of this process, every thread (user + system), µs.
    pub(crate) client_cpu_us: u64,
}

impl Snapshot {
    /// Reads every counter (one `INFO commandstats cpu`).
    pub(crate) async fn take(control: &mut Control) -> Result<Snapshot, BoxError> {
        let (commands, usec, server_cpu_us) = control.commandstats_and_cpu().await?;
        Ok(Snapshot {
            commands,
            usec,
            server_cpu_us,
            client_cpu_us: process_cpu_us()?,
        })
    }

    /// Reads the counters again and returns the difference.
    pub(crate) async fn delta(&self, control: &mut Control) -> Result<WindowDelta, BoxError> {
        let client_cpu_us = process_cpu_us()?;
        let after = Snapshot::take(control).await?;
        Ok(WindowDelta {
            commands: self.commands.delta(&after.commands),
            usec: self.usec.delta(&after.usec),
            server_cpu_us: after.server_cpu_us.saturating_sub(self.server_cpu_us),
            client_cpu_us: client_cpu_us.saturating_sub(self.client_cpu_us),
        })
    }
}

/// Runs `work` as a measured window: the counters are read right before and right after it, and
/// its wall time (ns) is taken around it alone.
pub(crate) async fn measure<T>(
    control: &mut Control,
    work: impl Future<Output = Result<T, BoxError>>,
) -> Result<(T, u64, WindowDelta), BoxError> {
    let before = Snapshot::take(control).await?;
    let start = Instant::now();
    let out = work.await?;
    let window_ns = elapsed_ns(start);
    let delta = before.delta(control).await?;
    Ok((out, window_ns, delta))
}

/// redis-server's CPU time per second while this process sends nothing (its timers, `INFO`
/// itself), measured over `span`, ms/s: the baseline under a workload's server CPU figure when
/// that workload is as light as a few requests per second.
pub(crate) async fn idle_server_cpu_ms_per_s(
    control: &mut Control,
    span: std::time::Duration,
) -> Result<f64, BoxError> {
    let before = Snapshot::take(control).await?;
    let start = std::time::Instant::now();
    tokio::time::sleep(span).await;
    let delta = before.delta(control).await?;
    Ok(crate::stats::ratio(delta.server_cpu_us, 1) / 1e3 / start.elapsed().as_secs_f64())
}
