//! Protocol bugs in the scheduler's scripts, one at a time, for the mutation check (`make
//! model-mutants`: they join the lock scripts' in `lua mutants: caught N of M`). Each is a text
//! substitution in a script's assembled text (`../mutants.rs` applies it), and each must be
//! caught by the scheduler's walks (`attempts.rs`, `schedules.rs`).

use crate::mutants::Mutant;

/// Every scheduler mutant.
pub(crate) const ALL: &[Mutant] = &[
    Mutant {
        name: "sched-lapse-never-settled",
        what: "take_retry.lua takes a lapsed attempt (no end, or running) for a final run: a \
               killed replica's run is dropped, never retried",
        swaps: &[("if e[2] == 'running' then", "if false then")],
    },
    Mutant {
        name: "sched-finish-without-token",
        what: "finish.lua records an end for whichever attempt asks: a superseded attempt ends \
               its successor's run",
        swaps: &[(
            "if c[1] ~= '1' or c[7] ~= ARGV[2] then\n  return {0}\nend",
            "if c[1] ~= '1' then\n  return {0}\nend",
        )],
    },
    Mutant {
        name: "sched-unbounded-attempts",
        what: "finish.lua schedules another attempt whatever the attempts left",
        swaps: &[(
            "if ARGV[6] ~= '' and attempt < tonumber(ARGV[7]) then",
            "if ARGV[6] ~= '' then",
        )],
    },
    Mutant {
        name: "sched-renew-after-end",
        what: "renew_attempt.lua renews an attempt that has ended or was found abandoned",
        swaps: &[(
            "if current and fields(current)[2] ~= 'running' then",
            "if false then",
        )],
    },
    Mutant {
        name: "sched-archive-attempt-zero",
        what: "take_retry.lua keeps a one-off job's attempt 0 (which never ran) as an earlier \
               attempt",
        swaps: &[(
            "if attempt > 0 then\n  archive_attempt",
            "if attempt >= 0 then\n  archive_attempt",
        )],
    },
    Mutant {
        name: "sched-claim-without-lease",
        what: "open_run (common.lua) starts no attempt lease under at-least-once delivery: a \
               claimed run whose replica dies is never retried",
        swaps: &[(
            "  if lease_ms > 0 then\n    redis.call('ZADD', retries",
            "  if false then\n    redis.call('ZADD', retries",
        )],
    },
    Mutant {
        name: "sched-schedule-same-record-moves",
        what: "schedule.lua moves the revision and wakes the replicas for a record already \
               stored (a retried call)",
        swaps: &[(
            "if (ARGV[2] == '' and not old) or old == ARGV[2] then",
            "if ARGV[2] == '' and not old then",
        )],
    },
    Mutant {
        name: "sched-schedule-revision-stays",
        what: "schedule.lua changes the record without moving the revision: replicas that poll \
               never see the change",
        swaps: &[(
            "local rev = redis.call('INCR', KEYS[2])",
            "local rev = tonumber(redis.call('GET', KEYS[2]) or '0')",
        )],
    },
    Mutant {
        name: "sched-once-due-now",
        what: "once.lua makes a delayed one-off job due at once",
        swaps: &[("local due = now + tonumber(ARGV[4])", "local due = now")],
    },
    Mutant {
        name: "sched-abandoned-no-backoff",
        what: "take_retry.lua retries an abandoned attempt at once, without the backoff",
        swaps: &[(
            "local next_at = now + backoff(tonumber(ARGV[7]), attempt)",
            "local next_at = now",
        )],
    },
    Mutant {
        name: "sched-retry-without-lease",
        what: "take_retry.lua claims the next attempt with its lease already lapsed: the next \
               call takes it for abandoned",
        swaps: &[(
            "redis.call('ZADD', KEYS[4], int(now + tonumber(ARGV[5])), id)",
            "redis.call('ZADD', KEYS[4], int(now), id)",
        )],
    },
];
