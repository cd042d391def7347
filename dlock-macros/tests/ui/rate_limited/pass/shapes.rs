//! Every shape `#[distributed_lock]` accepts takes `#[rate_limited]` too: free functions with
//! the default client, methods with `client = self.…`, generics, `#[async_trait]` methods,
//! a lock inside a rate limit; the futures stay `Send`.
#![deny(warnings)]

use std::fmt::Display;
use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use dlock_core::{Client, Error, distributed_lock, rate_limited};

fn assert_send<F: Future + Send>(future: F) -> F {
    future
}

#[rate_limited(key = "search:{user}", rate = "100/s", burst = 20)]
async fn search(user: u64, query: String) -> Result<usize, Error> {
    tokio::task::yield_now().await;
    Ok(query.len() + usize::try_from(user).unwrap_or(0))
}

#[rate_limited(key = "partner-api", rate = "5/10s", on_limited = "wait", wait = "2s", client = client)]
async fn partner<T: Display + Send + Sync>(client: &Client, id: T) -> Result<String, Error> {
    Ok(format!("{id}"))
}

pub struct Api {
    locks: Arc<Client>,
    tenant: String,
}

impl Api {
    #[rate_limited(
        key = "export:{self.tenant}",
        rate = "10/m",
        burst = 1,
        cost = 1,
        fail_open = true,
        label = "exports per tenant",
        client = self.locks,
    )]
    async fn export(&self) -> Result<String, Error> {
        Ok(self.tenant.clone())
    }

    /// Admitted first, then locked: the limit counts attempts, the lock serialises the work.
    #[rate_limited(key = "pay:{order}", rate = "1/s", client = self.locks)]
    #[distributed_lock(key = "order:{order}", client = self.locks, wait = "1s")]
    async fn pay(&self, order: u64) -> Result<u64, Error> {
        Ok(order)
    }
}

#[async_trait]
pub trait Reports {
    async fn report(&self, day: u32) -> Result<u32, Error>;
}

#[async_trait]
impl Reports for Api {
    #[rate_limited(key = "report:{day}", rate = "1/d", client = self.locks)]
    async fn report(&self, day: u32) -> Result<u32, Error> {
        Ok(day)
    }
}

#[rate_limited(key = "one-line", rate = "1/500ms")]
async fn one_line() -> Result<(), Error> { Ok(()) }

fn check(client: &Client, api: &Api) {
    drop(tokio::spawn(search(1, String::new())));
    drop(assert_send(partner(client, 2)));
    drop(assert_send(api.export()));
    drop(assert_send(api.pay(3)));
    drop(assert_send(api.report(4)));
    drop(assert_send(one_line()));
}

fn main() {
    let _ = check;
}
