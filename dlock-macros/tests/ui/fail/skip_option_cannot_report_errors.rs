use dlock_core::distributed_lock;

// `None` for "another holder has it" and for "Redis is down" would look the same: a nightly
// job could silently run nowhere. Skip needs `Result<Option<T>, E>`.
#[distributed_lock(key = "nightly", on_busy = "skip")]
async fn nightly() -> Option<u32> {
    Some(1)
}

fn main() {}
