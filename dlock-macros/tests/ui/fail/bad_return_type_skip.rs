use dlock_core::{Error, distributed_lock};

#[distributed_lock(key = "a", on_busy = "skip")]
async fn count() -> Result<u32, Error> {
    Ok(1)
}

fn main() {}
