use dlock_core::{Error, distributed_lock};

// Every mistake is reported in one build, each on its own token.
#[distributed_lock(
    key = "order:{order}",
    ttl = "10M",
    wait = "5",
    on_busy = "never",
    colour = "red"
)]
async fn pay(order_id: u64) -> Result<u64, Error> {
    Ok(order_id)
}

fn main() {}
