//! Run with: `cargo run -p readme --bin exports` (Redis at `DLOCK_REDIS_URL`, default
//! redis://127.0.0.1:6379/)
#![allow(clippy::print_stdout)] // an example reports on stdout
use std::time::Duration;

use dlock_core::{Client, MutexOptions, Wait};

#[tokio::main]
async fn main() -> Result<(), dlock_core::Error> {
    let url = std::env::var("DLOCK_REDIS_URL").unwrap_or("redis://127.0.0.1:6379/".into());
    let client = Client::builder(url.as_str()).connect().await?;
    // At most 4 exports at once across every replica; each permit renewed while it is held.
    let exports = client.semaphore_with("exports", 4, MutexOptions::new().watchdog())?;
    let permit = exports.acquire(1).await?; // FIFO: a request for 3 queued first goes first
    println!("exporting under fencing token {}", permit.fencing_token());
    permit.release().await?;
    let rows = exports
        .with_permits(2, Wait::AtMost(Duration::from_secs(5)), |_lease| async {
            42
        })
        .await?;
    println!("exported {rows} rows with 2 permits");
    client.shutdown(Duration::from_secs(5)).await;
    Ok(())
}
