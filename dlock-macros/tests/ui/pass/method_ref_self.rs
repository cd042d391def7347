//! A `&self` method in an `impl` block: `{self.field}` in the key, `client = self.field`.
#![deny(warnings)]

use dlock_core::{Client, Error, distributed_lock};

pub struct Inventory {
    locks: Client,
    warehouse: String,
}

impl Inventory {
    #[distributed_lock(key = "stock:{self.warehouse}:{sku}", client = self.locks, ttl = "2s")]
    pub async fn reserve(&self, sku: &str, count: u32) -> Result<u32, Error> {
        Ok(count + u32::try_from(self.warehouse.len() + sku.len()).unwrap_or(0))
    }
}

fn check(inventory: &Inventory) {
    drop(inventory.reserve("sku-1", 2));
}

fn main() {
    let _ = check;
}
