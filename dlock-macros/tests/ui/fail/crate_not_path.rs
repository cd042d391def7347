use dlock_core::{Error, distributed_lock};

#[distributed_lock(key = "a", crate = "dlock core")]
async fn renamed() -> Result<(), Error> {
    Ok(())
}

fn main() {}
