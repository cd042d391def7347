use dlock_scheduler::{JobContext, scheduled};

#[scheduled(name = "settle", cron = "30 2 * * *", attempts = 3, backoff = "2h")]
async fn settle(ctx: JobContext) -> Result<(), String> {
    let _ = ctx;
    Ok(())
}

fn main() {}
