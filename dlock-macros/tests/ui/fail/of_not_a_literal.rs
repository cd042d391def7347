use dlock_core::{Error, distributed_lock};

const LIMIT: u32 = 4;

#[distributed_lock(key = "exports", permits = 1, of = LIMIT)]
async fn export() -> Result<(), Error> {
    Ok(())
}

fn main() {
    let _ = LIMIT;
}
