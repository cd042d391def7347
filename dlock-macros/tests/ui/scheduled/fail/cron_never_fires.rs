use dlock_scheduler::{JobContext, scheduled};

// Every field is valid, but February never has a 30th.
#[scheduled(name = "lottery", cron = "0 0 30 2 *")]
async fn lottery(ctx: JobContext) -> Result<(), String> {
    let _ = ctx;
    Ok(())
}

fn main() {}
