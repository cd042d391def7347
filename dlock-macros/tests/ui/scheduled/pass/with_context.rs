//! The usual shape: a `JobContext` parameter, a `Display` error, options on one line.
#![deny(warnings)]

use dlock_scheduler::{JobContext, scheduled};

#[derive(Debug)]
struct DrawError;

impl std::fmt::Display for DrawError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("no winners")
    }
}

/// Draws the winners at noon in Berlin.
#[scheduled(
    name = "lottery",
    cron = "0 12 * * *",
    tz = "Europe/Berlin",
    jitter = "2s"
)]
async fn lottery(ctx: JobContext) -> Result<(), DrawError> {
    if ctx.fencing_token().get() == 0 {
        return Err(DrawError);
    }
    // The function is unchanged: it can still be called directly.
    Ok(())
}

fn main() {
    let job = lottery::job().unwrap();
    assert_eq!(job.name(), "lottery");
    assert_eq!(job.schedule().unwrap().cron(), "0 12 * * *");
    assert_eq!(
        job.schedule().unwrap().time_zone(),
        dlock_scheduler::chrono_tz::Europe::Berlin
    );
    let _ = lottery;
}
