use dlock_core::{Error, distributed_lock};

// `rest @ ..` binds a slice of the array: not a key part.
#[distributed_lock(key = "route:{rest}")]
async fn route([first, rest @ ..]: [u64; 3]) -> Result<u64, Error> {
    Ok(first + rest.len() as u64)
}

fn main() {}
