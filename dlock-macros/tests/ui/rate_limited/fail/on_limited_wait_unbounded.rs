use dlock_core::{rate_limited, Error};

#[rate_limited(key = "user:{id}", rate = "100/s", on_limited = "wait")]
async fn f(id: u64) -> Result<u64, Error> {
    Ok(id)
}

#[rate_limited(key = "user:{id}", rate = "100/s", on_limited = "wait", wait = "forever")]
async fn g(id: u64) -> Result<u64, Error> {
    Ok(id)
}

#[rate_limited(key = "user:{id}", rate = "100/s", on_limited = "skip")]
async fn h(id: u64) -> Result<u64, Error> {
    Ok(id)
}

fn main() {}
