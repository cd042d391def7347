use dlock_core::{Error, distributed_lock};

// The watchdog is on by default: a lease it cannot keep is refused.
#[distributed_lock(key = "a", ttl = "50ms")]
async fn renewed() -> Result<(), Error> {
    Ok(())
}

#[distributed_lock(key = "b", ttl = "1s", max_hold = "20ms")]
async fn capped() -> Result<(), Error> {
    Ok(())
}

// Without the watchdog the same lease is a fixed one, accepted.
#[distributed_lock(key = "c", ttl = "50ms", watchdog = false)]
async fn fixed() -> Result<(), Error> {
    Ok(())
}

fn main() {}
