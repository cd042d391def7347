//! Generic functions: a type parameter in the key, a where clause, lifetimes, `impl Trait` in
//! argument position, and a const generic.
#![deny(warnings)]

use std::fmt::Display;

use dlock_core::{Client, Error, distributed_lock};

#[distributed_lock(key = "job:{id}", client = client)]
async fn run<'a, T, const N: usize>(
    client: &'a Client,
    id: T,
    payload: &'a [u8; N],
) -> Result<T, Error>
where
    T: Display + Send,
{
    let _ = payload.len();
    Ok(id)
}

#[distributed_lock(key = "tag:{tag}", client = client)]
async fn tagged(client: &Client, tag: impl Display + Send) -> Result<String, Error> {
    Ok(tag.to_string())
}

fn check(client: &Client) {
    drop(run(client, 7u32, &[1, 2, 3]));
    drop(tagged(client, "x"));
}

fn main() {
    let _ = check;
}
