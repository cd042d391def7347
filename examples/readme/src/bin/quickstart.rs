//! Run with: `cargo run -p readme --bin quickstart` (Redis at `DLOCK_REDIS_URL`, default
//! redis://127.0.0.1:6379/)
#![allow(clippy::print_stdout)] // an example reports on stdout
use std::time::Duration;

use dlock_core::Client;

#[tokio::main]
async fn main() -> Result<(), dlock_core::Error> {
    let url = std::env::var("DLOCK_REDIS_URL").unwrap_or("redis://127.0.0.1:6379/".into());
    // Connects now: a wrong URL, password or port fails here, not at the first lock.
    let client = Client::builder(url.as_str()).connect().await?;
    let lock = client.mutex("order:42")?;
    let guard = lock.acquire_timeout(Duration::from_secs(5)).await?; // Err(Busy) after 5 s
    // … exclusive across every process using this Redis and lock name …
    let token = guard.fencing_token().await?; // for the storage: it rejects stale writers
    println!("holding `{}` with fencing token {token}", guard.name());
    let outcome = guard.release().await?; // says whether we still owned the lock
    println!("released: {outcome:?}");
    // At exit: give back every lock and queue entry at once, instead of after their leases.
    client.shutdown(Duration::from_secs(5)).await;
    Ok(())
}
