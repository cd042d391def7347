//! A free function: a key from a reference parameter's nested fields and a plain parameter,
//! `?` converting two error types, and an early `return`.
#![deny(warnings)]

use dlock_core::distributed_lock;

pub struct Order {
    pub id: u64,
    pub shop: Shop,
}

pub struct Shop {
    pub region: &'static str,
}

#[derive(Debug)]
pub enum PayError {
    Lock(dlock_core::Error),
    Parse(std::num::ParseIntError),
}

impl From<dlock_core::Error> for PayError {
    fn from(e: dlock_core::Error) -> Self {
        Self::Lock(e)
    }
}

impl From<std::num::ParseIntError> for PayError {
    fn from(e: std::num::ParseIntError) -> Self {
        Self::Parse(e)
    }
}

#[distributed_lock(
    key = "order:{order.shop.region}:{order.id}:{attempt}",
    ttl = "10s",
    wait = "5s"
)]
async fn pay(order: &Order, attempt: u32, amount: &str) -> Result<u64, PayError> {
    let amount: u64 = amount.parse()?;
    if amount == 0 {
        return Ok(0);
    }
    Ok(amount + u64::from(attempt))
}

fn main() {
    let order = Order {
        id: 1,
        shop: Shop { region: "eu" },
    };
    drop(pay(&order, 1, "10"));
}
