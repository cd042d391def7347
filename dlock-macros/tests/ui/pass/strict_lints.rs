//! The expansion stays quiet under lints that strict crates turn on beyond `warnings`.
#![deny(
    warnings,
    rust_2018_idioms,
    unused_qualifications,
    unused_results,
    unused_lifetimes,
    single_use_lifetimes,
    trivial_casts,
    trivial_numeric_casts,
    let_underscore_drop,
    unreachable_pub,
    missing_docs,
    missing_debug_implementations,
    unsafe_code
)]
//! Docs for `missing_docs`.

use dlock_core::{Client, Error, distributed_lock};

/// A service.
#[derive(Debug)]
pub struct Service {
    client: Client,
    name: String,
}

impl Service {
    /// A method with every kind of placeholder.
    #[distributed_lock(key = "svc:{self.name}:{id}", client = self.client, guard = lease)]
    pub async fn call(&self, id: u64) -> Result<u64, Error> {
        Ok(id + lease.fencing_token().await?.get())
    }

    /// Skip, with the default client.
    #[distributed_lock(key = "svc:{self.name}", on_busy = "skip", wait = "1s")]
    pub async fn maybe(&self) -> Result<Option<usize>, Error> {
        Ok(Some(self.name.len()))
    }
}

fn check(service: &Service) {
    drop(service.call(1));
    drop(service.maybe());
}

fn main() {
    let _ = check;
}
