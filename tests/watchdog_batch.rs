//! The watchdog renews many locks per script call: holding 250 locks costs a handful of calls
//! per renewal interval, not 250.

use std::time::Duration;

use dlock_core::MutexOptions;

use crate::support::{client, raw, redis};

async fn evalsha_calls(con: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(con)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_are_batched() {
    let server = redis();
    let c = client(&server);
    let options = MutexOptions::new()
        .ttl(Duration::from_millis(1_500))
        .watchdog();
    let mut guards = Vec::new();
    for i in 0..250 {
        let lock = c
            .mutex_with(&format!("batch:{i}"), options.clone())
            .unwrap();
        guards.push(lock.try_acquire().await.unwrap().expect("free"));
    }
    let mut con = raw(&server).await;
    let before = evalsha_calls(&mut con).await;
    // Four renewal intervals (500 ms each).
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    let renewals = evalsha_calls(&mut con).await - before;
    assert!(renewals >= 3, "the watchdog did renew: {renewals} calls");
    // 250 locks = 3 calls per interval when batched; 1,000 if not.
    assert!(
        renewals <= 30,
        "{renewals} script calls for 250 locks over 4 intervals"
    );
    for guard in &guards {
        assert!(guard.remaining() > Duration::from_millis(500), "{guard:?}");
    }
    for guard in guards {
        assert!(guard.release().await.unwrap().was_held());
    }
}
