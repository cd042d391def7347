use dlock_core::{Error, distributed_lock};

#[distributed_lock(key = "cell:{x}")]
async fn cell((x, y): (u32, u32)) -> Result<u32, Error> {
    Ok(x + y)
}

fn main() {}
