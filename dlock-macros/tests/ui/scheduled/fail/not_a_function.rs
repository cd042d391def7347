use dlock_scheduler::scheduled;

#[scheduled(name = "lottery", cron = "0 12 * * *")]
struct Lottery;

fn main() {}
