//! `mode = "read" | "write"` and `permits = N, of = LIMIT` with every option that applies to
//! them (all but `reentrant` on a semaphore), on free functions, methods and `#[async_trait]`
//! impls; the futures stay `Send`.
#![deny(warnings, unused_qualifications, trivial_numeric_casts, unused_results)]

use std::future::Future;

use async_trait::async_trait;
use dlock_core::{Client, Error, distributed_lock};

fn assert_send<F: Future + Send>(future: F) -> F {
    future
}

#[distributed_lock(key = "prices:{region}", mode = "read", client = client, wait = "5s")]
async fn read_prices(client: &Client, region: &str) -> Result<usize, Error> {
    tokio::task::yield_now().await;
    Ok(region.len())
}

#[distributed_lock(
    key = "prices:{region}",
    mode = "write",
    ttl = "10s",
    watchdog = true,
    max_hold = "1m",
    wait = "forever",
    on_lost = "signal",
    reentrant = false,
    label = "price writer",
    client = client,
    crate = "::dlock_core",
    guard = lease,
)]
async fn write_prices(client: &Client, region: &str) -> Result<u64, Error> {
    Ok(lease.fencing_token().await?.get() + region.len() as u64)
}

#[distributed_lock(key = "prices", mode = "read", on_busy = "skip", wait = "100ms")]
async fn read_or_skip() -> Result<Option<()>, Error> {
    Ok(Some(()))
}

#[distributed_lock(key = "exports", permits = 1, of = 4, client = client, wait = "forever")]
async fn export(client: &Client) -> Result<(), Error> {
    tokio::task::yield_now().await;
    Ok(())
}

#[distributed_lock(
    key = "exports:{day}",
    of = 8,
    permits = 8,
    ttl = "250ms",
    watchdog = false,
    wait = "1s",
    on_busy = "skip",
    on_lost = "signal",
    label = "bulk export",
    client = client,
    guard = permit,
)]
async fn export_all(client: &Client, day: u32) -> Result<Option<u64>, Error> {
    Ok(Some(permit.fencing_token().await?.get() + u64::from(day)))
}

#[distributed_lock(key = "one", permits = 4_294_967_295, of = 4_294_967_295, client = client)]
async fn everything_at_once(client: &Client) -> Result<(), Error> {
    Ok(())
}

pub struct Catalog {
    locks: Client,
    name: String,
}

impl Catalog {
    #[distributed_lock(key = "catalog:{self.name}", mode = "write", client = self.locks)]
    async fn rebuild(&mut self) -> Result<(), Error> {
        self.name.push('!');
        Ok(())
    }
}

#[async_trait]
pub trait Exporter {
    async fn export(&self, batch: u32) -> Result<u32, Error>;
    async fn peek(&self) -> Result<usize, Error>;
}

#[async_trait]
impl Exporter for Catalog {
    #[distributed_lock(key = "export:{self.name}", permits = 2, of = 3, client = self.locks)]
    async fn export(&self, batch: u32) -> Result<u32, Error> {
        Ok(batch)
    }

    #[distributed_lock(key = "catalog:{self.name}", mode = "read", client = self.locks)]
    async fn peek(&self) -> Result<usize, Error> {
        Ok(self.name.len())
    }
}

fn check(client: &Client, catalog: &mut Catalog) {
    drop(assert_send(read_prices(client, "eu")));
    drop(assert_send(write_prices(client, "eu")));
    drop(assert_send(read_or_skip()));
    drop(assert_send(export(client)));
    drop(assert_send(export_all(client, 1)));
    drop(assert_send(everything_at_once(client)));
    drop(assert_send(catalog.export(1)));
    drop(assert_send(catalog.peek()));
    drop(assert_send(catalog.rebuild()));
}

fn main() {
    let _ = check;
}
