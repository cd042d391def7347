//! The replica's liveness for its jobs' turns: occurrences go round the live replicas
//! (`claim.lua`), so each replica tells Redis every heartbeat that it is live — only for the
//! jobs it did not try to claim lately, since a claim says as much — and takes itself out at
//! shutdown, so that the others do not wait for its turns.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures_util::future::join_all;
use tokio_util::sync::CancellationToken;

use crate::claim;
use crate::runner::Inner;

/// Beats until `stop`, then unregisters the replica from every job (best effort: its liveness
/// runs out by itself within three heartbeats).
pub(crate) async fn heartbeat(inner: Arc<Inner>, stop: CancellationToken) {
    let every_ms = i64::try_from(inner.heartbeat.as_millis()).unwrap_or(i64::MAX);
    loop {
        let now_ms = inner.clock.local().timestamp_millis();
        let due = inner.jobs.values().filter(|entry| {
            now_ms.saturating_sub(entry.beat_ms.load(Ordering::Relaxed)) >= every_ms
        });
        let beats = due.map(|entry| async {
            if let Err(e) = claim::heartbeat(&inner, entry, true).await {
                tracing::debug!(job = %entry.job.name, error = %e, "dlock-scheduler: heartbeat failed");
            }
        });
        join_all(beats).await;
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(inner.heartbeat) => {}
        }
    }
    let leave = inner.jobs.values().map(|entry| async {
        if let Err(e) = claim::heartbeat(&inner, entry, false).await {
            tracing::debug!(job = %entry.job.name, error = %e, "dlock-scheduler: could not unregister; the replica's liveness will run out");
        }
    });
    join_all(leave).await;
}
