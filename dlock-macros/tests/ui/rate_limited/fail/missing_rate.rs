use dlock_core::{rate_limited, Error};

#[rate_limited(key = "user:{id}")]
async fn f(id: u64) -> Result<u64, Error> {
    Ok(id)
}

fn main() {}
