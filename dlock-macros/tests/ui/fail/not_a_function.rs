use dlock_core::distributed_lock;

#[distributed_lock(key = "a")]
struct Config {
    ttl: u64,
}

fn main() {}
