use dlock_scheduler::{JobContext, scheduled};

#[scheduled(cron = "0 12 * * *")]
async fn lottery(ctx: JobContext) -> Result<(), String> {
    let _ = ctx;
    Ok(())
}

fn main() {}
