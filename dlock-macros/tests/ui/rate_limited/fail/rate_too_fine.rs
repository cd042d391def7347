use dlock_core::{rate_limited, Error};

#[rate_limited(key = "user:{id}", rate = "2000/ms")]
async fn f(id: u64) -> Result<u64, Error> {
    Ok(id)
}

fn main() {}
