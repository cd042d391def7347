use dlock_core::{Error, distributed_lock};

#[distributed_lock(key = "a", ttl = "10M")]
async fn months() -> Result<(), Error> {
    Ok(())
}

fn main() {}
