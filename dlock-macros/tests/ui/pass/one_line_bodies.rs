//! Bodies of every shape, written on one line, where rustc's `unused_braces` lint looks at the
//! braces: one expression, `return` with and without `;`, `?`, statements, a diverging body,
//! `on_busy = "skip"`, a method and an `#[async_trait]` method. The expansion adds no warning.
#![deny(warnings)]

use async_trait::async_trait;
use dlock_core::{Client, Error, distributed_lock};

#[rustfmt::skip]
mod bodies {
    use super::*;

    #[distributed_lock(key = "a")]
    pub async fn expression() -> Result<(), Error> { Ok(()) }

    #[distributed_lock(key = "b", client = client)]
    pub async fn given_client(client: &Client) -> Result<u8, Error> { Ok(1) }

    #[distributed_lock(key = "c")]
    pub async fn returns() -> Result<(), Error> { return Ok(()) }

    #[distributed_lock(key = "d")]
    pub async fn returns_with_semicolon() -> Result<(), Error> { return Ok(()); }

    #[distributed_lock(key = "e:{n}")]
    pub async fn question_mark(n: &str) -> Result<u64, Box<dyn std::error::Error + Send + Sync>> { Ok(n.parse::<u64>()?) }

    #[distributed_lock(key = "f")]
    pub async fn statements() -> Result<u8, Error> { let n = 1; Ok(n) }

    #[distributed_lock(key = "g")]
    pub async fn diverging() -> Result<(), Error> { unreachable!("never called") }

    #[distributed_lock(key = "h", on_busy = "skip")]
    pub async fn skip() -> Result<Option<u8>, Error> { Ok(Some(1)) }

    #[distributed_lock(key = "i", on_busy = "skip")]
    pub async fn skip_result() -> Result<Option<u8>, Error> { Ok(None) }

    pub struct Service;

    impl Service {
        #[distributed_lock(key = "j")]
        pub async fn method(&self) -> Result<(), Error> { Ok(()) }
    }

    #[async_trait]
    pub trait Job {
        async fn run(&self) -> Result<(), Error>;
    }

    #[async_trait]
    impl Job for Service {
        #[distributed_lock(key = "k")]
        async fn run(&self) -> Result<(), Error> { Ok(()) }
    }
}

fn check(client: &Client) {
    use bodies::*;
    drop(expression());
    drop(given_client(client));
    drop(returns());
    drop(returns_with_semicolon());
    drop(question_mark("1"));
    drop(statements());
    drop(diverging());
    drop(skip());
    drop(skip_result());
    drop(Service.method());
    drop(Service.run());
}

fn main() {
    let _ = check;
}
