use dlock_core::{Error, distributed_lock};

#[distributed_lock(ttl = "10s")]
async fn nameless() -> Result<(), Error> {
    Ok(())
}

fn main() {}
