//! The limits of watchdog leases: the shortest accepted lease holds (1,000 locks at
//! `MIN_WATCHDOG_TTL`, held for five leases each while the rest of the suite loads the machine,
//! lose nothing — on a cluster too, where their keys spread over ~1,000 slots); shorter leases
//! are refused, and so is an extension too short for the watchdog to retry a failed renewal in
//! time.

use std::time::Duration;

use dlock_core::{ErrorKind, ExtendOutcome, MIN_WATCHDOG_TTL, MutexOptions};

use crate::support::{Backend, backend_tests};

const LOCKS: usize = 1_000;

backend_tests!(
    async fn a_thousand_minimum_leases_hold_for_five_leases(backend: Backend) {
        let c = backend.client();
        let options = MutexOptions::new().ttl(MIN_WATCHDOG_TTL).watchdog();
        let mut guards = Vec::with_capacity(LOCKS);
        for i in 0..LOCKS {
            let lock = c.mutex_with(&format!("min:{i}"), options.clone()).unwrap();
            guards.push(lock.try_acquire().await.unwrap().expect("free"));
        }
        let tokens: Vec<_> = guards.iter().map(|g| g.cancellation_token()).collect();
        // The hold itself: five leases, renewed by the watchdog meanwhile.
        tokio::time::sleep(MIN_WATCHDOG_TTL * 5).await;
        let lost: Vec<_> = guards
            .iter()
            .filter(|g| !g.lease().is_held() || g.cancellation_token().is_cancelled())
            .map(|g| g.name().to_owned())
            .collect();
        let mut not_held = 0;
        for guard in guards {
            if !guard.release().await.unwrap().was_held() {
                not_held += 1;
            }
        }
        assert!(
            tokens.iter().all(|t| t.is_cancelled()),
            "released: all tokens fire"
        );
        assert_eq!(lost.len(), 0, "leases lost: {lost:?}");
        assert_eq!(not_held, 0, "leases gone from Redis before their release");
    }

    async fn a_shorter_watchdog_lease_is_refused(backend: Backend) {
        let c = backend.client();
        let short = MIN_WATCHDOG_TTL - Duration::from_millis(1);
        let err = c
            .mutex_with("short", MutexOptions::new().ttl(short).watchdog())
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(
            err.to_string().contains("shortest lease the watchdog"),
            "{err}"
        );
        // A fixed lease that short is the caller's to manage, and accepted.
        assert!(
            c.mutex_with("short", MutexOptions::new().ttl(short))
                .is_ok()
        );
    }

    async fn a_watchdog_lease_cannot_be_extended_below_twice_its_renewal_interval(
        backend: Backend,
    ) {
        let c = backend.client();
        let options = MutexOptions::new()
            .ttl(Duration::from_secs(3))
            .renew_every(Duration::from_secs(1));
        let mut guard = c
            .mutex_with("ext-wd", options)
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .expect("free");
        let err = guard
            .extend(Duration::from_millis(1_999))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(
            err.to_string()
                .contains("twice the watchdog's renewal interval"),
            "{err}"
        );
        assert_eq!(
            guard.extend(Duration::from_secs(2)).await.unwrap(),
            ExtendOutcome::Extended
        );
        assert_eq!(guard.ttl(), Duration::from_secs(2));
        assert!(guard.release().await.unwrap().was_held());
    }
);
