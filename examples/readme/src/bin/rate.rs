//! Run with: `cargo run -p readme --bin rate` (Redis at `DLOCK_REDIS_URL`, default
//! redis://127.0.0.1:6379/)
#![allow(clippy::print_stdout)] // an example reports on stdout
use dlock_core::{Client, Decision, Error, Quota, rate_limited};

/// 5 uploads a minute per user; a caller over it waits up to 1 s for a slot, then gets
/// `ErrorKind::RateLimited`. Checked at compile time: the rate, the placeholders, the wait.
#[rate_limited(key = "uploads:{user}", rate = "5/m", on_limited = "wait", wait = "1s", client = client)]
async fn upload(client: &Client, user: u64, bytes: &[u8]) -> Result<usize, Error> {
    Ok(bytes.len()) // store the file here
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let url = std::env::var("DLOCK_REDIS_URL").unwrap_or("redis://127.0.0.1:6379/".into());
    let client = Client::builder(url.as_str()).connect().await?;
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
    for _ in 0..5 {
        upload(&client, 7, b"photo").await?;
    }
    match upload(&client, 7, b"photo").await {
        Err(e) if e.is_rate_limited() => {
            println!(
                "user 7's sixth upload: refused, retry in {:?}",
                e.retry_after()
            )
        }
        other => println!("user 7's sixth upload: {other:?}"),
    }
    Ok(())
}
