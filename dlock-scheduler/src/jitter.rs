//! Jitter that every replica agrees on: a delay derived from the job name and the occurrence.
//!
//! Jitter spreads the start of many jobs scheduled at the same instant (every `0 * * * *` job
//! of a fleet) so they do not hit Redis and downstream services at once. It must not break
//! "exactly once": all replicas have to wait the same amount for the same occurrence, so the
//! delay is a pure function of `(job name, occurrence)`, never random.
//!
//! The hash is written out here rather than taken from `std`: `DefaultHasher` is SipHash with
//! unspecified keys and may change between Rust releases, which would make replicas built with
//! different compilers disagree. The function below is fixed forever (tests pin golden values):
//!
//! 1. FNV-1a, 64-bit (offset basis `0xcbf29ce484222325`, prime `0x100000001b3`), over the UTF-8
//!    bytes of the job name followed by the occurrence's Unix time in milliseconds as an `i64`
//!    in big-endian byte order (a fixed-width suffix, so no two inputs share a byte string);
//! 2. the SplitMix64 finalizer (`z ^= z >> 30; z *= 0xbf58476d1ce4e5b9; z ^= z >> 27;
//!    z *= 0x94d049bb133111eb; z ^= z >> 31`, wrapping), because FNV's low bits mix poorly;
//! 3. Lemire's multiply-shift to map the 64-bit hash `h` onto `[0, max)` in nanoseconds:
//!    `(h as u128 * max_nanos as u128) >> 64`.
//!
//! Any language can reproduce it, e.g. for a dashboard that shows when a job will really start.

use std::time::Duration;

use chrono::{DateTime, Utc};

const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// The delay before starting `occurrence` of `job_name`: deterministic, and spread uniformly
/// over `[0, max)` at nanosecond resolution.
///
/// Every replica computes the same value for the same inputs, on every platform and Rust
/// version (the algorithm is specified in the module docs). Different occurrences of one job,
/// and different jobs at one instant, get independent-looking delays. A `max` of zero gives
/// zero; a `max` above `u64::MAX` nanoseconds (584 years) is treated as that.
///
/// `max` is the job's [`jitter`](crate::Job::jitter), shorter than its schedule's interval; the
/// scheduler widens its misfire grace by it, so a jittered start still counts as on time.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use chrono::{TimeZone, Utc};
/// use dlock_scheduler::jitter_for;
///
/// let noon = Utc.with_ymd_and_hms(2026, 6, 1, 12, 0, 0).unwrap();
/// let max = Duration::from_secs(30);
/// let delay = jitter_for("lottery", noon, max);
/// assert!(delay < max);
/// assert_eq!(delay, jitter_for("lottery", noon, max)); // same on every replica
/// assert_eq!(jitter_for("lottery", noon, Duration::ZERO), Duration::ZERO);
/// ```
#[must_use]
pub fn jitter_for(job_name: &str, occurrence: DateTime<Utc>, max: Duration) -> Duration {
    let max_nanos = u64::try_from(max.as_nanos()).unwrap_or(u64::MAX);
    let hash = occurrence_hash(job_name, occurrence);
    let scaled = (u128::from(hash) * u128::from(max_nanos)) >> 64;
    // scaled < max_nanos <= u64::MAX, so the conversion cannot fail.
    Duration::from_nanos(u64::try_from(scaled).unwrap_or(0))
}

/// Steps 1 and 2 of the module docs: a well-mixed 64-bit hash of (name, occurrence ms).
fn occurrence_hash(job_name: &str, occurrence: DateTime<Utc>) -> u64 {
    let millis = occurrence.timestamp_millis().to_be_bytes();
    let fnv = job_name
        .as_bytes()
        .iter()
        .chain(millis.iter())
        .fold(FNV_OFFSET_BASIS, |hash, byte| {
            (hash ^ u64::from(*byte)).wrapping_mul(FNV_PRIME)
        });
    splitmix64_finalize(fnv)
}

fn splitmix64_finalize(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use chrono::{TimeDelta, TimeZone};

    use super::*;

    fn noon() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 6, 1, 12, 0, 0).unwrap()
    }

    #[test]
    fn fnv1a_matches_the_published_test_vectors() {
        // From the FNV reference test suite (fnv-1a 64-bit).
        let fnv = |bytes: &[u8]| {
            bytes.iter().fold(FNV_OFFSET_BASIS, |hash, byte| {
                (hash ^ u64::from(*byte)).wrapping_mul(FNV_PRIME)
            })
        };
        assert_eq!(fnv(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn splitmix64_matches_the_reference_sequence() {
        // SplitMix64 seeded with 0: state += golden gamma, then the finalizer. The first
        // output of the reference implementation is 0xe220a8397b1dcdaf.
        assert_eq!(
            splitmix64_finalize(0x9e37_79b9_7f4a_7c15),
            0xe220_a839_7b1d_cdaf
        );
    }

    #[test]
    fn golden_values_never_change() {
        // If this test fails, replicas built from different versions would disagree on when
        // an occurrence starts. Do not update the numbers: fix the code.
        let max = Duration::from_secs(60);
        let golden = [
            ("lottery", noon(), GOLDEN_LOTTERY_NOON),
            (
                "lottery",
                noon() + TimeDelta::days(1),
                GOLDEN_LOTTERY_NEXT_DAY,
            ),
            ("report", noon(), GOLDEN_REPORT_NOON),
            ("", DateTime::<Utc>::UNIX_EPOCH, GOLDEN_EMPTY_EPOCH),
        ];
        for (name, occurrence, nanos) in golden {
            assert_eq!(
                jitter_for(name, occurrence, max),
                Duration::from_nanos(nanos),
                "{name} {occurrence}"
            );
        }
    }

    // Nanoseconds for max = 60 s. Cross-checked against an independent implementation of the
    // module-doc specification (a dozen lines of Python with 64-bit masking).
    const GOLDEN_LOTTERY_NOON: u64 = 3_563_368_087;
    const GOLDEN_LOTTERY_NEXT_DAY: u64 = 40_457_113_034;
    const GOLDEN_REPORT_NOON: u64 = 20_512_324_630;
    const GOLDEN_EMPTY_EPOCH: u64 = 30_292_058_428;

    #[test]
    fn stays_in_range() {
        for max in [
            Duration::from_nanos(1),
            Duration::from_nanos(7),
            Duration::from_millis(1),
            Duration::from_secs(3600),
            Duration::MAX,
        ] {
            for i in 0..1000 {
                let delay = jitter_for("job", noon() + TimeDelta::seconds(i), max);
                assert!(delay < max, "{delay:?} >= {max:?}");
            }
        }
        assert_eq!(
            jitter_for("job", noon(), Duration::from_nanos(1)),
            Duration::ZERO
        );
    }

    #[test]
    fn spreads_roughly_uniformly() {
        // 10 buckets over 20,000 consecutive occurrences: each should hold about 2,000.
        // Binomial sd ≈ 42; 300 is over 7 sd, so this only fails for a broken hash.
        let max = Duration::from_secs(10);
        let mut buckets = [0_u32; 10];
        for i in 0..20_000 {
            let delay = jitter_for("uniformity", noon() + TimeDelta::seconds(i), max);
            let bucket = usize::try_from(delay.as_secs()).unwrap();
            buckets[bucket] += 1;
        }
        for count in buckets {
            assert!((1_700..=2_300).contains(&count), "{buckets:?}");
        }
    }

    #[test]
    fn neighbouring_inputs_differ() {
        let max = Duration::from_secs(60);
        let base = jitter_for("job", noon(), max);
        assert_ne!(
            base,
            jitter_for("job", noon() + TimeDelta::milliseconds(1), max)
        );
        assert_ne!(base, jitter_for("jobs", noon(), max));
        assert_ne!(base, jitter_for("Job", noon(), max));
    }
}
