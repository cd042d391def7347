//! Run with: `cargo run -p readme --bin pay` (Redis at `DLOCK_REDIS_URL`, default
//! redis://127.0.0.1:6379/)
#![allow(clippy::print_stdout)] // an example reports on stdout
use dlock_core::{Client, distributed_lock};

/// Charges an order at most once at a time across every replica. The lock is taken before
/// the body runs; its lease is renewed while the body runs, and if it is lost the body is
/// dropped. Errors (busy after `wait`, Redis down, lease lost) arrive through the return type:
/// any `E: From<dlock_core::Error>` works.
#[distributed_lock(key = "order:{order_id}", ttl = "10s", wait = "1s", guard = lease)]
async fn pay(order_id: u64, cents: u64) -> Result<String, dlock_core::Error> {
    // Record the payment with the lock's fencing token (issued on demand, while the lock is
    // ours); the store rejects stale writers.
    let fence = lease.fencing_token().await?;
    Ok(format!(
        "charged order {order_id} {cents} cents, fencing token {fence}"
    ))
}

#[tokio::main]
async fn main() -> Result<(), dlock_core::Error> {
    let url = std::env::var("DLOCK_REDIS_URL").unwrap_or("redis://127.0.0.1:6379/".into());
    let client = Client::builder(url.as_str()).connect().await?;
    // Where #[distributed_lock] finds its client (or give each function `client = <expr>`).
    dlock_core::set_default_client(client.clone())?;
    println!("{}", pay(42, 1_999).await?);
    client.shutdown(std::time::Duration::from_secs(5)).await;
    Ok(())
}
