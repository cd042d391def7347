use dlock_scheduler::{JobContext, scheduled};

// The scheduler hands each run its own `JobContext`, by value.
#[scheduled(name = "lottery", cron = "0 12 * * *")]
async fn lottery(ctx: &JobContext) -> Result<(), String> {
    let _ = ctx;
    Ok(())
}

fn main() {}
