use dlock_core::{Error, distributed_lock};

// Durations beyond what they can be: each message names the limit.
#[distributed_lock(key = "a", ttl = "99999999999999999999s")]
async fn huge_ttl() -> Result<(), Error> {
    Ok(())
}

#[distributed_lock(key = "b", wait = "999999999999999d", max_hold = "999999999999999d")]
async fn huge_wait() -> Result<(), Error> {
    Ok(())
}

fn main() {}
