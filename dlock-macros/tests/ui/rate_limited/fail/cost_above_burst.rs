use dlock_core::{rate_limited, Error};

#[rate_limited(key = "user:{id}", rate = "100/s", burst = 5, cost = 6)]
async fn f(id: u64) -> Result<u64, Error> {
    Ok(id)
}

#[rate_limited(key = "user:{id}", rate = "4/s", cost = 5)]
async fn g(id: u64) -> Result<u64, Error> {
    Ok(id)
}

fn main() {}
