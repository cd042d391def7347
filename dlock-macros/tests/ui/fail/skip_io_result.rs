use dlock_core::distributed_lock;

// `on_busy = "skip"` with `std::io::Result<Option<T>>`: `std::io::Error` cannot hold a dlock
// error either; one error, on the return type, with the crate's note.
#[distributed_lock(key = "a", on_busy = "skip")]
async fn maybe() -> std::io::Result<Option<u64>> {
    Ok(None)
}

fn main() {}
