//! A guard dropped without `release` is released in the background; dropping one outside a
//! runtime neither blocks nor panics (the lease then expires).

use std::time::Duration;

use dlock_core::MutexOptions;

use crate::support::{Backend, acquired_within, backend_tests};

backend_tests!(
    async fn dropped_guard_is_released_in_the_background(backend: Backend) {
        let lock = backend.client().mutex("dropped").unwrap();
        let guard = lock.try_acquire().await.unwrap().expect("free");
        drop(guard);
        let other = backend.client().mutex("dropped").unwrap();
        let again = acquired_within(&other, Duration::from_secs(5), "background release").await;
        again.release().await.unwrap();
    }

    fn dropping_a_guard_outside_a_runtime_does_not_panic(backend: Backend) {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let guard = runtime.block_on(async {
            let lock = backend
                .client()
                .mutex_with(
                    "orphan",
                    MutexOptions::new().ttl(Duration::from_millis(200)),
                )
                .unwrap();
            lock.try_acquire().await.unwrap().expect("free")
        });
        // A plain thread has no runtime: the drop must neither panic nor block.
        std::thread::spawn(move || drop(guard)).join().unwrap();
        runtime.block_on(async {
            let lock = backend.client().mutex("orphan").unwrap();
            let guard = lock.acquire_timeout(Duration::from_secs(5)).await.unwrap();
            guard.release().await.unwrap();
        });
    }
);
