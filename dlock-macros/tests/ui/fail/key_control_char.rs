use dlock_core::{Error, distributed_lock};

#[distributed_lock(key = "order:\t{order_id}")]
async fn tab(order_id: u64) -> Result<u64, Error> {
    Ok(order_id)
}

fn main() {}
