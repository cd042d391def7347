//! `on_busy = "skip"`: `Result<Option<T>, E>`, with and without `wait`.
#![deny(warnings)]

use dlock_core::{Client, Error, distributed_lock};

#[distributed_lock(key = "nightly", client = client, on_busy = "skip")]
async fn nightly(client: &Client) -> Result<Option<u32>, Error> {
    Ok(Some(1))
}

#[distributed_lock(key = "hourly", client = client, on_busy = "skip", wait = "100ms")]
async fn hourly(client: &Client) -> Result<Option<u32>, Error> {
    let n: Option<u32> = Some(2);
    Ok(Some(n.ok_or_else(|| unreachable!())?))
}

fn check(client: &Client) {
    drop(nightly(client));
    drop(hourly(client));
}

fn main() {
    let _ = check;
}
