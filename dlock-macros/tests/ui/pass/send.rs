//! The future stays `Send` when the body's is, so it can be `tokio::spawn`ed: free functions,
//! methods, generics, the default client, the guard, skip.
#![deny(warnings)]

use std::fmt::Display;
use std::future::Future;

use dlock_core::{Client, Error, distributed_lock};

fn assert_send<F: Future + Send>(future: F) -> F {
    future
}

#[distributed_lock(key = "a:{id}")]
async fn default_client(id: u64) -> Result<u64, Error> {
    tokio::task::yield_now().await;
    Ok(id)
}

#[distributed_lock(key = "b:{id}", client = client, guard = lease, wait = "forever")]
async fn generic<T: Display + Send + Sync>(client: &Client, id: T) -> Result<String, Error> {
    tokio::task::yield_now().await;
    Ok(format!("{id}{}", lease.fencing_token().await?))
}

pub struct Service {
    client: Client,
    name: String,
}

impl Service {
    #[distributed_lock(key = "c:{self.name}", client = self.client, on_busy = "skip")]
    async fn method(&self) -> Result<Option<usize>, Error> {
        tokio::task::yield_now().await;
        Ok(Some(self.name.len()))
    }
}

fn check(client: &Client, service: &Service) {
    drop(tokio::spawn(default_client(1)));
    drop(assert_send(generic(client, 2)));
    drop(assert_send(service.method()));
}

fn main() {
    let _ = check;
}
