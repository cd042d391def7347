use dlock_scheduler::{JobContext, scheduled};

// There is no minute 61.
#[scheduled(name = "lottery", cron = "61 12 * * *")]
async fn lottery(ctx: JobContext) -> Result<(), String> {
    let _ = ctx;
    Ok(())
}

fn main() {}
