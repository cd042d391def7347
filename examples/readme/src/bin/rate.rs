//! Run with: `cargo run -p readme --bin rate` (Redis at `DLOCK_REDIS_URL`, default
//! redis://127.0.0.1:6379/)
#![allow(clippy::print_stdout)] // an example reports on stdout
use std::time::Duration;

use dlock_core::{Client, Decision, Quota};

#[tokio::main]
async fn main() -> Result<(), dlock_core::Error> {
    let url = std::env::var("DLOCK_REDIS_URL").unwrap_or("redis://127.0.0.1:6379/".into());
    let client = Client::open(url.as_str())?;
    // One budget for every replica: 20 calls at once, then 100 a second, by Redis's clock.
    let partner = client.rate_limiter("partner-api", Quota::per_second(100).burst(20))?;
    let mut sent = 0;
    while sent < 25 {
        match partner.try_acquire(1).await? {
            Decision::Allowed { .. } => sent += 1, // call the partner here
            Decision::Limited { wait, .. } => tokio::time::sleep(wait).await,
            _ => {}
        }
    }
    println!("sent {sent} calls within the partner's quota");
    // One budget per user: 5 a minute each, waiting at most 1 s for a slot.
    let per_user = client.keyed_rate_limiter("uploads", Quota::per_minute(5))?;
    for _ in 0..5 {
        per_user
            .acquire_timeout("user:7", 1, Duration::from_secs(1))
            .await?;
    }
    let sixth = per_user
        .acquire_timeout("user:7", 1, Duration::from_secs(1))
        .await;
    println!(
        "user:7's sixth upload: {}",
        if sixth.is_err() {
            "refused"
        } else {
            "admitted"
        }
    );
    Ok(())
}
