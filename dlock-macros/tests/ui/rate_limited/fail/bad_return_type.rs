use dlock_core::rate_limited;

#[rate_limited(key = "a", rate = "1/s")]
async fn count() -> u32 {
    1
}

#[rate_limited(key = "b", rate = "1/s")]
async fn nothing() {}

fn main() {}
