use dlock_core::distributed_lock;

#[distributed_lock(key = "a")]
async fn nothing() {}

fn main() {}
