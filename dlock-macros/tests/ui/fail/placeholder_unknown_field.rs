use dlock_core::{Error, distributed_lock};

pub struct Order {
    pub id: u64,
    pub customer: Customer,
}

pub struct Customer {
    pub name: String,
}

// A field that does not exist, and a field whose type is not a `KeyPart`: both reported on the
// parameter the placeholder starts from.
#[distributed_lock(key = "order:{order.number}:{order.customer}")]
async fn ship(order: &Order) -> Result<u64, Error> {
    Ok(order.id)
}

fn main() {}
