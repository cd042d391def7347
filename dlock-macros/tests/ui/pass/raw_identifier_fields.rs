//! A field or parameter named with a keyword (`r#type`) may be written `{msg.type}` or
//! `{msg.r#type}` in a key; both read the field `r#type`.
#![deny(warnings)]

use dlock_core::{Error, distributed_lock};

pub struct Message {
    pub r#type: &'static str,
    pub r#match: (u32, u32),
    pub id: u64,
}

#[distributed_lock(key = "msg:{msg.type}:{msg.r#type}:{msg.match.1}:{msg.r#match.0}:{msg.id}")]
async fn route(msg: &Message) -> Result<u64, Error> {
    Ok(msg.id)
}

#[distributed_lock(key = "kind:{type}:{r#type}")]
async fn by_kind(r#type: &str) -> Result<usize, Error> {
    Ok(r#type.len())
}

fn main() {
    let msg = Message {
        r#type: "order",
        r#match: (1, 2),
        id: 7,
    };
    drop(route(&msg));
    drop(by_kind("order"));
}
