use dlock_core::{Error, distributed_lock};

#[distributed_lock(key = "a", max_hold = "30s1m")]
async fn out_of_order() -> Result<(), Error> {
    Ok(())
}

#[distributed_lock(key = "b", ttl = "1s1s")]
async fn repeated() -> Result<(), Error> {
    Ok(())
}

fn main() {}
