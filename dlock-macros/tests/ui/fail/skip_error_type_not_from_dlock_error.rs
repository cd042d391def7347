use dlock_core::distributed_lock;

// `on_busy = "skip"` with `Result<Option<T>, E>` where `E` cannot hold a dlock error.
#[distributed_lock(key = "a", on_busy = "skip")]
async fn maybe() -> Result<Option<u64>, String> {
    Ok(None)
}

fn main() {}
