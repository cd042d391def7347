use dlock_core::{Error, distributed_lock};

#[distributed_lock(key = "a", ttl = "1m", max_hold = "30s")]
async fn capped() -> Result<(), Error> {
    Ok(())
}

fn main() {}
