use dlock_core::{Error, distributed_lock};

#[distributed_lock(key = "prices", mode = read)]
async fn read_prices() -> Result<(), Error> {
    Ok(())
}

fn main() {}
