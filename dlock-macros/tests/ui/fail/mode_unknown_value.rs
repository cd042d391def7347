use dlock_core::{Error, distributed_lock};

#[distributed_lock(key = "prices", mode = "reed")]
async fn read_prices() -> Result<(), Error> {
    Ok(())
}

fn main() {}
