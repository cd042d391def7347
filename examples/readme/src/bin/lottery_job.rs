//! Run with: `cargo run -p readme --bin lottery_job` (Redis at `DLOCK_REDIS_URL`, default
//! redis://127.0.0.1:6379/); start it several times: each draw runs on exactly one replica.
#![allow(clippy::print_stdout)] // an example reports on stdout
use std::time::Duration;

use dlock_core::Client;
use dlock_scheduler::{JobContext, Scheduler, scheduled};
use tokio::signal::unix::{SignalKind, signal};

#[scheduled(name = "lottery", cron = "0 12 * * *", tz = "Europe/Berlin")]
async fn lottery(ctx: JobContext) -> Result<(), std::io::Error> {
    println!(
        "{} draws the winners of {}",
        ctx.replica().id(),
        ctx.occurrence()
    );
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("DLOCK_REDIS_URL").unwrap_or("redis://127.0.0.1:6379/".into());
    // Connects now: a wrong URL, password or port fails here, not at the first claim.
    let client = Client::builder(url.as_str()).connect().await?;
    let scheduler = Scheduler::builder(client).job(lottery::job()?).build()?;
    // Stop on SIGTERM (what orchestrators send) or Ctrl-C, after the running draws finish.
    let (mut terminate, mut interrupt) = (
        signal(SignalKind::terminate())?,
        signal(SignalKind::interrupt())?,
    );
    let stop = async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
    };
    println!("scheduler running; SIGTERM or Ctrl-C stops it");
    let stopped = scheduler.run_until(stop, Duration::from_secs(30)).await;
    println!(
        "stopped: {} draws drained, {} cancelled",
        stopped.drained, stopped.cancelled
    );
    Ok(())
}
