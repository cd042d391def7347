//! The fixed job walks: the hard states the random calls reach seldom, each checked call by
//! call against the model like any walk (`job.rs`). Occurrence `k` falls at tick `k` + ¼ and
//! fires at `k` + ¼ (jitter 0) or `k` + ½ (jitter 1); a grace of 1 is one tick; a replica
//! is live two ticks after its last heartbeat or claim.

use super::Op::{self, *};

/// Claim `occ` by replica `r`, at most once, with `jitter` and `grace`.
const fn c(r: u8, occ: u8, jitter: u8, grace: u8) -> Op {
    Claim {
        r,
        occ,
        jitter,
        grace,
        lease: false,
        offset: 0,
    }
}

const fn hb(r: u8) -> Op {
    Heartbeat {
        r,
        leave: false,
        retries: true,
    }
}

/// Every fixed walk, named.
pub(super) const ALL: &[(&str, &[Op])] = &[
    (
        // The turn holder (r0) stops beating: while it is live the others wait out its grace;
        // once it is not, the turn goes to the next live replica at once (nothing waits
        // behind a replica that died), and an occurrence nobody took in its grace goes to
        // whoever asks.
        "a turn holder that died",
        &[
            Tick,
            hb(0),
            hb(1),
            hb(2),
            Tick,
            c(1, 1, 0, 1),
            hb(1),
            hb(2),
            Tick,
            c(2, 2, 0, 1),
            c(1, 2, 0, 1),
            c(2, 1, 0, 1),
            c(0, 1, 0, 1),
        ],
    ),
    (
        // Too early, then inside another replica's grace, then past it; then a late replica
        // after the claim retention still finds the run claimed (the ledger remembers it).
        "a misfire window crossed",
        &[
            hb(0),
            hb(1),
            c(1, 1, 1, 1),
            Tick,
            hb(0),
            hb(1),
            c(1, 1, 1, 1),
            Tick,
            c(1, 1, 1, 1),
            Tick,
            c(1, 1, 1, 1),
            c(0, 1, 1, 1),
            Tick,
            Tick,
            Tick,
            Tick,
            c(0, 3, 0, 0),
            c(2, 1, 1, 1),
        ],
    ),
    (
        // A request's run is withdrawn (its claim's reply was lost) before it starts: only by
        // its own token, and the request is back at the head; once its run has started, the
        // withdrawal changes nothing. Paused, requests wait; resuming wakes the replicas.
        "a request withdrawn while its run starts",
        &[
            Request,
            TakeRequest {
                r: 0,
                again: false,
                lease: false,
            },
            Withdraw {
                pick: 0,
                right: false,
            },
            Withdraw {
                pick: 0,
                right: true,
            },
            TakeRequest {
                r: 1,
                again: false,
                lease: true,
            },
            Start { pick: 0 },
            Withdraw {
                pick: 0,
                right: true,
            },
            Pause,
            Request,
            TakeRequest {
                r: 1,
                again: false,
                lease: false,
            },
            c(0, 1, 0, 0),
            Resume,
            TakeRequest {
                r: 1,
                again: true,
                lease: false,
            },
            TakeRequest {
                r: 2,
                again: false,
                lease: false,
            },
            Tick,
            Tick,
            Request,
        ],
    ),
    (
        // One-off jobs: an idempotency key used again, a run id taken, a cancel before the
        // start and a second one, and the ledger trimmed past a pending run.
        "one-off jobs enqueued, cancelled and trimmed",
        &[
            Once {
                key: 1,
                again: false,
                past: false,
                delay: 1,
                mode: 0,
            },
            Once {
                key: 1,
                again: false,
                past: true,
                delay: 0,
                mode: 0,
            },
            Once {
                key: 0,
                again: false,
                past: true,
                delay: 0,
                mode: 0,
            },
            Once {
                key: 0,
                again: true,
                past: false,
                delay: 0,
                mode: 0,
            },
            OnceCancel { pick: 0 },
            OnceCancel { pick: 0 },
            OnceTrim { keep: 0, look: 1 },
            OnceTrim { keep: 0, look: 0 },
            OnceTrim { keep: 3, look: 2 },
            Register { i: 0, leave: false },
            Register { i: 1, leave: false },
            Register { i: 0, leave: true },
            Tick,
            Tick,
            Tick,
            Tick,
            Register { i: 0, leave: false },
        ],
    ),
    (
        // Debounce and replace of a keyed one-off (issue #51): a debounce moves the due time
        // later, then is capped by the first call plus the max wait; a replace changes the
        // arguments alone (and the trace context: none, then another); once cancelled (no
        // longer pending) both change nothing; a trimmed run's key (only its claim left)
        // refuses them too, and the trim takes the trace record with the run.
        "one-offs debounced and replaced",
        &[
            once(1, 0, 5),
            Tick,
            once(1, 1, 1),
            once(1, 2, 1),
            once(1, 0, 2),
            once(1, 2, 7),
            once(2, 0, 3),
            OnceCancel { pick: 0 },
            once(2, 1, 1),
            once(2, 1, 2),
            OnceTrim { keep: 0, look: 0 },
            once(2, 1, 3),
        ],
    ),
];

/// once.lua with idempotency key `key`, due after `delay` ticks, in `mode` (see `Op::Once`).
const fn once(key: u8, delay: u8, mode: u8) -> Op {
    Once {
        key,
        again: false,
        past: false,
        delay,
        mode,
    }
}
