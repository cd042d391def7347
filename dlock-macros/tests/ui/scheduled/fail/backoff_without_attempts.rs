use dlock_scheduler::{JobContext, scheduled};

#[scheduled(name = "settle", cron = "30 2 * * *", backoff = "1s")]
async fn settle(ctx: JobContext) -> Result<(), String> {
    let _ = ctx;
    Ok(())
}

fn main() {}
