use dlock_core::{Error, distributed_lock};

#[distributed_lock(key = "a", ttl = "10s", ttl = "20s")]
async fn twice() -> Result<(), Error> {
    Ok(())
}

fn main() {}
