use dlock_core::{Error, distributed_lock};

#[distributed_lock(key = "a", wait = "forever", on_busy = "skip")]
async fn never_busy() -> Result<Option<()>, Error> {
    Ok(Some(()))
}

fn main() {}
