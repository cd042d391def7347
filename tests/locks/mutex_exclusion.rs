//! Mutual exclusion across OS processes: 2 processes × 4 tasks take 2,000 turns at a
//! non-atomic read-pause-write counter. Any overlap loses updates or is seen by the `inside`
//! check; fencing tokens, appended in acquisition order, must strictly increase.

use crate::support::{Backend, backend_tests, two_processes_count};

backend_tests!(
    async fn two_processes_lose_no_update(backend: Backend) {
        two_processes_count(&backend, "count", "exclusion", 2000).await;
    }
);
