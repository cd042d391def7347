//! `client = <expr>` takes a `Client`, a `&Client`, an `Arc<Client>`, a static, or any
//! expression of those; a client parameter may still be used in the body.
#![deny(warnings)]

use std::sync::{Arc, OnceLock};

use dlock_core::{Client, Error, distributed_lock};

static LOCKS: OnceLock<Client> = OnceLock::new();

fn locks() -> &'static Client {
    LOCKS.get().expect("initialised at start-up")
}

#[distributed_lock(key = "a", client = locks())]
async fn from_fn() -> Result<(), Error> {
    Ok(())
}

#[distributed_lock(key = "b", client = client)]
async fn from_owned(client: Client) -> Result<String, Error> {
    Ok(client.key_prefix().to_owned())
}

#[distributed_lock(key = "c", client = client)]
async fn from_arc(client: Arc<Client>) -> Result<usize, Error> {
    Ok(Arc::strong_count(&client))
}

#[distributed_lock(key = "d", client = if fast { a } else { b })]
async fn from_block(a: &Client, b: &Client, fast: bool) -> Result<bool, Error> {
    Ok(fast)
}

fn check(client: &Client) {
    drop(from_fn());
    drop(from_owned(client.clone()));
    drop(from_arc(Arc::new(client.clone())));
    drop(from_block(client, client, true));
}

fn main() {
    let _ = check;
}
