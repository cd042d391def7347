//! The replica's liveness for its jobs' turns: occurrences go round the live replicas
//! (`claim.lua`), so each replica tells Redis every heartbeat that it is live
//! (`heartbeat.lua`) — only for the jobs it did not try to claim lately, since a claim says as
//! much — and takes itself out at shutdown, so that the others do not wait for its turns.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use dlock_core::__private;
use futures_util::future::join_all;
use redis::Value;
use tokio_util::sync::CancellationToken;

use crate::error::Error;
use crate::scripts::{self, millis};
use crate::shared::{JobEntry, Shared};

/// Beats until `stop`, then unregisters the replica from every job (best effort: its liveness
/// runs out by itself within three heartbeats).
pub(crate) async fn heartbeat(shared: Arc<Shared>, stop: CancellationToken) {
    let every_ms = i64::try_from(shared.heartbeat.as_millis()).unwrap_or(i64::MAX);
    loop {
        let now_ms = shared.clock.local().timestamp_millis();
        let due = shared.jobs.values().filter(|entry| {
            now_ms.saturating_sub(entry.beat_ms.load(Ordering::Relaxed)) >= every_ms
        });
        let beats = due.map(|entry| async {
            if let Err(e) = beat(&shared, entry, true).await {
                tracing::debug!(job = %entry.job.name, error = %e, "dlock-scheduler: heartbeat failed");
            }
        });
        let registered = async {
            if let Err(e) = crate::registry::publish(&shared, true).await {
                tracing::debug!(error = %e, "dlock-scheduler: could not renew the job registry entry");
            }
        };
        tokio::join!(join_all(beats), registered);
        let slept = stop.run_until_cancelled(tokio::time::sleep(shared.heartbeat));
        if slept.await.is_none() {
            break;
        }
    }
    let leave = shared.jobs.values().map(|entry| async {
        if let Err(e) = beat(&shared, entry, false).await {
            tracing::debug!(job = %entry.job.name, error = %e, "dlock-scheduler: could not unregister; the replica's liveness will run out");
        }
    });
    let withdrawn = async {
        if let Err(e) = crate::registry::publish(&shared, false).await {
            tracing::debug!(error = %e, "dlock-scheduler: could not withdraw the job registry entry; it expires by itself");
        }
    };
    tokio::join!(join_all(leave), withdrawn);
}

/// Tells Redis that this replica is live for the job (`live`), or no longer (`!live`, at
/// shutdown, so that the others do not wait for its turns).
async fn beat(shared: &Shared, entry: &JobEntry, live: bool) -> Result<(), Error> {
    let mut invocation = scripts::HEARTBEAT.prepare_invoke();
    invocation
        .key(&entry.keys.replicas)
        .arg(&shared.replica.id)
        .arg(if live { millis(shared.liveness()) } else { 0 });
    let sent = shared.clock.local();
    let server_ms: i64 = __private::invoke(&shared.client, &invocation, "heartbeat").await?;
    if live {
        shared.heard(Some(entry), sent, Some(&Value::Int(server_ms)));
    }
    Ok(())
}
