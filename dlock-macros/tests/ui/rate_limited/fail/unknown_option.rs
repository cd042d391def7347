use dlock_core::{rate_limited, Error};

#[rate_limited(key = "user:{id}", limit = "100/s", brust = 20, ttl = "10s")]
async fn f(id: u64) -> Result<u64, Error> {
    Ok(id)
}

fn main() {}
