use std::future::Future;

use dlock_core::{Error, distributed_lock};

// A placeholder names fields only: `.await` is rejected, not run before the lock is taken.
#[distributed_lock(key = "k:{fut.await}")]
async fn awaits(fut: impl Future<Output = u32> + Send) -> Result<(), Error> {
    drop(fut);
    Ok(())
}

fn main() {}
