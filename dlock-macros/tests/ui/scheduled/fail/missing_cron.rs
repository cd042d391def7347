use dlock_scheduler::{JobContext, scheduled};

#[scheduled(name = "lottery", tz = "Europe/Berlin")]
async fn lottery(ctx: JobContext) -> Result<(), String> {
    let _ = ctx;
    Ok(())
}

fn main() {}
