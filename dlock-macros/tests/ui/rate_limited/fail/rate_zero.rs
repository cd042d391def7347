use dlock_core::{rate_limited, Error};

#[rate_limited(key = "user:{id}", rate = "0/s")]
async fn f(id: u64) -> Result<u64, Error> {
    Ok(id)
}

fn main() {}
