//! `on_busy = "skip"`: `Result<Option<T>, E>`, with and without `wait`.
#![deny(warnings)]

use dlock_core::{Client, Error, distributed_lock};

#[distributed_lock(key = "nightly", client = client, on_busy = "skip")]
async fn nightly(client: &Client) -> Result<Option<u32>, Error> {
    Ok(Some(1))
}

#[distributed_lock(key = "hourly", client = client, on_busy = "skip", wait = "100ms")]
async fn hourly(client: &Client) -> Result<Option<u32>, Error> {
    // `?` in the body converts into the function's error type.
    let n: Result<u32, Error> = Ok(2);
    Ok(Some(n?))
}

fn check(client: &Client) {
    drop(nightly(client));
    drop(hourly(client));
}

fn main() {
    let _ = check;
}
