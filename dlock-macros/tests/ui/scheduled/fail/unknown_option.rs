use dlock_scheduler::{JobContext, scheduled};

#[scheduled(name = "lottery", cron = "0 12 * * *", timezone = "Europe/Berlin", ttl = "10s")]
async fn lottery(ctx: JobContext) -> Result<(), String> {
    let _ = ctx;
    Ok(())
}

fn main() {}
