use dlock_core::{Error, distributed_lock};

pub struct Message {
    pub id: u64,
}

// `self`, `super` and the like are no field names, not even as `r#…`.
#[distributed_lock(key = "k:{msg.self}")]
async fn not_a_field(msg: &Message) -> Result<u64, Error> {
    Ok(msg.id)
}

#[distributed_lock(key = "k:{msg.r#super}")]
async fn raw_not_a_field(msg: &Message) -> Result<u64, Error> {
    Ok(msg.id)
}

fn main() {}
