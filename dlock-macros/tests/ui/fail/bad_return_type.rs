use dlock_core::distributed_lock;

#[distributed_lock(key = "a")]
async fn count() -> u32 {
    1
}

fn main() {}
