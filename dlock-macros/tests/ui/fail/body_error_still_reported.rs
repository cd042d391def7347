use dlock_core::{Error, distributed_lock};

// The attribute is wrong, and so is the body: the function is still emitted unchanged, so
// the body's own type error is reported as well.
#[distributed_lock(key = "a", ttl = "ten seconds")]
async fn broken() -> Result<u64, Error> {
    let n: u64 = "not a number";
    Ok(n)
}

fn main() {}
