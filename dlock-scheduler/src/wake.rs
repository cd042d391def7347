//! `run_now` wake-ups: `request.lua` publishes on the job's wake channel
//! (`<prefix>{sched:<job>}:wake`, see [`crate::ledger`]); each job's listener, subscribed on the
//! scheduler's own client connection (`dlock_core::ext::subscribe`: no extra
//! connection), wakes the job's loop, which takes the request at once instead of at its next
//! fallback poll.
//!
//! On a cluster dlock-core subscribes with `SSUBSCRIBE` and `request.lua` publishes with
//! `SPUBLISH` (`dlock_core::ext::publish_command`): the channel carries the job's hash
//! tag, so the script that queues the request may publish on it and the message stays on the
//! job's shard.
//!
//! Messages are hints: one published while the connection reconnects is lost, so a gap in the
//! subscription ([`Heard::Gap`]) wakes the job's loop too, as does every (re)subscription, and
//! the fallback poll stays.

use std::sync::Arc;
use std::time::Duration;

use dlock_core::ext::{self, Heard};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::replica_state::{JobEntry, Shared};

/// Backoff between subscription attempts.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Wakes `entry`'s job loop on its `run_now` wake-ups until `stop`.
pub(crate) async fn listen(shared: Arc<Shared>, entry: Arc<JobEntry>, stop: CancellationToken) {
    let what = format!("job `{}`", entry.job.name);
    stop.run_until_cancelled(subscribed(&shared, &entry.keys.wake, &entry.wake, &what))
        .await;
}

/// Notifies `notify` on every message of `channel` (and every gap) until `stop`: for `what`
/// (named in the logs).
pub(crate) async fn listen_channel(
    shared: Arc<Shared>,
    channel: String,
    notify: Arc<Notify>,
    what: &'static str,
    stop: CancellationToken,
) {
    stop.run_until_cancelled(subscribed(&shared, &channel, &notify, what))
        .await;
}

/// Subscribes (again, with backoff, when subscribing fails or the subscription ends) and
/// notifies on every message and gap.
async fn subscribed(shared: &Shared, channel: &str, notify: &Notify, what: &str) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        match ext::subscribe(&shared.client, channel).await {
            Ok(mut subscription) => {
                backoff = FIRST_BACKOFF;
                // What was announced before the subscription took effect did not reach us.
                notify.notify_one();
                while let Some(heard) = subscription.next().await {
                    match heard {
                        // Something changed, or messages may have been lost: look.
                        Heard::Message(_) | Heard::Gap => notify.notify_one(),
                        // Whatever a later dlock-core may tell: looking again is always safe.
                        _ => notify.notify_one(),
                    }
                }
            }
            Err(e) => {
                tracing::debug!(%what, error = %e, "dlock-scheduler: wake-up subscription failed; polling meanwhile");
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}
