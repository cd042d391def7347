use axum::extract::Path;
use dlock_core::{Error, distributed_lock};

// `order` is bound nowhere: the pattern binds `order_id`.
#[distributed_lock(key = "order:{order}")]
async fn pay(Path(order_id): Path<u64>) -> Result<u64, Error> {
    Ok(order_id)
}

fn main() {}
