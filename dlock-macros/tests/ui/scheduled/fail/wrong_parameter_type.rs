use dlock_scheduler::scheduled;

#[scheduled(name = "lottery", cron = "0 12 * * *")]
async fn lottery(winners: usize) -> Result<(), String> {
    let _ = winners;
    Ok(())
}

fn main() {}
