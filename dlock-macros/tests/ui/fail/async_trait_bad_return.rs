use async_trait::async_trait;
use dlock_core::{Client, distributed_lock};

#[async_trait]
pub trait Job {
    async fn run(&self) -> u32;
}

pub struct Nightly {
    locks: Client,
}

#[async_trait]
impl Job for Nightly {
    #[distributed_lock(key = "nightly", client = self.locks)]
    async fn run(&self) -> u32 {
        1
    }
}

fn main() {}
