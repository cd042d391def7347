use dlock_core::{Error, distributed_lock};

#[distributed_lock(key = "a", ttl = "10s", watchdog = false, max_hold = "1m")]
async fn capped() -> Result<(), Error> {
    Ok(())
}

fn main() {}
