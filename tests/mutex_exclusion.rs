//! Mutual exclusion across OS processes: 2 processes × 4 tasks take 2,000 turns at a
//! non-atomic read-pause-write counter. Any overlap loses updates or is seen by the `inside`
//! check; fencing tokens, appended in acquisition order, must strictly increase.

use std::time::Duration;

use redis::AsyncCommands;

use crate::support::{Worker, field, raw, redis};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_lose_no_update() {
    let server = redis();
    let name = "exclusion";
    let args: Vec<String> = vec![
        "count".into(),
        format!("url={}", server.url()),
        format!("name={name}"),
        "tasks=4".into(),
        "limit=2000".into(),
        "wait_ms=30000".into(),
    ];
    let workers = [Worker::spawn(&args), Worker::spawn(&args)];
    let mut acquired = 0;
    for worker in &workers {
        let summary = worker.line(Duration::from_secs(240));
        assert_eq!(
            field(&summary, "overlaps"),
            0,
            "two holders at once: {summary}"
        );
        assert_eq!(field(&summary, "timeouts"), 0, "{summary}");
        acquired += field(&summary, "acquired");
    }
    assert_eq!(acquired, 2000);

    let mut con = raw(&server).await;
    let counter: u64 = con.get(format!("{name}:counter")).await.unwrap();
    assert_eq!(counter, 2000, "lost updates: {}", 2000 - counter);
    let fences: Vec<u64> = con.lrange(format!("{name}:fences"), 0, -1).await.unwrap();
    assert_eq!(fences.len(), 2000);
    assert!(
        fences.windows(2).all(|w| w[0] < w[1]),
        "fencing tokens must strictly increase in acquisition order"
    );
}
