use dlock_core::{Error, distributed_lock};

#[distributed_lock(key = "a", tll = "10s")]
async fn typo() -> Result<(), Error> {
    Ok(())
}

#[distributed_lock(key = "b", retries = 3)]
async fn unknown() -> Result<(), Error> {
    Ok(())
}

fn main() {}
