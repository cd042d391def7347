//! Mutual exclusion across OS processes: 2 processes × 4 tasks take 2,000 turns at a
//! non-atomic read-pause-write counter. Any overlap loses updates or is seen by the `inside`
//! check; fencing tokens, appended in acquisition order, must strictly increase.

use crate::support::two_processes_count;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_lose_no_update() {
    two_processes_count("count", "exclusion", 2000).await;
}
