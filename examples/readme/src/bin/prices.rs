//! Run with: `cargo run -p readme --bin prices` (Redis at `DLOCK_REDIS_URL`, default
//! redis://127.0.0.1:6379/)
#![allow(clippy::print_stdout)] // an example reports on stdout
use std::time::Duration;

use dlock_core::{Client, Wait};

#[tokio::main]
async fn main() -> Result<(), dlock_core::Error> {
    let url = std::env::var("DLOCK_REDIS_URL").unwrap_or("redis://127.0.0.1:6379/".into());
    let client = Client::builder(url.as_str()).connect().await?;
    let prices = client.rw_lock("prices")?;
    let read = prices.read().await?; // beside other readers, never beside a writer
    println!("reading with fencing token {}", read.fencing_token());
    read.release().await?;
    let write = prices.write().await?; // alone; readers queued after it wait for it
    let read = write.downgrade().await?; // a reader now, atomically; queued readers join
    match read.try_upgrade().await {
        // Never waits: only the sole reader with nobody queued becomes the writer.
        Ok(write) => println!("upgraded: {:?}", write.release().await?),
        Err(refused) => {
            println!("not upgraded: {refused}");
            if let Some(read) = refused.into_read_guard() {
                read.release().await?;
            }
        }
    }
    // A body under a read hold; reads nested in it re-enter, a nested write fails at once.
    let n = prices
        .with_read(Wait::AtMost(Duration::from_secs(5)), |lease| async move {
            lease.issued_fencing_token().map_or(0, |t| t.get())
        })
        .await?;
    println!("read under fencing token {n}");
    client.shutdown(Duration::from_secs(5)).await;
    Ok(())
}
