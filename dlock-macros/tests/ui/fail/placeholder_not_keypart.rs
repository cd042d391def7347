use dlock_core::{Error, distributed_lock};

pub struct Customer {
    pub id: u64,
}

#[distributed_lock(key = "customer:{customer}")]
async fn bill(customer: Customer) -> Result<u64, Error> {
    Ok(customer.id)
}

fn main() {}
