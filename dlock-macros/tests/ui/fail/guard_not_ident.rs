use dlock_core::{Error, distributed_lock};

#[distributed_lock(key = "a", guard = "lease")]
async fn quoted() -> Result<(), Error> {
    Ok(())
}

fn main() {}
