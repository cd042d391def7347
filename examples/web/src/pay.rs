//! Run with: `cargo run -p web` (see the crate docs); this is the payment itself.
//!
//! [`Payments::pay`] runs under `#[distributed_lock]`: read the order, charge the (simulated)
//! provider, record the payment. The charge takes 50–200 ms, and that window is where two
//! replicas would both see "unpaid" and both charge without the lock. The record carries the
//! lock's fencing token, which the store checks ([`crate::store::Store::record_payment`]).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dlock_core::{Client, distributed_lock};

use crate::error::PayError;
use crate::store::{Receipt, Recorded, Store};

/// Pays orders, at most one payment per order at a time across every replica.
#[derive(Debug)]
pub struct Payments {
    locks: Client,
    store: Store,
    instance: String,
    provider_latency: Option<Duration>,
}

impl Payments {
    /// Payments through `locks` and `store`, signed by `instance`; the provider answers after
    /// `provider_latency`, or after 50–200 ms when `None`.
    pub fn new(
        locks: Client,
        store: Store,
        instance: String,
        provider_latency: Option<Duration>,
    ) -> Self {
        Self {
            locks,
            store,
            instance,
            provider_latency,
        }
    }

    /// Pays order `order_id` once: under the order's lock, charge it unless it is paid, and
    /// record the payment fenced by the lock's token.
    ///
    /// The lock waits 1 s for a payment in progress elsewhere, long enough for the usual
    /// provider call, so a double click mostly learns "already paid" with the receipt; past
    /// that it answers busy (turned into "in progress, retry" by [`PayError::for_order`]).
    ///
    /// # Errors
    /// [`PayError::AlreadyPaid`] with the receipt of the earlier payment, [`PayError::NotFound`],
    /// [`PayError::Fenced`] if a newer holder wrote the order, [`PayError::Lock`] for a busy
    /// lock, a lost lease or Redis trouble, [`PayError::Store`] if the store fails.
    ///
    /// # Cancel safety
    /// Dropping the future (the client hung up) stops the payment at its next step and releases
    /// the lock in the background. A charge already made stays in the provider's ledger; a real
    /// provider call should carry an idempotency key (the order id) for that reason.
    #[distributed_lock(
        key = "order:{order_id}",
        ttl = "10s",
        wait = "1s",
        client = self.locks,
        guard = lease,
    )]
    pub async fn pay(&self, order_id: u64) -> Result<Receipt, PayError> {
        let order = self
            .store
            .get(order_id)
            .await?
            .ok_or(PayError::NotFound(order_id))?;
        if let Some(receipt) = order.receipt {
            return Err(PayError::AlreadyPaid(receipt));
        }
        // Without the lock, every concurrent request for this order would be here at once.
        let charge_id = self.charge(order_id, order.amount).await?;
        // Issued on demand (one round trip), and only while the lock is still ours.
        let fence = lease.fencing_token().await?;
        let receipt = Receipt {
            order_id,
            amount: order.amount,
            charge_id,
            fencing_token: fence.get(),
            paid_by: self.instance.clone(),
        };
        match self.store.record_payment(&receipt).await? {
            Recorded::Done => Ok(receipt),
            Recorded::AlreadyPaid(earlier) => Err(PayError::AlreadyPaid(earlier)),
            Recorded::Stale { last } => Err(PayError::Fenced {
                order_id,
                ours: fence,
                last,
            }),
            Recorded::Missing => Err(PayError::NotFound(order_id)),
        }
    }

    /// The simulated payment provider: answers after a while and keeps a ledger of charges
    /// (in Redis, so that a test can count them across replicas).
    async fn charge(&self, order_id: u64, amount: u64) -> Result<String, PayError> {
        tokio::time::sleep(self.provider_latency.unwrap_or_else(jitter)).await;
        let n = self
            .store
            .log_charge(order_id, amount, &self.instance)
            .await?;
        Ok(format!("ch-{order_id}-{n}"))
    }
}

/// 50–200 ms, spread by the clock (no random-number crate needed for a simulation).
fn jitter() -> Duration {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |t| t.subsec_nanos());
    Duration::from_millis(50 + u64::from(nanos % 151))
}
