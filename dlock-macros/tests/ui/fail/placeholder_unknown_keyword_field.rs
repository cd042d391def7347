use dlock_core::{Error, distributed_lock};

pub struct Message {
    pub r#type: u32,
}

// `{msg.match}` reads the field `r#match`, which `Message` does not have: reported on the
// parameter, without an edit that would rename the parameter.
#[distributed_lock(key = "k:{msg.match}")]
async fn route(msg: &Message) -> Result<u32, Error> {
    Ok(msg.r#type)
}

fn main() {}
