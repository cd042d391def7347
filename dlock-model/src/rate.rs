//! The rate limiter's script, rate.lua (one GCRA decision on the server's clock), as one
//! atomic step over the one key a limiter owns. The comments follow rate.lua's order.
//!
//! A limiter shares no key, lock or script with the locks, so its step has its own small
//! server ([`RateServer`]: the key's content and expiry) rather than a place in
//! [`Server`](crate::Server). Time is an integer of ticks: the checked model
//! ([`crate::rate_model`]) counts a handful, the conformance test counts microseconds (the
//! `now_us` each reply names) and keeps the emission interval whole.

/// Ticks: microseconds in the conformance test, small numbers in the checked model.
pub type Tick = u64;

/// A limiter's quota in ticks: `t` per cell, `burst` cells at once (so the tolerance tau is
/// `t * (burst - 1)`, as the client computes `ARGV[4]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Quota {
    /// The emission interval: ticks per cell (`ARGV[3]`), at least 1.
    pub t: Tick,
    /// Cells admitted at once from a full bucket, at least 1.
    pub burst: u64,
}

impl Quota {
    /// `ARGV[4]`: the burst tolerance, `t * (burst - 1)`.
    pub fn tau(self) -> Tick {
        self.t * self.burst.saturating_sub(1)
    }
}

/// `ARGV[1]` (and `ARGV[5]` for a reservation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RateMode {
    /// Admit now or refuse; nothing reserved.
    Try,
    /// Admit now, or at the returned wait if it is at most `max_wait` (the slot reserved).
    Reserve {
        /// `ARGV[5]`: the longest wait worth a reservation.
        max_wait: Tick,
    },
    /// Give `n` cells back (a reservation that was not used).
    Refund,
}

/// One call of rate.lua: `mode` for `n` cells (`ARGV[2]`, 1 ..= burst).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RateOp {
    /// What is asked.
    pub mode: RateMode,
    /// Cells asked for (or given back).
    pub n: u64,
}

/// What the limiter's key holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stored {
    /// `"1 <tat>"`, expiring at `expires` (the TAT rounded up to whole `PX` units).
    Limiter {
        /// The theoretical arrival time.
        tat: Tick,
        /// When Redis drops the key.
        expires: Tick,
    },
    /// `"<version> <…>"` of a newer dlock (version > 1).
    Newer {
        /// Its format version.
        version: u64,
    },
    /// Anything dlock did not write (another string, another type).
    Foreign,
}

/// rate.lua's reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RateReply {
    /// `{admitted, wait_us, now_us, remaining}`.
    Decision {
        /// 1 admitted (a reservation: at `now + wait`), 0 refused.
        admitted: bool,
        /// 0 when admitted now; else the ticks until the cells would conform.
        wait: Tick,
        /// The server time of the decision.
        now: Tick,
        /// Cells that would conform right after the decision.
        remaining: u64,
    },
    /// `DLOCKFOREIGN`: another program's data, nothing changed.
    Foreign,
    /// `DLOCKFOREIGN` naming a newer format `version`, nothing changed.
    Newer {
        /// The version found.
        version: u64,
    },
}

/// The protocol bugs of the rate limiter that the mutation check applies, one at a time; each
/// names the property of [`crate::rate_model`] that catches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RateMutant {
    /// The key is kept long after its TAT and the stored TAT is not raised to now: after an
    /// idle spell the bucket holds more than a burst. Caught by `no window admits more than
    /// rate x window + burst`.
    StaleTatKept,
    /// The tolerance is one cell too large (tau = t * burst): a full bucket admits burst + 1.
    /// Caught by `no window admits more than rate x window + burst`.
    ToleranceWholeBurst,
    /// A refund is not floored at now (tat - t * n): the reply counts more than a burst
    /// remaining. Caught by `a refund keeps the TAT at or after now`.
    RefundBelowNow,
    /// A reservation is made whatever its wait. Caught by `a reservation waits at most its
    /// max wait`.
    ReserveIgnoresMaxWait,
    /// The key expires halfway to its TAT: the bucket refills early. Caught by `no window
    /// admits more than rate x window + burst`.
    ExpiresEarly,
    /// A refused try advances the TAT as if admitted. Caught by `a refused try changes
    /// nothing`.
    RefusedTryStores,
    /// n cells are taken to conform one cell later (`tat + t * n - tau`): a full bucket refuses
    /// a burst. Caught by `a refilled bucket admits a try`.
    ConformsOneCellLate,
}

impl RateMutant {
    /// Every mutant.
    pub const ALL: [RateMutant; 7] = [
        RateMutant::StaleTatKept,
        RateMutant::ToleranceWholeBurst,
        RateMutant::RefundBelowNow,
        RateMutant::ReserveIgnoresMaxWait,
        RateMutant::ExpiresEarly,
        RateMutant::RefusedTryStores,
        RateMutant::ConformsOneCellLate,
    ];
}

/// The limiter's key on one Redis server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RateServer {
    /// The key's content; `None`: no key (a full bucket).
    pub key: Option<Stored>,
    /// Ticks per `PX` unit (1000 when ticks are microseconds: `PX` counts milliseconds).
    pub px_unit: Tick,
    /// The protocol bug applied, if any.
    pub mutant: Option<RateMutant>,
}

impl RateServer {
    /// An empty server whose `PX` counts `px_unit` ticks.
    pub fn new(px_unit: Tick, mutant: Option<RateMutant>) -> Self {
        Self {
            key: None,
            px_unit: px_unit.max(1),
            mutant,
        }
    }

    /// Redis dropping the key once its expiry is reached.
    pub fn expire(&mut self, now: Tick) {
        if let Some(Stored::Limiter { expires, .. }) = self.key
            && expires <= now
        {
            self.key = None;
        }
    }

    /// The TAT a decision at `now` starts from: the stored one raised to now, or now when no
    /// key is left (a full bucket). `None` for data rate.lua refuses.
    pub fn tat(&self, now: Tick) -> Option<Tick> {
        match self.key {
            None => Some(now),
            Some(Stored::Limiter { tat, .. }) => Some(tat.max(now)),
            Some(_) => None,
        }
    }

    fn is(&self, mutant: RateMutant) -> bool {
        self.mutant == Some(mutant)
    }

    /// `store(at)`: the TAT kept until it is reached, in whole `PX` units rounded up; no key
    /// when it is not after now.
    fn store(&mut self, now: Tick, at: Tick) {
        let mut left = at.saturating_sub(now);
        if self.is(RateMutant::ExpiresEarly) {
            left /= 2;
        }
        let units = left.div_ceil(self.px_unit);
        self.key = if units < 1 {
            None
        } else {
            let mut expires = now + units * self.px_unit;
            if self.is(RateMutant::StaleTatKept) {
                expires += 1_000 * self.px_unit;
            }
            Some(Stored::Limiter { tat: at, expires })
        };
    }
}

/// `remaining(at)`: the cells that conform at `now` with the TAT at `at` (at most the burst,
/// unless `at` is before now).
pub fn remaining(quota: Quota, tau: Tick, now: Tick, at: Tick) -> u64 {
    match (now + tau).checked_sub(at) {
        None => 0,
        Some(room) => room / quota.t + 1,
    }
}

/// rate.lua for `op` under `quota` at server time `now`.
pub fn rate(server: &mut RateServer, now: Tick, quota: Quota, op: RateOp) -> RateReply {
    server.expire(now);
    let RateOp { mode, n } = op;
    let t = quota.t;
    let tau = if server.is(RateMutant::ToleranceWholeBurst) {
        t * quota.burst
    } else {
        quota.tau()
    };
    // GET: another type, another string, a newer version: refused before any write.
    let tat = match server.key {
        None => now,
        Some(Stored::Limiter { tat, .. }) if server.is(RateMutant::StaleTatKept) => tat,
        Some(Stored::Limiter { tat, .. }) => tat.max(now),
        Some(Stored::Newer { version }) => return RateReply::Newer { version },
        Some(Stored::Foreign) => return RateReply::Foreign,
    };
    let decision = |admitted, wait, remaining| RateReply::Decision {
        admitted,
        wait,
        now,
        remaining,
    };
    if mode == RateMode::Refund {
        let back = if server.is(RateMutant::RefundBelowNow) {
            tat.saturating_sub(t * n)
        } else {
            tat.saturating_sub(t * n).max(now)
        };
        server.store(now, back);
        return decision(true, 0, remaining(quota, tau, now, back));
    }
    // wait = tat + t * (n - 1) - tau - now; conforming when it is not positive.
    let cells = if server.is(RateMutant::ConformsOneCellLate) {
        n
    } else {
        n.saturating_sub(1)
    };
    let due = tat + t * cells;
    let wait = due.saturating_sub(tau + now);
    let after = tat + t * n;
    if wait == 0 {
        server.store(now, after);
        return decision(true, 0, remaining(quota, tau, now, after));
    }
    if let RateMode::Reserve { max_wait } = mode
        && (wait <= max_wait || server.is(RateMutant::ReserveIgnoresMaxWait))
    {
        server.store(now, after);
        return decision(true, wait, 0);
    }
    if server.is(RateMutant::RefusedTryStores) {
        server.store(now, after);
    }
    decision(false, wait, remaining(quota, tau, now, tat))
}
