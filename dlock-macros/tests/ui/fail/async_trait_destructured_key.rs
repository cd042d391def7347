use async_trait::async_trait;
use dlock_core::{Error, distributed_lock};

#[async_trait]
pub trait Cells {
    async fn cell(&self, pair: (u32, u32)) -> Result<u32, Error>;
}

pub struct Grid;

// async-trait binds `(x, y)` inside its body, after the key is built.
#[async_trait]
impl Cells for Grid {
    #[distributed_lock(key = "cell:{x}")]
    async fn cell(&self, (x, y): (u32, u32)) -> Result<u32, Error> {
        Ok(x + y)
    }
}

fn main() {}
