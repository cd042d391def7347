//! The test kit's faults against dlock's own locks, on both backends. `expire_lock` restates
//! dlock's key layout (the kit cannot depend on dlock-core), so this is where the two are held
//! together: it takes the lease of every kind of lock, under the default and a custom key
//! prefix, and the holder hears of it through `lost()`. `cut_connections` reaches dlock's
//! connections, and a watchdog lease outlives it, as dlock promises for an outage shorter than
//! the lease.

use std::time::{Duration, Instant};

use dlock_core::{Lease, LostReason, MutexOptions};
use dlock_testkit::HarnessError;

use crate::support::{Backend, backend_tests, eventually};

/// A renewed lease: a third of it between renewals, so a loss is heard within ~0.4 s.
const TTL: Duration = Duration::from_secs(1);

fn renewed() -> MutexOptions {
    MutexOptions::new().ttl(TTL).watchdog()
}

fn expire(backend: &Backend, prefix: &str, name: &str) -> Result<usize, HarnessError> {
    match backend {
        Backend::Single(server) => server.expire_lock_with_prefix(prefix, name),
        Backend::Cluster(cluster) => cluster.expire_lock_with_prefix(prefix, name),
    }
}

/// Waits for `lease` to be lost and checks that it was lost to a removal: `Removed` when the
/// renewal that found the keys gone certainly ran while the lease stood, `Expired` when its
/// answer came too late to tell (a slow machine).
async fn lost_to_removal(lease: &Lease) {
    let lost = tokio::time::timeout(Duration::from_secs(5), lease.lost())
        .await
        .unwrap_or_else(|_| panic!("`{}` never heard its keys were removed", lease.name()));
    assert!(
        matches!(lost.reason(), LostReason::Removed | LostReason::Expired),
        "{}: {lost}",
        lease.name()
    );
    assert!(lease.cancellation_token().is_cancelled());
}

backend_tests!(
    async fn expire_lock_takes_the_lease_of_every_kind_of_lock(backend: Backend) {
        let client = backend.client();
        let mutex = client.mutex_with("kit:m", renewed()).unwrap();
        let mutex = mutex.try_acquire().await.unwrap().expect("free");
        let semaphore = client.semaphore_with("kit:s", 3, renewed()).unwrap();
        let permit = semaphore.acquire(1).await.unwrap();
        let rw_lock = client.rw_lock_with("kit:r", renewed()).unwrap();
        let reader = rw_lock.read().await.unwrap();

        let prefix = client.key_prefix();
        assert_eq!(prefix, dlock_testkit::DEFAULT_KEY_PREFIX);
        assert_eq!(expire(&backend, prefix, "kit:m").unwrap(), 1);
        assert_eq!(
            expire(&backend, prefix, "kit:s").unwrap(),
            2,
            "sem, sem:exp"
        );
        assert_eq!(expire(&backend, prefix, "kit:r").unwrap(), 2, "rw, rw:exp");
        for lease in [mutex.lease(), permit.lease(), reader.lease()] {
            lost_to_removal(&lease).await;
        }

        // The locks are free at once, as after leases that ran out.
        let other = backend.client();
        assert!(
            other
                .mutex("kit:m")
                .unwrap()
                .try_acquire()
                .await
                .unwrap()
                .is_some()
        );
        assert!(
            other
                .semaphore("kit:s", 1)
                .unwrap()
                .try_acquire(1)
                .await
                .unwrap()
                .is_some()
        );
        assert!(
            other
                .rw_lock("kit:r")
                .unwrap()
                .try_write()
                .await
                .unwrap()
                .is_some()
        );
    }

    async fn expire_lock_follows_the_clients_key_prefix(backend: Backend) {
        let client = backend
            .builder()
            .key_prefix("billing:locks:")
            .build()
            .unwrap();
        let guard = client
            .mutex_with("invoice:7", renewed())
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .expect("free");
        let error = match &backend {
            Backend::Single(server) => server.expire_lock("invoice:7"),
            Backend::Cluster(cluster) => cluster.expire_lock("invoice:7"),
        }
        .unwrap_err();
        assert!(error.to_string().contains("dlock:{invoice:7}"), "{error}");
        assert!(
            guard.lease().is_held(),
            "the default prefix reached the lock"
        );

        assert_eq!(
            expire(&backend, client.key_prefix(), "invoice:7").unwrap(),
            1
        );
        lost_to_removal(&guard.lease()).await;
    }

    async fn a_renewed_lease_outlives_cut_connections(backend: Backend) {
        let client = backend.client();
        let guard = client
            .mutex_with("kit:cut", renewed())
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .expect("free");
        let cut: usize = backend
            .servers()
            .iter()
            .map(|server| server.cut_connections().unwrap())
            .sum();
        let cut_at = Instant::now();
        assert!(cut >= 1, "dlock's connection was not among those cut");

        // A renewal sent after the cut moves the lease's end past `cut_at` + the lease less
        // dlock's drift allowance (TTL/100 + 2 ms); one sent before cannot. The client
        // reconnects on its own (its first request may still find the old socket).
        let after_cut = cut_at + TTL - TTL / 100 - Duration::from_millis(2);
        eventually(
            Duration::from_secs(10),
            "a renewal after the cut",
            || async {
                assert!(guard.lease().is_held(), "the cut cost the lease");
                (guard.safe_until() > after_cut).then_some(())
            },
        )
        .await;
        let other = backend.client();
        assert!(guard.lease().is_held());
        assert!(
            other
                .mutex("kit:cut")
                .unwrap()
                .try_acquire()
                .await
                .unwrap()
                .is_none()
        );
        assert!(guard.release().await.unwrap().was_held());
    }
);
