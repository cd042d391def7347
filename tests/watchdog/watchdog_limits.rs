//! The limits of watchdog leases: the shortest accepted lease holds (1,000 locks at
//! `MIN_WATCHDOG_TTL`, held for five leases each while the rest of the suite loads the machine,
//! lose nothing — on a cluster too, where their keys spread over ~1,000 slots); shorter leases
//! are refused, and so is an extension too short for the watchdog to retry a failed renewal in
//! time. The hold measures the machine's scheduling delay first and throughout
//! (`support::sched_delay`): above the bound a renewal can absorb it fails naming that delay,
//! and a lease lost below it names the delay too, so a busy machine is told from a short lease.

use std::fmt;
use std::time::Duration;

use dlock_core::{ErrorKind, ExtendOutcome, MIN_WATCHDOG_TTL, MutexOptions};

use crate::support::sched_delay::{Probe, SchedDelay};
use crate::support::{Backend, backend_tests};

const LOCKS: usize = 1_000;
/// How long the machine's scheduling delay is measured before the hold.
const PROBE: Duration = Duration::from_millis(500);

/// How late a renewal may wake and still land: a 100 ms watchdog lease is renewed every
/// third of it (33 ms, dlock-core's default) and its holder trusts it until the lease less the
/// drift allowance (`lease / 100 + 2 ms`) after the renewal was sent; what is left between the
/// two (about 64 ms) is all the lateness a renewal may have, its round trip included.
fn slack() -> Duration {
    let renew_every = MIN_WATCHDOG_TTL / 3;
    let drift = MIN_WATCHDOG_TTL / 100 + Duration::from_millis(2);
    MIN_WATCHDOG_TTL - renew_every - drift
}

/// What this machine did to a renewal over one window: how late timers woke (the watchdog's
/// turn) and how long a round trip to the backend took (the server's turn, on the same cores).
struct Delays {
    timers: SchedDelay,
    pings: SchedDelay,
}

impl fmt::Display for Delays {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}; {}", self.timers, self.pings)
    }
}

/// Both probes, started on the test's runtime against `backend`.
async fn probes(backend: &Backend) -> (Probe, Probe) {
    (Probe::start(), Probe::start_pinging(backend.raw().await))
}

/// What both probes saw since they started.
async fn stop((timers, pings): (Probe, Probe)) -> Delays {
    Delays {
        timers: timers.stop().await,
        pings: pings.stop().await,
    }
}

/// Whether `delay` is beyond what this test can judge the lease on. A renewal is late by its
/// wake-up delay plus its round trip: one stall of both as long as the slack loses every lease
/// by itself, and the two at their 99th percentile above half of it leave too little for a
/// batched renewal of 1,000 keys, which the same load slows (leases would then be lost to the
/// machine, not to the lease's length).
fn too_busy(delay: &Delays) -> bool {
    delay.timers.max + delay.pings.max >= slack()
        || delay.timers.p99 + delay.pings.p99 > slack() / 2
}

backend_tests!(
    async fn a_thousand_minimum_leases_hold_for_five_leases(backend: Backend) {
        let c = backend.client();
        let before = probes(&backend).await;
        tokio::time::sleep(PROBE).await;
        let before = stop(before).await;
        assert!(
            !too_busy(&before),
            "this machine is too busy to judge MIN_WATCHDOG_TTL ({MIN_WATCHDOG_TTL:?}): {before}, \
             beyond the bound (a wake-up and a round trip of {:?}, or {:?} at p99) a renewal \
             can absorb; run it on a quieter machine",
            slack(),
            slack() / 2
        );
        // The delays are measured from the first acquisition (the first leases are renewed
        // while the others are taken) to the last release (the last lease is released a while
        // after the first).
        let probe = probes(&backend).await;
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
        let during = stop(probe).await;
        let blame = if too_busy(&during) {
            "the machine stalled meanwhile, beyond what a renewal can absorb"
        } else {
            "with timers and round trips on time: MIN_WATCHDOG_TTL is too short for this \
             machine, raise it"
        };
        assert!(
            tokens.iter().all(|t| t.is_cancelled()),
            "released: all tokens fire"
        );
        assert!(
            lost.is_empty(),
            "{} of {LOCKS} leases lost {blame}; from the first acquisition to the last \
             release {during}; before them {before} (slack {:?}); lost: {:?}",
            lost.len(),
            slack(),
            &lost[..lost.len().min(5)]
        );
        assert_eq!(
            not_held, 0,
            "leases gone from Redis before their release {blame}; from the first acquisition \
             to the last release {during}; before them {before}"
        );
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
