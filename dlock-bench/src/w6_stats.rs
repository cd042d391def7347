//! W6's figures, pure: what the lease read-outs and the counters of a held window say about
//! holding N locks under the watchdog. Nothing here talks to Redis or reads a clock (the
//! instants come in as arguments), so every figure the W6 table prints is unit-tested below.
//!
//! **How the renewals are seen without dlock-core's `metrics` feature.** A watchdog renewal
//! sent at `sent` sets `safe_until = sent + usable`, `usable = lease − drift` with dlock-core's
//! drift allowance `lease / 100 + 2 ms` (dlock-core `timing.rs`; [`usable`] repeats it, and W6
//! checks it on its first acquisition). Every lease of one renewal call — of one round — shares
//! `sent`. So two read-outs of a guard's `safe_until` one round apart give, exactly:
//! * the gap between its two renewals: `new − old` (the same `usable` cancels out);
//! * its **margin**: how much of the lease was certainly left when the renewal was sent,
//!   `old − sent = usable − (new − old)`: what dlock-core records as `dlock.renewal.margin`.
//!
//! Turning on `dlock-core/metrics` in dlock-bench would give the same histogram, but features
//! are per package: every workload of this binary would then measure a dlock that formats a
//! label `String` and reads the clock on each acquire, and W1/W2 would no longer measure the
//! default build.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::redis_stats::WindowDelta;
use crate::stats::{float, nearest_rank, ratio};

/// What a lease certainly lasts after the request that set it was sent: the lease less
/// dlock-core's clock-drift allowance (`lease / 100 + 2 ms`, dlock-core `timing::drift`).
pub(crate) fn usable(ttl: Duration) -> Duration {
    ttl.saturating_sub(ttl / 100 + Duration::from_millis(2))
}

/// A renewal is *late* when it was sent more than this many renewal intervals after the
/// lease's previous renewal. The watchdog plans each renewal one interval after the previous
/// was planned, then sleeps (timer granularity: 1 ms) and scans its leases before it sends:
/// a few ms late is its normal; a tenth of an interval late means it could not keep up (its
/// previous round still ran, or the runtime was busy).
pub(crate) const LATE_FACTOR: f64 = 1.1;

/// What one read-out of every lease's `safe_until`, compared with the previous one (a round
/// earlier), shows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Compared {
    /// Leases whose `safe_until` moved: renewed since the previous read-out.
    pub(crate) renewed: u64,
    /// Leases whose `safe_until` did not move (not renewed in this round, or lost).
    pub(crate) not_renewed: u64,
    /// Renewed leases whose renewal came more than [`LATE_FACTOR`] intervals after the
    /// previous one.
    pub(crate) late: u64,
    /// The longest gap between two renewals of one lease, ns.
    pub(crate) max_gap_ns: u64,
    /// Distinct send instants among the renewed leases: the renewal rounds (groups of leases
    /// renewed together) this read-out saw; 1 once every lease shares one schedule.
    pub(crate) cohorts: u64,
}

/// Compares read-out `now` with `before` (same leases, same order) for leases of usable length
/// `usable` renewed every `interval`; pushes each renewal's margin (µs; negative: the renewal
/// went out after the lease could have run out) onto `margins_us`.
pub(crate) fn compare(
    before: &[Instant],
    now: &[Instant],
    usable: Duration,
    interval: Duration,
    margins_us: &mut Vec<i64>,
) -> Compared {
    let mut out = Compared::default();
    let late_after = interval.mul_f64(LATE_FACTOR);
    let mut sends: Vec<Instant> = Vec::new();
    for (&old, &new) in before.iter().zip(now) {
        if new <= old {
            out.not_renewed += 1;
            continue;
        }
        out.renewed += 1;
        let gap = new - old;
        out.max_gap_ns = out.max_gap_ns.max(nanos(gap));
        if gap > late_after {
            out.late += 1;
        }
        margins_us.push(signed_us(usable, gap));
        sends.push(new);
    }
    sends.sort_unstable();
    sends.dedup();
    out.cohorts = u64::try_from(sends.len()).unwrap_or(u64::MAX);
    out
}

/// `a − b` in µs, signed.
fn signed_us(a: Duration, b: Duration) -> i64 {
    let us = |d: Duration| i64::try_from(d.as_micros()).unwrap_or(i64::MAX);
    us(a) - us(b)
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// How long one renewal round took, from its send to its replies applied, as seen on the
/// sampled leases: for each, the poll that first saw its `safe_until` move (`seen`) less its
/// send instant (`new − usable`); the longest of them. `None` when no sampled lease moved.
///
/// The watchdog applies a round's replies only once every call of the round has answered
/// (`join_all`), so the moment one lease of the round moves is the end of the whole round
/// (within one poll period).
pub(crate) fn round_duration(
    seen: &[Option<Instant>],
    new: &[Instant],
    usable: Duration,
) -> Option<Duration> {
    seen.iter()
        .zip(new)
        .filter_map(|(seen, &new)| {
            let sent = new.checked_sub(usable)?;
            Some(seen.as_ref()?.saturating_duration_since(sent))
        })
        .max()
}

/// Totals of the read-outs of a held window.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Totals {
    pub(crate) renewed: u64,
    pub(crate) not_renewed: u64,
    pub(crate) late: u64,
    pub(crate) max_gap_ns: u64,
    /// The largest cohort count of any read-out.
    pub(crate) max_cohorts: u64,
}

impl Totals {
    /// Adds one read-out.
    pub(crate) fn add(&mut self, c: &Compared) {
        self.renewed += c.renewed;
        self.not_renewed += c.not_renewed;
        self.late += c.late;
        self.max_gap_ns = self.max_gap_ns.max(c.max_gap_ns);
        self.max_cohorts = self.max_cohorts.max(c.cohorts);
    }
}

/// The margins of a window's renewals, summarised (ms).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Margins {
    /// The renewal margin p99: 99 % of the renewals went out with at least this much of the
    /// lease left (the 1st percentile of the margins: the low tail is the risk).
    pub(crate) p99_ms: f64,
    pub(crate) p50_ms: f64,
    pub(crate) min_ms: f64,
}

impl Margins {
    /// Summarises `margins_us` (sorted in place); NaN when there are none.
    pub(crate) fn of(margins_us: &mut [i64]) -> Margins {
        margins_us.sort_unstable();
        #[allow(clippy::cast_precision_loss)] // margins are far below 2^53 µs
        let at = |p: f64| nearest_rank(margins_us, p).map_or(f64::NAN, |us| us as f64 / 1e3);
        Margins {
            p99_ms: at(1.0),
            p50_ms: at(50.0),
            #[allow(clippy::cast_precision_loss)]
            min_ms: margins_us.first().map_or(f64::NAN, |&us| us as f64 / 1e3),
        }
    }
}

/// Round durations, summarised.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Rounds {
    pub(crate) p50_ms: f64,
    pub(crate) max_ms: f64,
    /// Rounds that took longer than the renewal interval: the next round was due before this
    /// one had its answers.
    pub(crate) overran: u64,
}

impl Rounds {
    /// Summarises the durations (ns) of a window's rounds (sorted in place).
    pub(crate) fn of(durations_ns: &mut [u64], interval: Duration) -> Rounds {
        durations_ns.sort_unstable();
        let ms = |ns: u64| float(ns) / 1e6;
        Rounds {
            p50_ms: nearest_rank(durations_ns, 50.0).map_or(f64::NAN, ms),
            max_ms: durations_ns.last().map_or(f64::NAN, |&ns| ms(ns)),
            overran: u64::try_from(
                durations_ns
                    .iter()
                    .filter(|&&ns| ns > nanos(interval))
                    .count(),
            )
            .unwrap_or(u64::MAX),
        }
    }
}

/// What the held window cost, from its counters (pure, unit-tested).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Cost {
    /// `evalsha` calls per round: the client's round trips per renewal interval.
    pub(crate) calls_per_round: f64,
    /// Leases renewed per call (`pexpire` ÷ `evalsha`).
    pub(crate) locks_per_call: f64,
    /// `pexpire` ÷ (locks × rounds): 1.00 when every lease is renewed once per round.
    pub(crate) renewals_per_lock_per_round: f64,
    /// The measured renewal period: window ÷ rounds, s.
    pub(crate) period_s: f64,
    /// The client's CPU over the window, less the probe's own (its read-outs and polls), in %
    /// of one core.
    pub(crate) client_cpu_pct: f64,
    /// redis-server's CPU over the window less its idle CPU (measured before, same length), in
    /// % of one core.
    pub(crate) server_cpu_pct: f64,
    /// The client's CPU per lease renewed (probe's own excluded), µs.
    pub(crate) client_us_per_renewal: f64,
    /// redis-server's CPU per lease renewed (idle excluded), µs.
    pub(crate) server_us_per_renewal: f64,
}

impl Cost {
    /// The cost of a window of `window_ns` holding `rounds` rounds over `locks` leases, with
    /// the probe's own CPU `probe_cpu_us` and redis-server's idle CPU `idle_ms_per_s`.
    pub(crate) fn compute(
        locks: u64,
        rounds: u32,
        window_ns: u64,
        delta: &WindowDelta,
        probe_cpu_us: u64,
        idle_ms_per_s: f64,
    ) -> Cost {
        let calls = delta.commands.get("evalsha");
        let renewals = delta.commands.get("pexpire");
        let rounds = u64::from(rounds);
        let window_us = float(window_ns) / 1e3;
        let client_us = float(delta.client_cpu_us.saturating_sub(probe_cpu_us));
        let server_us = float(delta.server_cpu_us) - idle_ms_per_s * window_us / 1e3;
        Cost {
            calls_per_round: ratio(calls, rounds),
            locks_per_call: ratio(renewals, calls),
            renewals_per_lock_per_round: ratio(renewals, locks.saturating_mul(rounds)),
            period_s: ratio(window_ns, rounds) / 1e9,
            client_cpu_pct: client_us / window_us * 100.0,
            server_cpu_pct: server_us / window_us * 100.0,
            client_us_per_renewal: client_us / float(renewals),
            server_us_per_renewal: server_us / float(renewals),
        }
    }
}

/// Renewals per held lock and renewal interval over an acquisition phase whose tenths (each
/// taking a tenth of the `n` locks) lasted `tenths_ns`: `renewals` ÷ (lock-seconds held ÷
/// interval), counting the locks held during tenth k as (k + ½)·n/10 on average.
pub(crate) fn renewals_per_lock_per_interval(
    renewals: u64,
    tenths_ns: &[u64],
    n: u64,
    interval: Duration,
) -> f64 {
    let tenth = float(n) / 10.0;
    let lock_ns: f64 = (0..)
        .zip(tenths_ns)
        .map(|(k, &ns)| (f64::from(k) + 0.5) * tenth * float(ns))
        .sum();
    float(renewals) / (lock_ns / float(nanos(interval)))
}

/// Growth from `before` to `after` per one of `n` items (0 when it shrank).
pub(crate) fn per_item(before: i64, after: i64, n: u64) -> f64 {
    ratio(u64::try_from(after - before).unwrap_or(0), n)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn usable_is_the_lease_less_drift() {
        assert_eq!(usable(Duration::from_secs(3)), 2_968 * MS);
        assert_eq!(usable(Duration::from_secs(30)), 29_698 * MS);
        assert_eq!(usable(MS), Duration::ZERO);
    }

    #[test]
    fn comparing_read_outs() {
        let t = Instant::now();
        let (usable, interval) = (2_968 * MS, 1_000 * MS);
        // Lease 0: renewed 1,005 ms after its previous renewal (margin 1,963 ms); lease 1:
        // same round (same send); lease 2: not renewed; lease 3: 1,200 ms apart (late), in a
        // second round.
        let before = [t, t, t, t];
        let now = [t + 1_005 * MS, t + 1_005 * MS, t, t + 1_200 * MS];
        let mut margins = Vec::new();
        let c = compare(&before, &now, usable, interval, &mut margins);
        assert_eq!(
            c,
            Compared {
                renewed: 3,
                not_renewed: 1,
                late: 1,
                max_gap_ns: 1_200_000_000,
                cohorts: 2,
            }
        );
        assert_eq!(margins, [1_963_000, 1_963_000, 1_768_000]);
        // A renewal sent after the lease could have run out: a negative margin.
        let mut margins = Vec::new();
        compare(&[t], &[t + 3_000 * MS], usable, interval, &mut margins);
        assert_eq!(margins, [-32_000]);
        let mut totals = Totals::default();
        totals.add(&c);
        totals.add(&c);
        assert_eq!((totals.renewed, totals.late, totals.max_cohorts), (6, 2, 2));
        assert_eq!(totals.max_gap_ns, 1_200_000_000);
    }

    #[test]
    fn round_duration_is_the_longest_send_to_seen() {
        let t = Instant::now();
        let usable = 2_968 * MS;
        // Both sent at t; seen 40 and 42 ms later; the third never seen.
        let new = [t + usable, t + usable, t + usable];
        let seen = [Some(t + 40 * MS), Some(t + 42 * MS), None];
        assert_eq!(round_duration(&seen, &new, usable), Some(42 * MS));
        assert_eq!(round_duration(&[None], &new, usable), None);
    }

    #[test]
    fn margins_and_rounds_summarised() {
        let mut margins: Vec<i64> = (1..=200).rev().map(|ms| ms * 1_000).collect();
        let m = Margins::of(&mut margins);
        assert!((m.p99_ms - 2.0).abs() < 1e-9, "{m:?}");
        assert!((m.p50_ms - 100.0).abs() < 1e-9);
        assert!((m.min_ms - 1.0).abs() < 1e-9);
        assert!(Margins::of(&mut []).p99_ms.is_nan());
        let mut durations = vec![30_000_000, 1_200_000_000, 20_000_000];
        let r = Rounds::of(&mut durations, 1_000 * MS);
        assert_eq!(r.overran, 1);
        assert!((r.p50_ms - 30.0).abs() < 1e-9 && (r.max_ms - 1_200.0).abs() < 1e-9);
    }

    #[test]
    fn renewals_while_acquiring() {
        // 1,000 locks in 10 tenths of 1 s each: 5,000 lock-seconds held; interval 1 s.
        let tenths = [1_000_000_000; 10];
        let r = renewals_per_lock_per_interval(10_000, &tenths, 1_000, 1_000 * MS);
        assert!((r - 2.0).abs() < 1e-9, "{r}");
        assert!(renewals_per_lock_per_interval(0, &[], 0, MS).is_nan());
    }

    #[test]
    fn cost_of_a_window() {
        let mut delta = WindowDelta {
            server_cpu_us: 160_000,
            client_cpu_us: 110_000,
            ..WindowDelta::default()
        };
        // 15 rounds of 10,000 locks, 100 per call, in 15 s; the probe spent 10 ms; redis idles
        // at 2 ms/s.
        delta.commands.0.insert("evalsha".into(), 1_500);
        delta.commands.0.insert("pexpire".into(), 150_000);
        let c = Cost::compute(10_000, 15, 15_000_000_000, &delta, 10_000, 2.0);
        assert!((c.calls_per_round - 100.0).abs() < 1e-9);
        assert!((c.locks_per_call - 100.0).abs() < 1e-9);
        assert!((c.renewals_per_lock_per_round - 1.0).abs() < 1e-9);
        assert!((c.period_s - 1.0).abs() < 1e-9);
        // (110 − 10) ms in 15 s; (160 − 30) ms in 15 s.
        assert!((c.client_cpu_pct - 100.0 / 150.0).abs() < 1e-9, "{c:?}");
        assert!((c.server_cpu_pct - 130.0 / 150.0).abs() < 1e-9);
        assert!((c.client_us_per_renewal - 100_000.0 / 150_000.0).abs() < 1e-9);
        assert!((c.server_us_per_renewal - 130_000.0 / 150_000.0).abs() < 1e-9);
        assert!((per_item(1_000, 5_000, 10) - 400.0).abs() < 1e-9);
        assert!(per_item(5_000, 1_000, 10).abs() < 1e-9);
    }
}
