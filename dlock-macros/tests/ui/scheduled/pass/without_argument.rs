//! A handler that needs no context; `tz` defaults to UTC; a 6-field cron (seconds first).
#![deny(warnings)]

use dlock_scheduler::scheduled;

#[scheduled(name = "heartbeat", cron = "*/10 * * * * *")]
async fn heartbeat() -> Result<(), std::io::Error> {
    Ok(())
}

// `String` is `Display` too; a nickname works as the cron expression.
#[scheduled(name = "daily", cron = "@daily")]
async fn daily() -> Result<(), String> {
    Err("nothing to do".to_owned())
}

// A `#[cfg]` below the attribute applies to the generated module too.
#[scheduled(name = "compiled-out", cron = "* * * * *")]
#[cfg(any())]
async fn compiled_out() -> Result<(), String> {
    Ok(())
}

fn main() {
    let job = heartbeat::job().unwrap();
    assert_eq!(job.name(), "heartbeat");
    assert_eq!(job.schedule().unwrap().cron(), "*/10 * * * * *");
    assert_eq!(job.schedule().unwrap().time_zone(), dlock_scheduler::chrono_tz::UTC);
    assert_eq!(daily::job().unwrap().schedule().unwrap().cron(), "@daily");
}
