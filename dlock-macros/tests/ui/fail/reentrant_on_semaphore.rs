use dlock_core::{Error, distributed_lock};

#[distributed_lock(key = "exports", permits = 1, of = 4, reentrant = false)]
async fn export() -> Result<(), Error> {
    Ok(())
}

fn main() {}
