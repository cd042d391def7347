use dlock_core::{Error, distributed_lock};

#[distributed_lock(key = "order:{order}")]
async fn pay(order_id: u64, amount: u64) -> Result<u64, Error> {
    Ok(order_id + amount)
}

fn main() {}
