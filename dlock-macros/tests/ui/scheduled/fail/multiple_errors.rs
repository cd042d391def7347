use dlock_scheduler::{JobContext, scheduled};

// Every mistake is reported at once, each on its token, and the function's own error too.
#[scheduled(name = "", cron = "0 25 * * *", tz = "Europe/Pariss", overlap = "never", lease = "10")]
async fn lottery(ctx: JobContext, n: u8) -> Result<(), String> {
    let _ = (ctx, n);
    let x: u32 = "not a number";
    Ok(())
}

fn main() {
    let _ = lottery::job();
}
