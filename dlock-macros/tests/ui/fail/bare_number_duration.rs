use dlock_core::{Error, distributed_lock};

#[distributed_lock(key = "a", wait = "500")]
async fn no_unit() -> Result<(), Error> {
    Ok(())
}

fn main() {}
