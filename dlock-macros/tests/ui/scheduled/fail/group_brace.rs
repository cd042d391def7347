use dlock_scheduler::{JobContext, scheduled};

#[scheduled(name = "vacuum", cron = "0 3 * * *", group = "db:{main}")]
async fn vacuum(ctx: JobContext) -> Result<(), String> {
    let _ = ctx;
    Ok(())
}

fn main() {}
