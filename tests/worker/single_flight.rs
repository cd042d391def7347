//! The worker's `single-flight` command: `callers` tasks of this process call
//! `client.single_flight(key, …)` at once (dlock-tower), each computation counted in Redis.
//!
//! `single-flight url=… key=… callers=N compute_ms=M` — every caller's computation (when it
//! runs) increments `<key>:computed`, prints `computing`, sleeps `M` ms and returns this
//! process's pid; once every caller has its answer, prints `results <pid,pid,…>` (or
//! `error …` for a caller that failed).

use std::collections::HashMap;
use std::time::Duration;

use dlock_tower::{SingleFlightExt, SingleFlightOptions};
use redis::AsyncCommands;

use crate::{BoxError, client, num, opt, report};

pub(crate) async fn single_flight(opts: &HashMap<String, String>) -> Result<(), BoxError> {
    let client = client(opts)?;
    let key = opt(opts, "key")?.to_owned();
    let compute = Duration::from_millis(num(opts, "compute_ms", 100)?);
    // A short lease, so that a winner that was killed is taken over soon; a waiter re-checks
    // often, so that it notices.
    let options = SingleFlightOptions::default()
        .lease(Duration::from_secs(1))
        .recheck(Duration::from_millis(50))
        .wait(Duration::from_secs(30));
    let calls = (0..num(opts, "callers", 1)?).map(|_| {
        let (client, key, options) = (client.clone(), key.clone(), options.clone());
        tokio::spawn(async move {
            let mut con = client.connection();
            let counter = format!("{key}:computed");
            client
                .single_flight_with(&key, Duration::from_secs(30), &options, || async move {
                    let _: u64 = con.incr(counter, 1).await?;
                    report("computing");
                    tokio::time::sleep(compute).await;
                    Ok::<_, BoxError>(std::process::id())
                })
                .await
        })
    });
    let mut results = Vec::new();
    for call in calls.collect::<Vec<_>>() {
        results.push(call.await??.to_string());
    }
    report(&format!("results {}", results.join(",")));
    Ok(())
}
