//! Subscriptions of other parts of dlock (the scheduler's `run_now` wake-ups) on a client's own
//! connection: messages on a listened channel go to its [`Subscription`]s instead of the
//! waiters, so listening costs no extra connection.
//!
//! Messages are hints: one published while the connection reconnects is lost, so every
//! subscription also hears [`Heard::Gap`] after a disconnection and should look again for
//! whatever the messages announce.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use redis::{PushInfo, PushKind, Value};
use tokio::sync::mpsc;

use crate::error::{Error, Result};
use crate::runtime::{lock, spawn_detached};
use crate::transport::conn::Conn;

/// What a [`Subscription`] hears. `#[non_exhaustive]`: a later release may tell more (match
/// with a `_` arm).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Heard {
    /// A message published on the channel.
    Message(Vec<u8>),
    /// The connection dropped: messages published meanwhile are lost.
    Gap,
}

/// The listeners of one channel: their ids and where their messages go.
type Senders = Vec<(u64, mpsc::UnboundedSender<Heard>)>;

/// The listened channels of one client, and where their messages go.
#[derive(Debug, Default)]
pub(crate) struct Listeners {
    channels: Mutex<HashMap<Arc<str>, Senders>>,
    next_id: std::sync::atomic::AtomicU64,
}

impl Listeners {
    /// Takes `info` if it is for a listened channel (or a disconnection, which every listener
    /// hears too); `false` leaves it to the waiters.
    pub(crate) fn on_push(&self, info: &PushInfo) -> bool {
        match info.kind {
            PushKind::Message | PushKind::SMessage => {
                let Some(Value::BulkString(channel)) = info.data.first() else {
                    return false;
                };
                let Ok(channel) = std::str::from_utf8(channel) else {
                    return false;
                };
                let channels = lock(&self.channels);
                let Some(senders) = channels.get(channel) else {
                    return false;
                };
                if let Some(Value::BulkString(payload)) = info.data.get(1) {
                    for (_, sender) in senders {
                        let _ = sender.send(Heard::Message(payload.clone()));
                    }
                }
                true
            }
            PushKind::Disconnection => {
                for senders in lock(&self.channels).values() {
                    for (_, sender) in senders {
                        let _ = sender.send(Heard::Gap);
                    }
                }
                false
            }
            _ => false,
        }
    }

    /// After a Sentinel client moved to another master (`conn`): subscribes every listened
    /// channel there, then tells every listener about the gap (messages published on the old
    /// master, or meanwhile, are lost). In the background.
    pub(crate) fn resubscribe(self: &Arc<Self>, conn: Conn) {
        let listeners = self.clone();
        spawn_detached(async move {
            let channels: Vec<Arc<str>> = lock(&listeners.channels).keys().cloned().collect();
            for channel in channels {
                if let Err(e) = conn.subscribe(&channel).await {
                    tracing::debug!(%channel, error = %e, "dlock: cannot subscribe on the new master yet");
                }
            }
            for senders in lock(&listeners.channels).values() {
                for (_, sender) in senders {
                    let _ = sender.send(Heard::Gap);
                }
            }
        });
    }

    /// Listens on `channel` (subscribing the connection if nobody listened yet).
    pub(crate) async fn subscribe(
        self: &Arc<Self>,
        conn: &Conn,
        channel: &str,
    ) -> Result<Subscription> {
        let (sender, receiver) = mpsc::unbounded_channel();
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let channel: Arc<str> = channel.into();
        let first = {
            let mut channels = lock(&self.channels);
            let senders = channels.entry(channel.clone()).or_default();
            senders.push((id, sender));
            senders.len() == 1
        };
        let subscription = Subscription {
            receiver,
            listeners: self.clone(),
            conn: conn.clone(),
            channel: channel.clone(),
            id,
        };
        if first {
            conn.subscribe(&channel)
                .await
                .map_err(|e| Error::from_redis("subscribe", e))?;
        }
        Ok(subscription)
    }
}

/// One listener of a channel on a client's connection; unsubscribes with the last one.
#[derive(Debug)]
pub struct Subscription {
    receiver: mpsc::UnboundedReceiver<Heard>,
    listeners: Arc<Listeners>,
    conn: Conn,
    channel: Arc<str>,
    id: u64,
}

impl Subscription {
    /// The next thing heard on the channel.
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is lost when the future is dropped.
    pub async fn next(&mut self) -> Option<Heard> {
        self.receiver.recv().await
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let last = {
            let mut channels = lock(&self.listeners.channels);
            let Some(senders) = channels.get_mut(&self.channel) else {
                return;
            };
            senders.retain(|(id, _)| *id != self.id);
            let last = senders.is_empty();
            if last {
                channels.remove(&self.channel);
            }
            last
        };
        if last {
            let (conn, channel) = (self.conn.clone(), self.channel.clone());
            spawn_detached(async move {
                if let Err(e) = conn.unsubscribe(&channel).await {
                    tracing::debug!(%channel, error = %e, "dlock: unsubscribe failed");
                }
            });
        }
    }
}
