use dlock_scheduler::{JobContext, scheduled};

struct Lottery;

impl Lottery {
    #[scheduled(name = "lottery", cron = "0 12 * * *")]
    async fn draw(&self, ctx: JobContext) -> Result<(), String> {
        let _ = ctx;
        Ok(())
    }
}

fn main() {}
