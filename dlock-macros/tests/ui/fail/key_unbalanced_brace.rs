use dlock_core::{Error, distributed_lock};

#[distributed_lock(key = "order:{order_id")]
async fn unclosed(order_id: u64) -> Result<u64, Error> {
    Ok(order_id)
}

#[distributed_lock(key = "order:{}")]
async fn empty(order_id: u64) -> Result<u64, Error> {
    Ok(order_id)
}

#[distributed_lock(key = "")]
async fn nameless(order_id: u64) -> Result<u64, Error> {
    Ok(order_id)
}

fn main() {}
