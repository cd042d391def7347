use dlock_core::{Error, distributed_lock};

#[distributed_lock(key = "sync")]
fn not_async() -> Result<(), Error> {
    Ok(())
}

fn main() {}
