use dlock_core::{Error, distributed_lock};

#[distributed_lock(key = "a", ttl = 10s, watchdog = "no")]
async fn unquoted() -> Result<(), Error> {
    Ok(())
}

fn main() {}
