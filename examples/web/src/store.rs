//! Run with: `cargo run -p web [-- --store postgres --postgres-url URL]` (see the crate docs);
//! this is the service's storage.
//!
//! The orders live in Redis (the default: one hash and one list per order, written by Lua
//! scripts) or in PostgreSQL (`--store postgres`: two tables, written by SQL whose `WHERE`
//! checks the fence). Either way the two writes that matter are fenced by the lock's token:
//!
//! 1. [`Store::claim`], before the provider is charged: the holder's token goes into the order,
//!    unless a larger one is there already;
//! 2. [`Store::record_payment`], after the charge: the order becomes paid, with one payment
//!    record, only if it is unpaid and no larger token claimed it.
//!
//! The lock keeps two replicas from paying one order at once; the fence keeps a replica whose
//! lease ran out (paused past it) from writing once the replica that took over has claimed the
//! order. Both backends give the same answers ([`Claimed`], [`Recorded`]); the tests run the
//! same checks on each.

mod postgres_store;
mod redis_store;

pub use redis_store::{order_key, payments_key};

use std::fmt;

use dlock_core::FencingToken;

use postgres_store::PostgresStore;
use redis_store::RedisStore;

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

/// The answer of [`Store::claim`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claimed {
    /// The order is unpaid and now carries the holder's token: charge this amount (cents).
    Unpaid {
        /// Amount to charge, in cents.
        amount: u64,
    },
    /// The order was paid before; nothing was written. The receipt of that payment.
    AlreadyPaid(Receipt),
    /// A holder with a larger fencing token claimed or paid this order; nothing was written.
    Stale {
        /// The fencing token the store holds for the order.
        last: FencingToken,
    },
    /// There is no such order.
    Missing,
}

/// The answer of [`Store::record_payment`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// The payment is recorded: the order is paid under this receipt.
    Done,
    /// The order was paid before; nothing was written. The receipt of that payment.
    AlreadyPaid(Receipt),
    /// A holder with a larger fencing token claimed or paid this order; nothing was written.
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
    /// PostgreSQL failed the statement (unreachable, or refused it); see
    /// [`StoreError::is_transient`].
    Postgres(tokio_postgres::Error),
    /// PostgreSQL did not answer within the store's time limit; the connection was dropped
    /// (which rolls back whatever it had begun).
    Timeout(&'static str),
    /// An order's data is not what this service writes.
    Corrupt(String),
}

impl StoreError {
    /// Whether retrying may help: Redis or PostgreSQL unreachable, restarting or too slow, a
    /// serialization failure or a deadlock. A refused statement (missing rights, a schema that
    /// is not this service's) and corrupt data are not transient.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Redis(_) | Self::Timeout(_) => true,
            Self::Postgres(e) => postgres_store::is_transient(e),
            Self::Corrupt(_) => false,
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Redis(e) => write!(f, "redis: {e}"),
            Self::Postgres(e) => write!(f, "postgres: {}", postgres_store::describe(e)),
            Self::Timeout(what) => write!(f, "postgres: {what} took too long; retry"),
            Self::Corrupt(what) => write!(f, "corrupt order data: {what}"),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Redis(e) => Some(e),
            Self::Postgres(e) => Some(e),
            Self::Timeout(_) | Self::Corrupt(_) => None,
        }
    }
}

impl From<redis::RedisError> for StoreError {
    fn from(e: redis::RedisError) -> Self {
        Self::Redis(e)
    }
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(e: tokio_postgres::Error) -> Self {
        Self::Postgres(e)
    }
}

/// The orders of the service, in Redis or in PostgreSQL. Cheap to clone (handles only).
#[derive(Clone, Debug)]
pub struct Store {
    backend: Backend,
}

/// One backend or the other: two concrete types, no trait object needed.
#[derive(Clone, Debug)]
enum Backend {
    Redis(RedisStore),
    Postgres(PostgresStore),
}

impl Store {
    /// A store in Redis on `con` (the lock client's connection: one connection per process).
    pub fn new(con: dlock_core::Connection) -> Self {
        Self {
            backend: Backend::Redis(RedisStore::new(con)),
        }
    }

    /// A store in PostgreSQL: connects a few connections with `url` (a tokio-postgres
    /// connection string, `host=… user=… dbname=…` or `postgresql://…`; no TLS) and creates the
    /// tables `orders` and `payments` if they do not exist. The user needs `SELECT`, `INSERT`
    /// and `UPDATE` on both, and `CREATE` on the schema the first time.
    ///
    /// # Errors
    /// [`StoreError::Postgres`] when the string does not parse, the server cannot be reached,
    /// refuses the login, or refuses to create the tables (the message says which);
    /// [`StoreError::Timeout`] when it does not answer within 5 s.
    ///
    /// # Cancel safety
    /// Dropping the future drops the connections made so far; the tables are created in one
    /// transaction, which then either committed or did not.
    pub async fn postgres(url: &str) -> Result<Self, StoreError> {
        Ok(Self {
            backend: Backend::Postgres(PostgresStore::connect(url).await?),
        })
    }

    /// `"redis"` or `"postgres"`, for the log.
    pub fn kind(&self) -> &'static str {
        match &self.backend {
            Backend::Redis(_) => "redis",
            Backend::Postgres(_) => "postgres",
        }
    }

    /// Creates an unpaid order; `false` if one with this id exists (then nothing changes).
    ///
    /// # Errors
    /// [`StoreError::Redis`] or [`StoreError::Postgres`] when the backend fails the command;
    /// [`StoreError::Timeout`] when PostgreSQL does not answer in time.
    ///
    /// # Cancel safety
    /// Cancel safe: one atomic write that either ran or did not.
    pub async fn create(&self, id: u64, amount: u64) -> Result<bool, StoreError> {
        match &self.backend {
            Backend::Redis(s) => s.create(id, amount).await,
            Backend::Postgres(s) => s.create(id, amount).await,
        }
    }

    /// The order `id`, if it exists.
    ///
    /// # Errors
    /// As [`Store::create`]; [`StoreError::Corrupt`] when the stored order is not what this
    /// service writes.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn get(&self, id: u64) -> Result<Option<Order>, StoreError> {
        match &self.backend {
            Backend::Redis(s) => s.get(id).await,
            Backend::Postgres(s) => s.get(id).await,
        }
    }

    /// Claims order `id` for the holder of `fence` before it is charged: stores the token in
    /// the order if the order is unpaid and no larger token is stored, and returns the amount
    /// to charge. Otherwise nothing is written, and the answer says why (checked in this
    /// order: missing, stale, already paid).
    ///
    /// # Errors
    /// As [`Store::get`].
    ///
    /// # Cancel safety
    /// Cancel safe and retry safe: a claim that took effect, repeated with the same token,
    /// answers [`Claimed::Unpaid`] again.
    pub async fn claim(&self, id: u64, fence: FencingToken) -> Result<Claimed, StoreError> {
        match &self.backend {
            Backend::Redis(s) => s.claim(id, fence).await,
            Backend::Postgres(s) => s.claim(id, fence).await,
        }
    }

    /// Records the payment described by `receipt` if its fencing token is not smaller than the
    /// last one stored for the order and the order is unpaid: marks the order paid and adds
    /// one payment record, atomically. Otherwise nothing is written (checked in this order:
    /// missing, stale, already paid).
    ///
    /// # Errors
    /// As [`Store::get`].
    ///
    /// # Cancel safety
    /// Cancel safe and retry safe: a retry of a write that took effect answers
    /// [`Recorded::AlreadyPaid`] with this very receipt.
    pub async fn record_payment(&self, receipt: &Receipt) -> Result<Recorded, StoreError> {
        match &self.backend {
            Backend::Redis(s) => s.record_payment(receipt).await,
            Backend::Postgres(s) => s.record_payment(receipt).await,
        }
    }
}

/// A stored fencing token (decimal, as both backends keep it) as a [`FencingToken`].
fn parse_fence(text: &str) -> Result<FencingToken, StoreError> {
    text.parse()
        .map(FencingToken::new)
        .map_err(|_| StoreError::Corrupt(format!("fence {text:?}")))
}
