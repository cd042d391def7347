//! The watchdog renews many locks per script call: holding 250 locks costs a handful of calls
//! per renewal interval, not 250. A script may only touch keys of one slot, so on a cluster the
//! batches are per slot: there the 250 locks are named so that their keys share one slot.

use std::time::Duration;

use dlock_core::MutexOptions;

use crate::support::{Backend, backend_tests};

backend_tests!(
    async fn renewals_are_batched(backend: Backend) {
        let c = backend.client();
        let options = MutexOptions::new()
            .ttl(Duration::from_millis(1_500))
            .watchdog();
        let mut guards = Vec::new();
        for name in backend.names_in_one_slot("batch:", 250) {
            let lock = c.mutex_with(&name, options.clone()).unwrap();
            guards.push(lock.try_acquire().await.unwrap().expect("free"));
        }
        let before = backend.evalsha_calls().await;
        // Four renewal intervals (500 ms each).
        tokio::time::sleep(Duration::from_millis(2_000)).await;
        let renewals = backend.evalsha_calls().await - before;
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
);
