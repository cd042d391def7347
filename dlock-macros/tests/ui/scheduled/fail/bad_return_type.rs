use dlock_scheduler::{JobContext, scheduled};

// The winners' count is not a job result: the ledger records `Ok` or an error's text.
#[scheduled(name = "lottery", cron = "0 12 * * *")]
async fn lottery(ctx: JobContext) -> Result<u32, String> {
    let _ = ctx;
    Ok(10)
}

fn main() {}
