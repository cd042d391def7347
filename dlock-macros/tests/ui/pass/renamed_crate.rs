//! `crate = "…"` when dlock-core is renamed or re-exported. A `crate::` path is in scope where
//! the expansion uses it: `unused_qualifications` must still not flag the generated paths.
#![deny(warnings, unused_qualifications)]

extern crate dlock_core as my_dlock;

mod deps {
    pub use dlock_core as locks;
}

use my_dlock::distributed_lock;

#[distributed_lock(key = "renamed", client = client, crate = "my_dlock")]
async fn renamed(client: &my_dlock::Client) -> Result<(), my_dlock::Error> {
    Ok(())
}

#[distributed_lock(key = "nested", client = client, crate = "crate::deps::locks", on_busy = "skip")]
async fn reexported(client: &deps::locks::Client) -> Result<Option<u8>, deps::locks::Error> {
    Ok(Some(1))
}

fn check(client: &my_dlock::Client) {
    drop(renamed(client));
    drop(reexported(client));
}

fn main() {
    let _ = check;
}
