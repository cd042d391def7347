use dlock_scheduler::{JobContext, scheduled};

#[scheduled(name = "lottery", cron = "0 12 * * *", jitter = "10s", lease = "10s")]
async fn lottery(ctx: JobContext) -> Result<(), String> {
    let _ = ctx;
    Ok(())
}

// Without `lease`, the default lease (30s) is the bound.
#[scheduled(name = "draw", cron = "0 12 * * *", jitter = "1m")]
async fn draw() -> Result<(), String> {
    Ok(())
}

fn main() {}
