//! Every option at once, and a few more spellings: trailing comma, `wait = "forever"`,
//! `reentrant = false`, `watchdog = false`, `label`, tuple-index and nested placeholders.
#![deny(warnings)]

use dlock_core::{Client, Error, distributed_lock};

pub struct Point(pub u32, pub u32);

#[distributed_lock(
    key = "grid:{p.0}x{p.1}:{name}",
    ttl = "1h30m",
    watchdog = true,
    max_hold = "1d",
    wait = "1m30s",
    on_busy = "error",
    on_lost = "cancel",
    reentrant = true,
    label = "grid writer",
    client = client,
    crate = "::dlock_core",
    guard = held,
)]
async fn everything(client: &Client, p: Point, name: String) -> Result<u64, Error> {
    Ok(held.fencing_token().await?.get() + u64::from(p.0) + name.len() as u64)
}

#[distributed_lock(
    key = "fixed",
    ttl = "250ms",
    watchdog = false,
    wait = "forever",
    reentrant = false
)]
async fn fixed_lease() -> Result<(), Error> {
    Ok(())
}

fn check(client: &Client) {
    drop(everything(client, Point(1, 2), "n".into()));
    drop(fixed_lease());
}

fn main() {
    let _ = check;
}
