//! The rate limiter's step (rate.lua), one scenario per rule of its contract, driven as the
//! conformance test drives it; and the checked model at `unit_rate`: every property holds and
//! every `sometimes` is reached (prints the states explored).

// A test helper fails by panicking, and prints the counts on purpose.
#![allow(clippy::panic, clippy::print_stderr)]

use std::io::Write;
use std::time::Instant;

use dlock_model::rate::{Quota, RateMode, RateOp, RateReply, RateServer, Stored, rate};
use dlock_model::rate_model::{self, bounds};
use stateright::{Checker, Model};

/// t = 10 ticks a cell, burst 3 (tau 20).
const Q: Quota = Quota { t: 10, burst: 3 };

fn op(mode: RateMode, n: u64) -> RateOp {
    RateOp { mode, n }
}

fn decision(admitted: bool, wait: u64, now: u64, remaining: u64) -> RateReply {
    RateReply::Decision {
        admitted,
        wait,
        now,
        remaining,
    }
}

fn tat(server: &RateServer) -> Option<u64> {
    match server.key {
        Some(Stored::Limiter { tat, .. }) => Some(tat),
        _ => None,
    }
}

#[test]
fn a_full_bucket_admits_a_burst_then_limits() {
    let mut s = RateServer::new(1, None);
    let try1 = op(RateMode::Try, 1);
    assert_eq!(rate(&mut s, 100, Q, try1), decision(true, 0, 100, 2));
    assert_eq!(tat(&s), Some(110));
    assert_eq!(rate(&mut s, 100, Q, try1), decision(true, 0, 100, 1));
    assert_eq!(rate(&mut s, 100, Q, try1), decision(true, 0, 100, 0));
    let before = s;
    // tat 130: conforms at 130 - 20 = 110.
    assert_eq!(rate(&mut s, 100, Q, try1), decision(false, 10, 100, 0));
    assert_eq!(s, before, "a refused try changes nothing");
    assert_eq!(rate(&mut s, 110, Q, try1), decision(true, 0, 110, 0));
}

#[test]
fn n_cells_conform_when_the_last_of_them_does() {
    let mut s = RateServer::new(1, None);
    assert_eq!(
        rate(&mut s, 0, Q, op(RateMode::Try, 2)),
        decision(true, 0, 0, 1)
    );
    // tat 20: 2 cells conform at 20 + 10 - 20 = 10.
    assert_eq!(
        rate(&mut s, 5, Q, op(RateMode::Try, 2)),
        decision(false, 5, 5, 1)
    );
    assert_eq!(
        rate(&mut s, 10, Q, op(RateMode::Try, 2)),
        decision(true, 0, 10, 0)
    );
}

#[test]
fn a_reservation_waits_within_its_max_and_a_refund_gives_it_back() {
    let mut s = RateServer::new(1, None);
    rate(&mut s, 0, Q, op(RateMode::Try, 3));
    assert_eq!(tat(&s), Some(30));
    let reserve = |max_wait| op(RateMode::Reserve { max_wait }, 1);
    assert_eq!(rate(&mut s, 0, Q, reserve(5)), decision(false, 10, 0, 0));
    assert_eq!(tat(&s), Some(30), "a refused reservation reserves nothing");
    assert_eq!(rate(&mut s, 0, Q, reserve(10)), decision(true, 10, 0, 0));
    assert_eq!(tat(&s), Some(40));
    assert_eq!(
        rate(&mut s, 2, Q, op(RateMode::Refund, 1)),
        decision(true, 0, 2, 0)
    );
    assert_eq!(tat(&s), Some(30));
}

#[test]
fn a_refund_never_moves_the_tat_below_now() {
    let mut s = RateServer::new(1, None);
    rate(&mut s, 0, Q, op(RateMode::Try, 1));
    assert_eq!(
        rate(&mut s, 4, Q, op(RateMode::Refund, 3)),
        decision(true, 0, 4, 3)
    );
    assert_eq!(s.key, None, "the TAT at now: a full bucket, no key");
}

#[test]
fn the_key_expires_at_its_tat_in_whole_px_units() {
    // Microseconds, PX in milliseconds: the expiry rounds up.
    let q = Quota { t: 1_500, burst: 1 };
    let mut s = RateServer::new(1_000, None);
    rate(&mut s, 10_000_100, q, op(RateMode::Try, 1));
    assert_eq!(
        s.key,
        Some(Stored::Limiter {
            tat: 10_001_600,
            expires: 10_002_100
        })
    );
    s.expire(10_002_100);
    assert_eq!(s.key, None);
}

#[test]
fn foreign_data_and_a_newer_version_are_refused_unchanged() {
    for (stored, reply) in [
        (Stored::Foreign, RateReply::Foreign),
        (
            Stored::Newer { version: 2 },
            RateReply::Newer { version: 2 },
        ),
    ] {
        for mode in [
            RateMode::Try,
            RateMode::Reserve { max_wait: 100 },
            RateMode::Refund,
        ] {
            let mut s = RateServer::new(1, None);
            s.key = Some(stored);
            assert_eq!(rate(&mut s, 0, Q, op(mode, 1)), reply);
            assert_eq!(s.key, Some(stored));
        }
    }
}

#[test]
fn unit_rate_model() {
    let model = bounds::unit_rate();
    let started = Instant::now();
    let checker = model.checker().threads(2).spawn_bfs().join();
    let _ = writeln!(
        std::io::stderr(),
        "model rate: {} states ({} unique), depth {}, {:.1?}",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        started.elapsed()
    );
    if let Err(why) = rate_model::verdict(&checker) {
        panic!("{why}");
    }
    if let Err(why) = dlock_model::counts::compare("unit rate", checker.unique_state_count()) {
        panic!("{why}");
    }
}
