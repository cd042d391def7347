use dlock_core::{Error, distributed_lock};

#[distributed_lock(key = "a", ttl = "0s")]
async fn zero() -> Result<(), Error> {
    Ok(())
}

fn main() {}
