use dlock_core::{Error, distributed_lock};

#[distributed_lock(key = "exports", mode = "read", permits = 1, of = 4)]
async fn export() -> Result<(), Error> {
    Ok(())
}

fn main() {}
