//! A `&mut self` method that mutates its state in the body, with `client = self.locks`: the
//! client is cloned before the body takes `self`, so the borrows do not conflict. A by-value
//! `self` method too.
#![deny(warnings)]

use std::sync::Arc;

use dlock_core::{Client, Error, distributed_lock};

pub struct Counter {
    locks: Arc<Client>,
    name: String,
    value: u64,
}

impl Counter {
    #[distributed_lock(key = "counter:{self.name}", client = self.locks)]
    pub async fn bump(&mut self, by: u64) -> Result<u64, Error> {
        self.value += by;
        self.name.push('!');
        Ok(self.value)
    }

    #[distributed_lock(key = "counter:{self.name}", client = self.locks.clone())]
    pub async fn finish(self) -> Result<u64, Error> {
        Ok(self.value)
    }
}

fn check(mut counter: Counter) {
    drop(counter.bump(1));
    drop(counter.finish());
}

fn main() {
    let _ = check;
}
