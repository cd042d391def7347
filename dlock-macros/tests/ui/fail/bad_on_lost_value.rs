use dlock_core::{Error, distributed_lock};

#[distributed_lock(key = "a", on_lost = "ignore")]
async fn lost() -> Result<(), Error> {
    Ok(())
}

fn main() {}
