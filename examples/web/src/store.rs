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
mod types;

pub use redis_store::{order_key, payments_key};
pub use types::{Claimed, Order, Receipt, Recorded, StoreError};

use dlock_core::FencingToken;

use postgres_store::PostgresStore;
use redis_store::RedisStore;

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
