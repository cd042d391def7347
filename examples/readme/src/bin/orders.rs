//! Run with: `cargo run -p readme --bin orders` (Redis at `DLOCK_REDIS_URL`, default
//! redis://127.0.0.1:6379/; listens on `LISTEN`, default 127.0.0.1:3000), then
//! `curl -X POST -H 'Idempotency-Key: "k1"' http://127.0.0.1:3000/orders/42/pay` (twice).
#![allow(clippy::print_stdout)] // an example reports on stdout
use std::time::Duration;

use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Router, routing::post};
use dlock_core::{Client, distributed_lock};
use dlock_tower::IdempotencyLayer;

/// One request per order at a time across every replica: another request for the same order
/// waits up to 1 s for the lock, then gets 409. The lease is renewed while the body runs.
#[distributed_lock(key = "order:{order_id}", wait = "1s", guard = lease)]
async fn pay(Path(order_id): Path<u64>) -> Result<String, PayError> {
    // Give the store the fencing token with every write: it refuses a stale holder's.
    let fence = lease.fencing_token().await?;
    Ok(format!("charged order {order_id}, fencing token {fence}\n"))
}

/// dlock's errors as HTTP answers: busy → 409, Redis unreachable or slow → 503.
struct PayError(dlock_core::Error);

impl From<dlock_core::Error> for PayError {
    fn from(e: dlock_core::Error) -> Self {
        Self(e)
    }
}

impl IntoResponse for PayError {
    fn into_response(self) -> Response {
        let status = match self.0.is_busy() {
            true => StatusCode::CONFLICT,
            false => StatusCode::SERVICE_UNAVAILABLE,
        };
        (status, format!("{}\n", self.0)).into_response()
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("DLOCK_REDIS_URL").unwrap_or("redis://127.0.0.1:6379/".into());
    let listen = std::env::var("LISTEN").unwrap_or("127.0.0.1:3000".into());
    // Connects now: a wrong URL, password or port stops the service before it listens.
    let client = Client::builder(url.as_str()).connect().await?;
    dlock_core::set_default_client(client.clone())?; // the client #[distributed_lock] uses
    // A retried POST with the same Idempotency-Key gets the stored answer (dlock-tower).
    let replays = IdempotencyLayer::builder(client.clone(), "orders").build()?;
    let app = Router::new()
        .route("/orders/{order}/pay", post(pay))
        .route_layer(replays);
    let listener = tokio::net::TcpListener::bind(listen).await?;
    println!("listening on http://{}", listener.local_addr()?);
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    axum::serve(listener, app)
        .with_graceful_shutdown(ctrl_c)
        .await?;
    client.shutdown(Duration::from_secs(5)).await; // give back every lock at once
    Ok(())
}
