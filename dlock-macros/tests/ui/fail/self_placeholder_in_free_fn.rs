use dlock_core::{Error, distributed_lock};

#[distributed_lock(key = "user:{self.id}")]
async fn free(id: u64) -> Result<u64, Error> {
    Ok(id)
}

fn main() {}
