//! `#[async_trait]` impls: `async_trait` runs first and leaves a `Box::pin(async move { … })`
//! body that the lock wraps. `&self` with `{self.field}`, `&mut self`, a destructured
//! parameter, a guard, and the `Send` bound that async_trait's boxed future requires.
#![deny(warnings)]

use async_trait::async_trait;
use dlock_core::{Client, Error, distributed_lock};

#[async_trait]
pub trait Job {
    async fn run(&self, attempt: u32) -> Result<u32, Error>;
    async fn reset(&mut self, pair: (u32, u32)) -> Result<(), Error>;
    async fn fence(&self) -> Result<u64, Error>;
}

pub struct Nightly {
    locks: Client,
    name: String,
    runs: u32,
}

#[async_trait]
impl Job for Nightly {
    #[distributed_lock(key = "job:{self.name}:{attempt}", client = self.locks, wait = "1s")]
    async fn run(&self, attempt: u32) -> Result<u32, Error> {
        if attempt > 3 {
            return Ok(0);
        }
        Ok(self.runs + attempt)
    }

    #[distributed_lock(key = "job:{self.name}", client = self.locks)]
    async fn reset(&mut self, (a, b): (u32, u32)) -> Result<(), Error> {
        self.runs = a + b;
        Ok(())
    }

    #[distributed_lock(key = "job:{self.name}", client = self.locks, guard = lease)]
    async fn fence(&self) -> Result<u64, Error> {
        Ok(lease.fencing_token().await?.get())
    }
}

fn check(job: &mut Nightly) {
    drop(job.run(1));
    drop(job.fence());
    drop(job.reset((1, 2)));
}

fn main() {
    let _ = check;
}
