//! Run with: `cargo run -p web` (see the crate docs); this is how failures become HTTP answers.
//!
//! [`PayError`]: every way `POST /orders/{id}/pay` can fail (also used by the other handlers for
//! the failures they share: unknown order, Redis or PostgreSQL trouble). `From<dlock_core::Error>` is what
//! `#[distributed_lock]` needs to report a busy lock, a lost lease or a Redis error through the
//! function's return type; `IntoResponse` is the HTTP contract of the crate docs.

use std::fmt;

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use dlock_core::{ErrorKind, FencingToken};
use serde_json::json;

use crate::store::Receipt;
use crate::store::StoreError;

/// Why a payment (or an order lookup) did not happen.
#[derive(Debug)]
pub enum PayError {
    /// No order with this id. → 404
    NotFound(u64),
    /// The order was paid before; the receipt of that payment. → 409 `already_paid`
    AlreadyPaid(Receipt),
    /// Another request holds the order's lock, beyond the wait. → 409 `in_progress`
    InProgress(u64),
    /// The store holds a newer fencing token for the order: this holder's lease ran out and a
    /// newer holder claimed or paid the order. Nothing was recorded. → 409 `in_progress` (the
    /// log says "fenced out")
    Fenced {
        /// The order.
        order_id: u64,
        /// This holder's token.
        ours: FencingToken,
        /// The token the store holds.
        last: FencingToken,
    },
    /// The lock failed: busy (see [`PayError::for_order`]), lease lost, Redis unreachable or
    /// slow (→ 503), or a misuse (→ 500).
    Lock(dlock_core::Error),
    /// The order store failed: Redis or PostgreSQL unreachable or too slow (→ 503), or a
    /// statement refused (missing rights) or unexpected data (→ 500).
    Store(StoreError),
}

impl PayError {
    /// Names the order in a busy-lock error (`From<dlock_core::Error>` cannot know it).
    pub fn for_order(self, order_id: u64) -> Self {
        match self {
            Self::Lock(e) if e.is_busy() => Self::InProgress(order_id),
            other => other,
        }
    }
}

impl From<dlock_core::Error> for PayError {
    fn from(e: dlock_core::Error) -> Self {
        Self::Lock(e)
    }
}

impl From<StoreError> for PayError {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

impl fmt::Display for PayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Lock(e) => write!(f, "lock: {e}"),
            Self::Store(e) => write!(f, "store: {e}"),
            _ => f.write_str(&self.message()),
        }
    }
}

impl std::error::Error for PayError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Lock(e) => Some(e),
            Self::Store(e) => Some(e),
            _ => None,
        }
    }
}

impl IntoResponse for PayError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        if status.is_server_error() {
            // The cause goes to the log; the client gets the short sentence.
            crate::log::log(format_args!("{status}: {self}"));
        }
        if let Self::Fenced {
            order_id,
            ours,
            last,
        } = &self
        {
            crate::log::log(format_args!(
                "order {order_id}: fenced out (our token {ours}, store holds {last})"
            ));
        }
        let mut body = json!({ "error": self.message(), "code": code });
        let retry = matches!(code, "in_progress" | "unavailable");
        if let Self::AlreadyPaid(receipt) = self {
            body["receipt"] = json!(receipt);
        }
        let mut response = (status, Json(body)).into_response();
        if retry {
            let headers = response.headers_mut();
            headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

impl PayError {
    /// The sentence for the client: what happened and what to do, without internals.
    fn message(&self) -> String {
        match self {
            Self::NotFound(id) => format!("no order {id}"),
            Self::AlreadyPaid(receipt) => format!("order {} is already paid", receipt.order_id),
            Self::InProgress(order_id) | Self::Fenced { order_id, .. } => {
                format!("payment for order {order_id} in progress, retry")
            }
            _ => match self.status_and_code().0 {
                StatusCode::CONFLICT => "payment in progress, retry".to_owned(),
                StatusCode::SERVICE_UNAVAILABLE => "temporarily unavailable, retry".to_owned(),
                _ => "internal error".to_owned(),
            },
        }
    }

    fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            Self::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            Self::AlreadyPaid(_) => (StatusCode::CONFLICT, "already_paid"),
            Self::InProgress(_) | Self::Fenced { .. } => (StatusCode::CONFLICT, "in_progress"),
            Self::Lock(e) => match e.kind() {
                ErrorKind::Busy => (StatusCode::CONFLICT, "in_progress"),
                ErrorKind::LeaseLost
                | ErrorKind::Connection
                | ErrorKind::Timeout
                | ErrorKind::Redis => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
                _ => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
            },
            Self::Store(e) if e.is_transient() => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            Self::Store(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "a panic is how a test fails")]
mod tests {
    use super::*;

    async fn answer(error: PayError) -> (u16, Option<String>, serde_json::Value) {
        let response = error.into_response();
        let status = response.status().as_u16();
        let retry = response
            .headers()
            .get(header::RETRY_AFTER)
            .map(|v| v.to_str().unwrap().to_owned());
        let body = axum::body::to_bytes(response.into_body(), 1 << 16).await;
        (
            status,
            retry,
            serde_json::from_slice(&body.unwrap()).unwrap(),
        )
    }

    #[tokio::test]
    async fn the_http_contract() {
        let receipt = Receipt {
            order_id: 42,
            amount: 1250,
            charge_id: "ch-42-1".into(),
            fencing_token: 7,
            paid_by: "a".into(),
        };
        let (status, retry, body) = answer(PayError::AlreadyPaid(receipt.clone())).await;
        assert_eq!((status, retry), (409, None));
        assert_eq!(body["code"], "already_paid");
        assert_eq!(body["error"], "order 42 is already paid");
        assert_eq!(body["receipt"], json!(receipt));

        let (status, retry, body) = answer(PayError::InProgress(42)).await;
        assert_eq!((status, retry.as_deref()), (409, Some("1")));
        let busy =
            json!({ "error": "payment for order 42 in progress, retry", "code": "in_progress" });
        assert_eq!(body, busy);
        let fenced = PayError::Fenced {
            order_id: 42,
            ours: FencingToken::new(1),
            last: FencingToken::new(2),
        };
        assert_eq!(answer(fenced).await, (409, Some("1".into()), busy));

        let (status, _, body) = answer(PayError::NotFound(42)).await;
        assert_eq!((status, &body["code"]), (404, &json!("not_found")));
        let down = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let (status, retry, body) = answer(PayError::Store(StoreError::Redis(down.into()))).await;
        assert_eq!(
            (status, retry.as_deref(), &body["code"]),
            (503, Some("1"), &json!("unavailable"))
        );
        let (status, retry, _) = answer(PayError::Store(StoreError::Corrupt("x".into()))).await;
        assert_eq!((status, retry), (500, None));
    }
}
