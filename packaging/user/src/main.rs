//! Run with: `make package` (built from dlock's packages; `dlock-packaged-user <redis-url>`).
//!
//! A program as a user of the published crates writes it: connect at start-up (a wrong URL
//! fails here, not at the first request), pay an order under `#[distributed_lock]`, build a
//! scheduler with a job, and say what happened on stdout.

use dlock_core::{Client, distributed_lock};
use dlock_scheduler::{Job, Scheduler};

#[distributed_lock(key = "order:{order_id}", client = client, guard = lease)]
async fn pay(client: &Client, order_id: u64) -> Result<u64, dlock_core::Error> {
    Ok(lease.fencing_token().await?.get())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .ok_or("usage: dlock-packaged-user <redis-url>")?;
    let client = Client::builder(url.as_str()).connect().await?;
    let token = pay(&client, 7).await?;
    println!("order 7 paid under fencing token {token}");
    let job = Job::new("nightly", "0 3 * * *", "UTC", |_| async {
        Ok::<_, String>(())
    })?;
    let _scheduler = Scheduler::builder(client).job(job).build()?;
    println!("scheduler built with job nightly");
    Ok(())
}
