use dlock_scheduler::{JobContext, scheduled};

#[scheduled(name = "lottery", cron = "0 12 * * *")]
async fn lottery<T: Default>(ctx: JobContext) -> Result<(), String> {
    let _ = (ctx, T::default());
    Ok(())
}

fn main() {}
