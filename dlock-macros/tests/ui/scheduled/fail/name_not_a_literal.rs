use dlock_scheduler::scheduled;

const NAME: &str = "lottery";

// The name is read at compile time: a `const` is one error, not also a missing `name`.
#[scheduled(name = NAME, cron = "0 12 * * *")]
async fn lottery() -> Result<(), String> {
    Ok(())
}

fn main() {}
