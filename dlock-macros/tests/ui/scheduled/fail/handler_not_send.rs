use std::rc::Rc;

use dlock_scheduler::{JobContext, scheduled};

// The scheduler runs handlers on a multi-threaded runtime: the future must be `Send`.
#[scheduled(name = "lottery", cron = "0 12 * * *")]
async fn lottery(ctx: JobContext) -> Result<(), String> {
    let winners = Rc::new(10);
    ctx.lost().await;
    let _ = winners;
    Ok(())
}

fn main() {}
