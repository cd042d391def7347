//! Run with: `cargo run -p web` (see the crate docs); this is the service's storage.
//!
//! The orders in Redis: one hash per order, one list of payment records per order, and the one
//! write that matters, [`Store::record_payment`], a Lua compare-and-set on the lock's fencing
//! token. The lock keeps two replicas from paying one order at once; the fence keeps a replica
//! whose lease ran out (paused past it) from writing after the replica that took over.
//!
//! Commands go through the lock client's connection (`Client::connection`), which reconnects by
//! itself and bounds every request by the client's command timeout.

use std::fmt;
use std::sync::LazyLock;

use dlock_core::FencingToken;
use redis::AsyncCommands;

/// Records a paid order, fenced; its contract is at the top of the file.
static RECORD_PAYMENT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("record_payment.lua")));

/// Status of an unpaid order, as stored.
const UNPAID: &str = "unpaid";

/// The hash of order `id` (the braces are a cluster hash tag shared by the order's keys).
pub fn order_key(id: u64) -> String {
    format!("order:{{{id}}}")
}

/// The list of payment records of order `id`.
pub fn payments_key(id: u64) -> String {
    format!("order:{{{id}}}:payments")
}

/// What the store holds about one order.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Order {
    /// The order id.
    pub order_id: u64,
    /// Amount in cents.
    pub amount: u64,
    /// `"unpaid"` or `"paid"`.
    pub status: String,
    /// The replica that charged it, once paid.
    pub paid_by: Option<String>,
    /// How many payment records exist (the service never writes more than one).
    pub payments: u64,
    /// The receipt of the payment, once paid.
    pub receipt: Option<Receipt>,
}

/// Proof of one payment, returned by `POST /orders/{id}/pay` and kept with the order.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Receipt {
    /// The order paid.
    pub order_id: u64,
    /// Amount charged, in cents.
    pub amount: u64,
    /// The provider's id of the charge: `ch-<order>-<n>`, where `n` counts the order's charges.
    pub charge_id: String,
    /// The fencing token of the lock hold under which the payment was recorded.
    pub fencing_token: u64,
    /// The replica that charged the order.
    pub paid_by: String,
}

/// The answer of [`Store::record_payment`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// The payment is recorded: the order is paid under this receipt.
    Done,
    /// The order was paid before; nothing was written. The receipt of that payment.
    AlreadyPaid(Receipt),
    /// A writer with a larger fencing token wrote this order first; nothing was written.
    Stale {
        /// The fencing token the store holds for the order.
        last: FencingToken,
    },
    /// There is no such order.
    Missing,
}

/// A failure of the store.
#[derive(Debug)]
pub enum StoreError {
    /// Redis failed the command (unreachable, timed out, or refused it).
    Redis(redis::RedisError),
    /// An order's data is not what this service writes.
    Corrupt(String),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Redis(e) => write!(f, "redis: {e}"),
            Self::Corrupt(what) => write!(f, "corrupt order data: {what}"),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Redis(e) => Some(e),
            Self::Corrupt(_) => None,
        }
    }
}

impl From<redis::RedisError> for StoreError {
    fn from(e: redis::RedisError) -> Self {
        Self::Redis(e)
    }
}

/// The orders of the service, in Redis.
#[derive(Clone, Debug)]
pub struct Store {
    con: dlock_core::Connection,
}

impl Store {
    /// A store on `con` (the lock client's connection: one connection per process).
    pub fn new(con: dlock_core::Connection) -> Self {
        Self { con }
    }

    /// Creates an unpaid order; `false` if one with this id exists (then nothing changes).
    ///
    /// # Errors
    /// [`StoreError::Redis`] when Redis fails the command.
    ///
    /// # Cancel safety
    /// Cancel safe: one atomic `MULTI` that either ran or did not.
    pub async fn create(&self, id: u64, amount: u64) -> Result<bool, StoreError> {
        let key = order_key(id);
        let mut con = self.con.clone();
        let (created, _): (bool, bool) = redis::pipe()
            .atomic()
            .hset_nx(&key, "amount", amount)
            .hset_nx(&key, "status", UNPAID)
            .query_async(&mut con)
            .await?;
        Ok(created)
    }

    /// The order `id`, if it exists.
    ///
    /// # Errors
    /// [`StoreError::Redis`] when Redis fails the command; [`StoreError::Corrupt`] when the
    /// hash holds something this service does not write.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn get(&self, id: u64) -> Result<Option<Order>, StoreError> {
        let mut con = self.con.clone();
        let (fields, payments): (std::collections::HashMap<String, String>, u64) = redis::pipe()
            .hgetall(order_key(id))
            .llen(payments_key(id))
            .query_async(&mut con)
            .await?;
        if fields.is_empty() {
            return Ok(None);
        }
        let corrupt = |what: &str| StoreError::Corrupt(format!("order {id}: {what}"));
        let amount = fields
            .get("amount")
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| corrupt("no numeric amount"))?;
        let receipt = match fields.get("receipt") {
            Some(json) => Some(parse_receipt(json).map_err(|e| corrupt(&e))?),
            None => None,
        };
        Ok(Some(Order {
            order_id: id,
            amount,
            status: fields.get("status").cloned().unwrap_or_default(),
            paid_by: fields.get("paid_by").cloned(),
            payments,
            receipt,
        }))
    }

    /// Records the payment described by `receipt` if its fencing token is not smaller than the
    /// last one stored for the order and the order is unpaid: marks the order paid and appends
    /// one payment record, atomically.
    ///
    /// # Errors
    /// [`StoreError::Redis`] when Redis fails the script; [`StoreError::Corrupt`] for a reply
    /// the script does not give.
    ///
    /// # Cancel safety
    /// Cancel safe and retry safe: a retry of a write that took effect answers
    /// [`Recorded::AlreadyPaid`] with this very receipt.
    pub async fn record_payment(&self, receipt: &Receipt) -> Result<Recorded, StoreError> {
        let json = serde_json::to_string(receipt)
            .map_err(|e| StoreError::Corrupt(format!("receipt: {e}")))?;
        let mut con = self.con.clone();
        let reply: Vec<String> = RECORD_PAYMENT
            .key(order_key(receipt.order_id))
            .key(payments_key(receipt.order_id))
            .arg(receipt.fencing_token)
            .arg(&json)
            .arg(&receipt.paid_by)
            .invoke_async(&mut con)
            .await?;
        match reply.iter().map(String::as_str).collect::<Vec<_>>()[..] {
            ["ok"] => Ok(Recorded::Done),
            ["missing"] => Ok(Recorded::Missing),
            ["paid", json] => parse_receipt(json)
                .map(Recorded::AlreadyPaid)
                .map_err(StoreError::Corrupt),
            ["stale", last] => last
                .parse()
                .map(|last| Recorded::Stale {
                    last: FencingToken::new(last),
                })
                .map_err(|_| StoreError::Corrupt(format!("fence {last:?}"))),
            _ => Err(StoreError::Corrupt(format!("script reply {reply:?}"))),
        }
    }

    /// The simulated provider's ledger: appends one charge of `amount` for order `id` and
    /// returns its position (1 for the first charge of the order).
    ///
    /// # Errors
    /// [`StoreError::Redis`] when Redis fails the command.
    ///
    /// # Cancel safety
    /// Cancel safe: one command (which may have taken effect if the reply was lost).
    pub async fn log_charge(&self, id: u64, amount: u64, by: &str) -> Result<u64, StoreError> {
        let mut con = self.con.clone();
        let n: u64 = con
            .rpush(
                format!("provider:charges:{{{id}}}"),
                format!("{amount} by {by}"),
            )
            .await?;
        Ok(n)
    }
}

fn parse_receipt(json: &str) -> Result<Receipt, String> {
    serde_json::from_str(json).map_err(|e| format!("receipt {json:?}: {e}"))
}
