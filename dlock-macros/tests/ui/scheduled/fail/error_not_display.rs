use dlock_scheduler::scheduled;

#[derive(Debug)]
pub struct DrawError;

// The ledger records the error's text: `E` must be `Display`.
#[scheduled(name = "lottery", cron = "0 12 * * *")]
async fn lottery() -> Result<(), DrawError> {
    Err(DrawError)
}

fn main() {}
