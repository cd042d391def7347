//! Pure figures of the scheduler scale stage (issue #31): the replicas' runs merged per
//! (schedule, occurrence) — fire delay, exactly once, per-replica share — the split of the
//! server's command time by Lua script from a `SLOWLOG` of every command, and a process's CPU
//! time from `/proc/<pid>/stat`.
//!
//! Nothing here talks to Redis or reads a clock; every figure is unit-tested below.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::sched_scale_replica::ScaleRun;
use crate::stats::{count, float, nearest_rank};

/// Fire delays of a window's runs (handler start − nominal instant), µs resolution.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Delays {
    pub(crate) samples: u64,
    /// Runs that started before their nominal instant (must be 0: the claim refuses early
    /// starts by the server's clock, which is this machine's).
    pub(crate) early: u64,
    pub(crate) p50_ms: f64,
    pub(crate) p99_ms: f64,
    pub(crate) max_ms: f64,
}

impl Delays {
    /// Nearest-rank p50 / p99 and the maximum of `delays_us`.
    pub(crate) fn of(mut delays_us: Vec<i64>) -> Self {
        delays_us.sort_unstable();
        let ms = |v: Option<i64>| v.map_or(f64::NAN, |us| us as f64 / 1e3);
        Self {
            samples: count(delays_us.len()),
            early: count(delays_us.iter().filter(|&&d| d < 0).count()),
            p50_ms: ms(nearest_rank(&delays_us, 50.0)),
            p99_ms: ms(nearest_rank(&delays_us, 99.0)),
            max_ms: ms(delays_us.last().copied()),
        }
    }
}

/// Every (schedule, occurrence) of a window, and how often it ran.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Once {
    /// Expected: schedules × seconds of the window.
    pub(crate) expected: u64,
    pub(crate) once: u64,
    /// Occurrences that did not run.
    pub(crate) missing: u64,
    /// Occurrences that ran more than once, and the runs beyond the first.
    pub(crate) duplicated: u64,
    pub(crate) extra_runs: u64,
    /// Runs in the window of a schedule index ≥ the number of schedules (0 expected).
    pub(crate) unknown: u64,
}

impl Once {
    /// Every run counts once for its (schedule, occurrence).
    pub(crate) fn exact(&self) -> bool {
        self.expected > 0 && self.once == self.expected && self.unknown == 0
    }
}

/// The runs of a window, merged over the replicas.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Merged {
    pub(crate) delays: Delays,
    pub(crate) once: Once,
    /// Runs in the window per replica id.
    pub(crate) share: BTreeMap<String, u64>,
}

/// Merges `replicas` (id, runs) over the window of occurrences `seconds` (Unix s) of schedules
/// `0 … jobs − 1`.
pub(crate) fn merge(replicas: &[(String, Vec<ScaleRun>)], jobs: u64, seconds: &[i64]) -> Merged {
    let (first, last) = match (seconds.first(), seconds.last()) {
        (Some(&a), Some(&b)) => (a, b),
        _ => return Merged::default(),
    };
    let mut runs: HashMap<(u32, i64), u64> = HashMap::new();
    let mut delays = Vec::new();
    let mut share = BTreeMap::new();
    let mut unknown = 0;
    for (id, replica_runs) in replicas {
        let in_window = replica_runs
            .iter()
            .filter(|(_, s, _)| (first..=last).contains(s));
        let mut mine = 0;
        for &(job, occurrence_s, delay_us) in in_window {
            mine += 1;
            if u64::from(job) >= jobs {
                unknown += 1;
                continue;
            }
            *runs.entry((job, occurrence_s)).or_insert(0) += 1;
            delays.push(delay_us);
        }
        share.insert(id.clone(), mine);
    }
    let mut once = Once {
        expected: jobs * count(seconds.len()),
        unknown,
        ..Once::default()
    };
    for job in 0..jobs {
        let Ok(job) = u32::try_from(job) else {
            continue;
        };
        for &s in seconds {
            match runs.get(&(job, s)).copied().unwrap_or(0) {
                0 => once.missing += 1,
                1 => once.once += 1,
                n => {
                    once.duplicated += 1;
                    once.extra_runs += n - 1;
                }
            }
        }
    }
    Merged {
        delays: Delays::of(delays),
        once,
        share,
    }
}

/// Calls and server time (µs) of one kind of command in a profile window.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Cost {
    pub(crate) calls: u64,
    pub(crate) usec: u64,
}

/// One `SLOWLOG` entry reduced to what the profile needs: its duration (µs), arguments (the
/// command name first; for `EVALSHA`, the script's SHA1 second) and client address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Logged {
    pub(crate) usec: u64,
    pub(crate) args: Vec<String>,
    pub(crate) client: String,
}

impl Logged {
    /// A command a script called (`redis.call`): Redis 7.0 logs it with the scripts' own
    /// client, whose address is `?:0`. Its time is part of its script's.
    pub(crate) fn in_script(&self) -> bool {
        self.client == LUA_CLIENT
    }
}

/// The address `SLOWLOG` gives the commands scripts call.
const LUA_CLIENT: &str = "?:0";

/// The commands of dlock-core's fenced acquire, sent plain in one `MULTI` … `EXEC` (`SET NX`,
/// `EXISTS` of the queue, `INCR` of the fence counter, `CLIENT GETNAME`; `EXEC` itself is not
/// logged). While the scheduler runs, nothing else sends them plain.
const ACQUIRE_TXN: [&str; 5] = ["multi", "set", "exists", "incr", "client"];
/// The name the profile gives them together.
pub(crate) const ACQUIRE_TXN_NAME: &str = "lock acquire (MULTI)";

/// The server time of a profile window by what the clients sent (`in_script` false) or by what
/// the scripts called (`in_script` true): `EVALSHA` by script (named by `names`: SHA1 → name;
/// an unknown SHA as `evalsha <first 8 hex>`), dlock-core's acquire transaction as one
/// ([`ACQUIRE_TXN_NAME`]), every other command by its name. Sorted by time, most first.
pub(crate) fn profile(
    entries: &[Logged],
    names: &HashMap<String, String>,
    in_script: bool,
) -> Vec<(String, Cost)> {
    let mut by: HashMap<String, Cost> = HashMap::new();
    for entry in entries.iter().filter(|e| e.in_script() == in_script) {
        let Some(command) = entry.args.first() else {
            continue;
        };
        let command = command.to_ascii_lowercase();
        let what = match (command.as_str(), entry.args.get(1)) {
            ("evalsha", Some(sha)) => {
                let sha = sha.to_ascii_lowercase();
                names.get(&sha).map_or_else(
                    || format!("evalsha {}", sha.get(..8).unwrap_or(&sha)),
                    Clone::clone,
                )
            }
            (name, _) if !in_script && ACQUIRE_TXN.contains(&name) => ACQUIRE_TXN_NAME.to_owned(),
            _ => command,
        };
        let cost = by.entry(what).or_default();
        cost.calls += 1;
        cost.usec += entry.usec;
    }
    let mut sorted: Vec<(String, Cost)> = by.into_iter().collect();
    sorted.sort_by(|a, b| b.1.usec.cmp(&a.1.usec).then_with(|| a.0.cmp(&b.0)));
    sorted
}

/// User + system CPU time (µs) from the text of `/proc/<pid>/stat`: fields 14 and 15, in
/// clock ticks of `ticks_per_s` (`USER_HZ`, 100 on Linux). The fields are counted after the
/// command name's closing parenthesis (the name may hold spaces).
pub(crate) fn proc_cpu_us(stat: &str, ticks_per_s: u64) -> Option<u64> {
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // After ')': field 3 (state) is index 0, so utime (14) is 11 and stime (15) is 12.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) * 1_000_000 / ticks_per_s.max(1))
}

/// `part` per `whole`, as a share in %.
pub(crate) fn share_pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        float(part) * 100.0 / float(whole)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_are_nearest_rank_in_ms_and_count_early_starts() {
        let d = Delays::of(vec![3_000, 1_000, 2_000, -5, 10_500]);
        assert_eq!((d.samples, d.early), (5, 1));
        assert!((d.p50_ms - 2.0).abs() < 1e-9);
        assert!((d.p99_ms - 10.5).abs() < 1e-9);
        assert!((d.max_ms - 10.5).abs() < 1e-9);
        assert!(Delays::of(Vec::new()).p50_ms.is_nan());
    }

    #[test]
    fn merge_counts_every_schedule_and_second() {
        // 2 schedules × seconds 10, 11: (0,10) once, (1,10) twice (r0 and r1), (0,11) missing,
        // (1,11) once; a run of second 9 (outside) and one of schedule 5 (unknown).
        let replicas = vec![
            (
                "r0".to_owned(),
                vec![(0, 10, 1_000), (1, 10, 2_000), (0, 9, 7)],
            ),
            (
                "r1".to_owned(),
                vec![(1, 10, 3_000), (1, 11, 4_000), (5, 11, 1)],
            ),
        ];
        let m = merge(&replicas, 2, &[10, 11]);
        assert_eq!(
            m.once,
            Once {
                expected: 4,
                once: 2,
                missing: 1,
                duplicated: 1,
                extra_runs: 1,
                unknown: 1,
            }
        );
        assert!(!m.once.exact());
        assert_eq!(m.share.get("r0"), Some(&2));
        assert_eq!(m.share.get("r1"), Some(&3));
        assert_eq!(m.delays.samples, 4);
        assert!((m.delays.max_ms - 4.0).abs() < 1e-9);
        let all = merge(&[("r0".to_owned(), vec![(0, 10, 5)])], 1, &[10]);
        assert!(all.once.exact());
        assert_eq!(merge(&replicas, 2, &[]), Merged::default());
    }

    fn logged(usec: u64, args: &[&str]) -> Logged {
        Logged {
            usec,
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            client: "127.0.0.1:4000".to_owned(),
        }
    }

    #[test]
    fn profile_names_scripts_by_sha_and_sorts_by_time() {
        let names: HashMap<String, String> = [("ab".repeat(20), "claim.lua".to_owned())].into();
        let claim = "AB".repeat(20);
        let entries = [
            logged(10, &["EVALSHA", &claim, "7"]),
            logged(30, &["evalsha", &claim, "7"]),
            logged(25, &["evalsha", "0123456789abcdef", "1"]),
            logged(2, &["GET", "k"]),
            logged(1, &["MULTI"]),
            logged(3, &["SET", "k", "v", "NX"]),
            logged(1, &[]),
            Logged {
                client: "?:0".to_owned(),
                ..logged(9, &["ZADD", "z", "1", "m"])
            },
        ];
        let p = profile(&entries, &names, false);
        let listed: Vec<&str> = p.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            listed,
            ["claim.lua", "evalsha 01234567", ACQUIRE_TXN_NAME, "get"]
        );
        assert_eq!(p[0].1, Cost { calls: 2, usec: 40 });
        assert_eq!(p[2].1, Cost { calls: 2, usec: 4 });
        let inner = profile(&entries, &names, true);
        assert_eq!(inner, [("zadd".to_owned(), Cost { calls: 1, usec: 9 })]);
    }

    #[test]
    fn proc_stat_cpu_counts_after_the_name() {
        let stat = "4242 (dlock bench) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3";
        assert_eq!(proc_cpu_us(stat, 100), Some(3_000_000));
        assert_eq!(proc_cpu_us("garbage", 100), None);
        assert!((share_pct(1, 4) - 25.0).abs() < 1e-9);
        assert!(share_pct(1, 0).abs() < 1e-9);
    }
}
