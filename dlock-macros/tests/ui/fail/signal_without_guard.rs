use dlock_core::{Error, distributed_lock};

#[distributed_lock(key = "a", on_lost = "signal")]
async fn deaf() -> Result<(), Error> {
    Ok(())
}

fn main() {}
