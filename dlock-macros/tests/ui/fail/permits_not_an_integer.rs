use dlock_core::{Error, distributed_lock};

// A string and a fraction where a whole number belongs.
#[distributed_lock(key = "exports", permits = "1", of = 4)]
async fn quoted() -> Result<(), Error> {
    Ok(())
}

#[distributed_lock(key = "exports", permits = 1, of = 2.5)]
async fn fraction() -> Result<(), Error> {
    Ok(())
}

fn main() {}
