use dlock_core::{Error, distributed_lock};

const KEY: &str = "orders";

// The template is read at compile time: a `const` is one error, not also a missing `key`.
#[distributed_lock(key = KEY)]
async fn from_const() -> Result<(), Error> {
    Ok(())
}

fn main() {}
