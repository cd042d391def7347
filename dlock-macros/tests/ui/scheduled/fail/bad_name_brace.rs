use dlock_scheduler::{JobContext, scheduled};

// Braces delimit the hash tag of the lock name: the job name cannot contain them.
#[scheduled(name = "lottery:{daily}", cron = "0 12 * * *")]
async fn lottery(ctx: JobContext) -> Result<(), String> {
    let _ = ctx;
    Ok(())
}

fn main() {}
