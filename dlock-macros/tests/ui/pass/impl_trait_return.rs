//! `impl Trait` inside the return type, with `?` in the body.
#![deny(warnings)]

use std::fmt::Display;

use dlock_core::{Client, Error, distributed_lock};

#[distributed_lock(key = "report:{day}", client = client, ttl = "1m")]
async fn report(client: &Client, day: u32) -> Result<impl Display, Error> {
    let base: Result<u32, Error> = Ok(day);
    let value = base?;
    Ok(format!("report {value}"))
}

#[distributed_lock(key = "list", client = client, on_busy = "skip")]
async fn list(client: &Client) -> Result<Option<impl Iterator<Item = u32>>, Error> {
    Ok(Some(vec![1, 2, 3].into_iter()))
}

fn check(client: &Client) {
    drop(report(client, 1));
    drop(list(client));
}

fn main() {
    let _ = check;
}
