use dlock_scheduler::{JobContext, scheduled};

#[scheduled(name = "lottery", cron = "0 12 * * *")]
async fn lottery(ctx: JobContext) {
    let _ = ctx;
}

fn main() {}
