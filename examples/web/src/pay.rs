//! Run with: `cargo run -p web` (see the crate docs); this is the payment itself.
//!
//! [`Payments::pay`] runs under `#[distributed_lock]`: claim the order with the lock's fencing
//! token, charge the (simulated) provider, record the payment. The charge takes 50–200 ms, and
//! that window is where two replicas would both see "unpaid" and both charge without the lock.
//! The claim and the record carry the lock's fencing token, which the store checks
//! ([`crate::store::Store::claim`], [`crate::store::Store::record_payment`]).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dlock_core::{Client, FencingToken, distributed_lock};
use redis::AsyncCommands;

use crate::error::PayError;
use crate::log::log;
use crate::store::{Claimed, Receipt, Recorded, Store, StoreError};

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

    /// Pays order `order_id` once: under the order's lock, claim the order with the lock's
    /// fencing token, charge it unless it is paid, and record the payment, fenced by the same
    /// token.
    ///
    /// The lock waits 1 s for a payment in progress elsewhere, long enough for the usual
    /// provider call, so a double click mostly learns "already paid" with the receipt; past
    /// that it answers busy (turned into "in progress, retry" by [`PayError::for_order`]). Its
    /// lease is the client's default TTL (`--lock-ttl-ms`), renewed while the payment runs.
    ///
    /// A lost lease does not cancel the payment (`on_lost = "signal"`): once the provider may
    /// have charged, the record must still be attempted, and the store decides by the fence. A
    /// holder that was paused past its lease is refused there if a newer holder claimed the
    /// order meanwhile ([`PayError::Fenced`]), and records the payment if nobody did (a
    /// cancelled payment would leave a charge without a record, and the client's retry would
    /// charge again).
    ///
    /// # Errors
    /// [`PayError::AlreadyPaid`] with the receipt of the earlier payment, [`PayError::NotFound`],
    /// [`PayError::Fenced`] if a newer holder claimed or paid the order, [`PayError::Lock`] for
    /// a busy lock or Redis trouble, [`PayError::Store`] if the store fails.
    ///
    /// # Cancel safety
    /// Dropping the future (the client hung up) stops the payment at its next step and releases
    /// the lock in the background. A charge already made stays in the provider's ledger; a real
    /// provider call should carry an idempotency key (the order id) for that reason.
    #[distributed_lock(
        key = "order:{order_id}",
        wait = "1s",
        on_lost = "signal",
        client = self.locks,
        guard = lease,
    )]
    pub async fn pay(&self, order_id: u64) -> Result<Receipt, PayError> {
        // The token first (one round trip, issued only while the lock is ours): a holder whose
        // lease runs out later keeps it, and every write below carries it to the store.
        let fence = lease.fencing_token().await?;
        let amount = match self.store.claim(order_id, fence).await? {
            Claimed::Unpaid { amount } => amount,
            Claimed::AlreadyPaid(earlier) => return Err(PayError::AlreadyPaid(earlier)),
            Claimed::Stale { last } => return Err(fenced(order_id, fence, last)),
            Claimed::Missing => return Err(PayError::NotFound(order_id)),
        };
        log(format_args!(
            "order {order_id}: charging {amount} cents under fencing token {fence}"
        ));
        // Without the lock, every concurrent request for this order would be here at once.
        let charge_id = self.charge(order_id, amount).await?;
        let receipt = Receipt {
            order_id,
            amount,
            charge_id,
            fencing_token: fence.get(),
            paid_by: self.instance.clone(),
        };
        match self.store.record_payment(&receipt).await? {
            Recorded::Done => Ok(receipt),
            Recorded::AlreadyPaid(earlier) => Err(PayError::AlreadyPaid(earlier)),
            Recorded::Stale { last } => Err(fenced(order_id, fence, last)),
            Recorded::Missing => Err(PayError::NotFound(order_id)),
        }
    }

    /// The simulated payment provider: answers after a while and keeps a ledger of charges,
    /// `provider:charges:{<order>}` in the locks' Redis whatever the store (it stands for a
    /// third party, so that a test can count its charges across replicas).
    async fn charge(&self, order_id: u64, amount: u64) -> Result<String, PayError> {
        tokio::time::sleep(self.provider_latency.unwrap_or_else(jitter)).await;
        let mut con = self.locks.connection();
        let n: u64 = con
            .rpush(
                format!("provider:charges:{{{order_id}}}"),
                format!("{amount} by {}", self.instance),
            )
            .await
            .map_err(StoreError::Redis)?;
        Ok(format!("ch-{order_id}-{n}"))
    }
}

fn fenced(order_id: u64, ours: FencingToken, last: FencingToken) -> PayError {
    PayError::Fenced {
        order_id,
        ours,
        last,
    }
}

/// 50–200 ms, spread by the clock (no random-number crate needed for a simulation).
fn jitter() -> Duration {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |t| t.subsec_nanos());
    Duration::from_millis(50 + u64::from(nanos % 151))
}
