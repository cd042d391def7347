//! `run_now` wake-ups: `request.lua` publishes the job's name on the key prefix's wake channel;
//! this subscriber (one connection per scheduler, opened from
//! [`crate::SchedulerBuilder::wake_url`]) wakes that job's loop, which takes the request at
//! once instead of at its next fallback poll.
//!
//! Messages are hints: one published while the subscriber reconnects is lost, so after every
//! (re)subscription all job loops look for requests, and the fallback poll stays.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::ledger::wake_channel;
use crate::shared::Shared;

/// Longest pause between reconnection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Listens until `stop`, reconnecting with backoff.
pub(crate) async fn listen(shared: Arc<Shared>, client: redis::Client, stop: CancellationToken) {
    let channel = wake_channel(shared.client.key_prefix());
    let mut backoff = Duration::from_millis(100);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            ended = subscribed(&shared, &client, &channel) => {
                if let Err(e) = ended {
                    tracing::debug!(error = %e, "dlock-scheduler: wake-up subscription failed; requests are polled meanwhile");
                } else {
                    backoff = Duration::from_millis(100);
                }
            }
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Subscribes and wakes job loops until the connection ends (`Ok`) or fails to set up (`Err`).
async fn subscribed(
    shared: &Shared,
    client: &redis::Client,
    channel: &str,
) -> redis::RedisResult<()> {
    let timeout = shared.client.command_timeout();
    let setup = async {
        let mut pubsub = client.get_async_pubsub().await?;
        pubsub.subscribe(channel).await?;
        Ok::<_, redis::RedisError>(pubsub)
    };
    let pubsub = tokio::time::timeout(timeout, setup).await.map_err(|_| {
        redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut))
    })??;
    // Requests made before the subscription took effect were not announced to us.
    for entry in shared.jobs.values() {
        entry.wake.notify_one();
    }
    let mut messages = pubsub.into_on_message();
    while let Some(message) = messages.next().await {
        let Ok(job) = message.get_payload::<String>() else {
            continue;
        };
        if let Some(entry) = shared.jobs.get(job.as_str()) {
            entry.wake.notify_one();
        }
    }
    Ok(())
}
