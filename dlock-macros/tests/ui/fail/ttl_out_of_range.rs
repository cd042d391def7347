use dlock_core::{Error, distributed_lock};

#[distributed_lock(key = "a", ttl = "2d")]
async fn too_long() -> Result<(), Error> {
    Ok(())
}

#[distributed_lock(key = "b", ttl = "5ms")]
async fn too_short() -> Result<(), Error> {
    Ok(())
}

fn main() {}
