use dlock_scheduler::{JobContext, scheduled};

#[scheduled(name = "settle", cron = "30 2 * * *", retries = 3)]
async fn settle(ctx: JobContext) -> Result<(), String> {
    let _ = ctx;
    Ok(())
}

fn main() {}
