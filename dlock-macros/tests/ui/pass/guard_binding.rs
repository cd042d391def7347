//! `guard = <ident>` binds the lease in the body under the user's name: fencing token,
//! `remaining()`, `lost()`, `cancellation_token()`; with `on_lost = "signal"` the body decides.
#![deny(warnings)]

use std::time::Duration;

use dlock_core::{Client, Error, distributed_lock};

#[distributed_lock(key = "copy:{table}", client = client, guard = lease, on_lost = "signal")]
async fn copy(client: &Client, table: &str) -> Result<u64, Error> {
    let token = lease.cancellation_token();
    tokio::select! {
        lost = lease.lost() => return Ok(u64::from(lost.reason() == dlock_core::LostReason::Released)),
        () = tokio::time::sleep(Duration::from_millis(1)) => {}
    }
    assert!(!token.is_cancelled() || lease.remaining() == Duration::ZERO);
    Ok(lease.fencing_token().await?.get() + table.len() as u64)
}

fn check(client: &Client) {
    drop(copy(client, "t"));
}

fn main() {
    let _ = check;
}
