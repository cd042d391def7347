use dlock_scheduler::{JobContext, scheduled};

// A fixed offset ignores daylight-saving time: half of the year the job would run an hour off.
#[scheduled(name = "lottery", cron = "0 12 * * *", tz = "+02:00")]
async fn lottery(ctx: JobContext) -> Result<(), String> {
    let _ = ctx;
    Ok(())
}

fn main() {}
