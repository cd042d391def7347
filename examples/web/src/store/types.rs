//! Run with: `cargo run -p web` (see the crate docs); what both stores answer in: the order, the
//! receipt, the outcomes of the fenced writes, the store's errors.

use std::fmt;

use dlock_core::FencingToken;
use tokio_postgres::error::SqlState;

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

/// The answer of [`Store::claim`](super::Store::claim).
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

/// The answer of [`Store::record_payment`](super::Store::record_payment).
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
            Self::Postgres(e) => postgres_is_transient(e),
            Self::Corrupt(_) => false,
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Redis(e) => write!(f, "redis: {e}"),
            Self::Postgres(e) => write!(f, "postgres: {}", describe_postgres(e)),
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

/// The server's own words for a refused statement (severity, SQLSTATE, message, detail,
/// hint), else the client's error and its causes.
pub(super) fn describe_postgres(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            let mut text = format!("{} {}: {}", db.severity(), db.code().code(), db.message());
            if let Some(detail) = db.detail() {
                text.push_str(&format!(" ({detail})"));
            }
            if let Some(hint) = db.hint() {
                text.push_str(&format!("; hint: {hint}"));
            }
            text
        }
        None => {
            // tokio-postgres's own text names the step ("error connecting to server"); the
            // causes say what went wrong (no such socket, connection refused, a bad key).
            let mut text = e.to_string();
            let mut cause = std::error::Error::source(e);
            while let Some(c) = cause {
                text.push_str(&format!(": {c}"));
                cause = c.source();
            }
            text
        }
    }
}

/// Connection trouble, a server shutting down or out of resources, a serialization failure
/// or a deadlock: worth a retry. Anything else the server refused is not.
fn postgres_is_transient(e: &tokio_postgres::Error) -> bool {
    let Some(code) = e.code() else {
        // No SQLSTATE: the connection failed or closed.
        return true;
    };
    let class = &code.code()[..2];
    matches!(class, "08" | "53" | "57")
        || *code == SqlState::T_R_SERIALIZATION_FAILURE
        || *code == SqlState::T_R_DEADLOCK_DETECTED
}

/// A stored fencing token (decimal, as both backends keep it) as a [`FencingToken`].
pub(super) fn parse_fence(text: &str) -> Result<FencingToken, StoreError> {
    text.parse()
        .map(FencingToken::new)
        .map_err(|_| StoreError::Corrupt(format!("fence {text:?}")))
}
