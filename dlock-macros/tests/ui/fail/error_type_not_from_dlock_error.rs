use dlock_core::{Client, distributed_lock};

// An error type that a busy or lost lock cannot be converted into: the crate's note, once per
// function, on the return type (with the default client and with `client = …`).
#[distributed_lock(key = "a")]
async fn text_error() -> Result<u64, String> {
    Ok(1)
}

#[distributed_lock(key = "b", client = client)]
async fn io_error(client: &Client) -> std::io::Result<u64> {
    Ok(1)
}

fn main() {}
