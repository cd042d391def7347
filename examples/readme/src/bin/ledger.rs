//! Run with: `cargo run -p readme --bin ledger` (Redis at `DLOCK_REDIS_URL`, default
//! redis://127.0.0.1:6379/)
#![allow(clippy::print_stdout)] // an example reports on stdout
use dlock_core::{Client, Fenced, Guarded};

#[tokio::main]
async fn main() -> Result<(), dlock_core::Error> {
    let url = std::env::var("DLOCK_REDIS_URL").unwrap_or("redis://127.0.0.1:6379/".into());
    let client = Client::builder(url.as_str()).connect().await?;
    let guard = client.mutex("acct:7")?.acquire().await?;
    // Data in the lock's slot: name it with the lock name as hash tag.
    let outcome = guard
        .guarded()
        .incr("balance:{acct:7}", 1250)
        .rpush("ledger:{acct:7}", "+1250 invoice 4711")
        .exec()
        .await?;
    match outcome {
        Guarded::Applied(_) => println!("balance {}", outcome.reply::<i64>(0)?),
        // The lease ran out or another holder took over: nothing was written.
        Guarded::Refused(why) => println!("refused: {why}"),
        _ => {}
    }
    // Data elsewhere: the fencing token decides, a smaller one than the last writer's is refused.
    let fence = guard.fencing_token().await?;
    match client.fenced_set("statement:acct:7", fence, "v1").await? {
        Fenced::Written => println!("statement written under fence {fence}"),
        stale => println!("not written: {stale}"),
    }
    guard.release().await?;
    Ok(())
}
