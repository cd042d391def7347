use dlock_scheduler::{JobContext, scheduled};

// Every 10 seconds: a jitter of 10 s or more could run an occurrence after the next one.
#[scheduled(name = "lottery", cron = "*/10 * * * * *", jitter = "10s")]
async fn lottery(ctx: JobContext) -> Result<(), String> {
    let _ = ctx;
    Ok(())
}

// Twice an hour, unevenly (:00 and :10): the shorter gap, 10 minutes, is the bound.
#[scheduled(name = "draw", cron = "0,10 * * * *", jitter = "15m")]
async fn draw() -> Result<(), String> {
    Ok(())
}

// The lease plays no part: a daily job may have a jitter longer than its lease.
#[scheduled(name = "nightly", cron = "0 3 * * *", jitter = "30s", lease = "5s")]
async fn nightly() -> Result<(), String> {
    Ok(())
}

fn main() {}
