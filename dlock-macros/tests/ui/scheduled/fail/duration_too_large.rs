use dlock_scheduler::scheduled;

// Durations beyond what they can be: each message names the limit.
#[scheduled(
    name = "lottery",
    cron = "0 12 * * *",
    lease = "99999999999999999999s",
    jitter = "99999999999999999999s",
    max_run = "999999999999999d"
)]
async fn lottery() -> Result<(), String> {
    Ok(())
}

fn main() {}
