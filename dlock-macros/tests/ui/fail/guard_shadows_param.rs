use dlock_core::{Error, distributed_lock};

#[distributed_lock(key = "a:{id}", guard = id)]
async fn shadow(id: u64) -> Result<u64, Error> {
    Ok(id)
}

fn main() {}
