use dlock_scheduler::{JobContext, scheduled};

#[scheduled(name = "lottery", cron = "0 12 * * *", misfire = "catch_up")]
async fn lottery(ctx: JobContext) -> Result<(), String> {
    let _ = ctx;
    Ok(())
}

#[scheduled(name = "draw", cron = "0 12 * * *", misfire = "catch_up(1 h)")]
async fn draw() -> Result<(), String> {
    Ok(())
}

fn main() {}
