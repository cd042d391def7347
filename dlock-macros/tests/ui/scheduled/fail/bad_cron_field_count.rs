use dlock_scheduler::{JobContext, scheduled};

// Four fields: the day-of-week is missing.
#[scheduled(name = "lottery", cron = "0 12 * *")]
async fn lottery(ctx: JobContext) -> Result<(), String> {
    let _ = ctx;
    Ok(())
}

fn main() {}
