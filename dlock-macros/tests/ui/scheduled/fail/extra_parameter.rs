use dlock_scheduler::{JobContext, scheduled};

#[scheduled(name = "lottery", cron = "0 12 * * *")]
async fn lottery(ctx: JobContext, winners: usize) -> Result<(), String> {
    let _ = (ctx, winners);
    Ok(())
}

fn main() {}
