//! Run with: `cargo run -p readme --bin leader` (Redis at `DLOCK_REDIS_URL`, default
//! redis://127.0.0.1:6379/)
#![allow(clippy::print_stdout)] // an example reports on stdout
use std::time::Duration;

use dlock_core::Client;

#[tokio::main]
async fn main() -> Result<(), dlock_core::Error> {
    let url = std::env::var("DLOCK_REDIS_URL").unwrap_or("redis://127.0.0.1:6379/".into());
    let client = Client::builder(url.as_str()).connect().await?;
    let election = client.election("billing-primary")?;
    // Anyone can follow who leads, candidate or not.
    let mut leaders = election.observe().await?;
    // Waits until this replica leads (candidates are served first come, first served).
    let leadership = election.campaign("10.0.0.7:8080").await?;
    println!("leading with fencing token {}", leadership.fencing_token());
    let seen = leaders.wait_for(|l| l.as_ref().is_some_and(|l| l.value() == "10.0.0.7:8080"));
    if seen.await.is_ok() {
        println!("observers see the new leader");
    }
    tokio::select! {
        lost = leadership.lost() => println!("no longer the leader: {lost}"),
        // … lead: pass leadership.fencing_token() to the store you write to …
        () = tokio::time::sleep(Duration::from_millis(100)) => {
            println!("resigned: {:?}", leadership.resign().await?);
        }
    }
    client.shutdown(Duration::from_secs(5)).await;
    Ok(())
}
