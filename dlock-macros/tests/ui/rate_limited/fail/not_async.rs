use dlock_core::{rate_limited, Error};

#[rate_limited(key = "a", rate = "1/s")]
fn f() -> Result<(), Error> {
    Ok(())
}

fn main() {}
