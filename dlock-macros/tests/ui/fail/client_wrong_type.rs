use dlock_core::{Error, distributed_lock};

#[distributed_lock(key = "a", client = "redis://127.0.0.1/")]
async fn url() -> Result<(), Error> {
    Ok(())
}

fn main() {}
