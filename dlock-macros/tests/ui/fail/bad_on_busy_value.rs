use dlock_core::{Error, distributed_lock};

#[distributed_lock(key = "a", on_busy = "wait")]
async fn busy() -> Result<(), Error> {
    Ok(())
}

fn main() {}
