use dlock_core::{Error, distributed_lock};

#[distributed_lock(key = "exports", permits = 1)]
async fn export() -> Result<(), Error> {
    Ok(())
}

fn main() {}
