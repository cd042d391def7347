//! Protocol bugs in the scheduler's scripts, one at a time, for the mutation check (`make
//! model-mutants`: they join the lock scripts' in `lua mutants: caught N of M`). Each is a text
//! substitution in a script's assembled text (`../mutants.rs` applies it), and each must be
//! caught by the scheduler's walks (`attempts.rs`, `schedules.rs`).

use crate::mutants::Mutant;

/// Every scheduler mutant.
pub(crate) const ALL: &[Mutant] = &[
    Mutant {
        name: "sched-once-trace-dropped",
        what: "once.lua stores no trace context with a new one-off job: its run cannot link to \
               the submitter's trace",
        swaps: &[(
            "  redis.call('HSET', KEYS[3], id .. ':trace', '1\\31' .. ARGV[15])\nend\nannounce",
            "end\nannounce",
        )],
    },
    Mutant {
        name: "sched-once-key-dropped",
        what: "once.lua stores no idempotency key with a new keyed one-off job: operators see \
               only its hash",
        swaps: &[(
            "  redis.call('HSET', KEYS[3], id .. ':key', '1\\31' .. ARGV[2])\n",
            "",
        )],
    },
    Mutant {
        name: "sched-once-trim-leaves-key",
        what: "once_trim.lua leaves a trimmed keyed run's key record behind",
        swaps: &[("id .. ':trace', id .. ':key')", "id .. ':trace')")],
    },
    Mutant {
        name: "sched-claim-ignores-offset",
        what: "claim.lua picks whose turn it is without the job's turn offset: every job of a \
               group due at one instant goes to the same replica",
        swaps: &[(
            "redis.call('GET', KEYS[6]) or '0') + (tonumber(ARGV[13] or '') or 0)",
            "redis.call('GET', KEYS[6]) or '0')",
        )],
    },
    Mutant {
        name: "sched-once-update-not-pending",
        what: "once.lua debounces or replaces a keyed run that is no longer pending (claimed, \
               running, ended or cancelled)",
        swaps: &[(
            "if c[8] ~= '0' or e[2] ~= 'scheduled' then\n      return {4, id, due, now}",
            "if false then\n      return {4, id, due, now}",
        )],
    },
    Mutant {
        name: "sched-once-debounce-uncapped",
        what: "once.lua's debounce of a pending run ignores the max wait from the first call",
        swaps: &[(
            "due = math.min(requested, tonumber(c[5]) + max_wait)",
            "due = requested",
        )],
    },
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
        swaps: &[(
            "local requested = now + tonumber(ARGV[4])",
            "local requested = now",
        )],
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
    Mutant {
        name: "sched-claim-ignores-turn",
        what: "claim.lua lets any replica claim inside the turn holder's grace",
        swaps: &[(
            "if now < fire_at + grace and turn_of(turn) ~= me then",
            "if false then",
        )],
    },
    Mutant {
        name: "sched-claim-turn-stays",
        what: "claim.lua does not move the turn on: one replica gets every occurrence",
        swaps: &[("redis.call('INCR', KEYS[6])", "redis.call('GET', KEYS[6])")],
    },
    Mutant {
        name: "sched-claim-dead-holds-turn",
        what: "claim.lua counts replicas whose liveness ran out: every occurrence waits out the \
               grace of a turn holder that died",
        swaps: &[(
            "redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', int(now))",
            "redis.call('ZCARD', KEYS[5])",
        )],
    },
    Mutant {
        name: "sched-claim-forgets-ledger",
        what: "claim.lua looks only at the claims kept for the retention: a late replica runs \
               an occurrence the ledger shows claimed",
        swaps: &[(
            "if redis.call('ZSCORE', KEYS[1], ARGV[1]) or redis.call('HEXISTS', KEYS[3], ARGV[1] .. ':claim') == 1 then",
            "if redis.call('ZSCORE', KEYS[1], ARGV[1]) then",
        )],
    },
    Mutant {
        name: "sched-claim-fires-early",
        what: "claim.lua claims an occurrence before its fire time by the server's clock",
        swaps: &[("if now < fire_at then", "if false then")],
    },
    Mutant {
        name: "sched-take-request-while-paused",
        what: "take_request.lua takes a request of a paused job",
        swaps: &[(
            "if redis.call('EXISTS', KEYS[4]) == 1 then\n  return {0, 'paused', now}\nend",
            "",
        )],
    },
    Mutant {
        name: "sched-withdraw-started-run",
        what: "withdraw.lua withdraws a claim whose run has started",
        swaps: &[(
            " or redis.call('HEXISTS', KEYS[3], ARGV[1] .. ':end') == 1 then",
            " then",
        )],
    },
    Mutant {
        name: "sched-withdraw-drops-request",
        what: "withdraw.lua withdraws a run_now request's claim without queuing the request again",
        swaps: &[(
            "redis.call('LPUSH', KEYS[4], requested)",
            "redis.call('LLEN', KEYS[4])",
        )],
    },
    Mutant {
        name: "sched-resume-silent",
        what: "resume.lua wakes the replicas only when more than one request or run waits",
        swaps: &[("if pending > 0 then", "if pending > 1 then")],
    },
    Mutant {
        name: "sched-heartbeat-leave-stays",
        what: "heartbeat.lua keeps a replica that shuts down in the live set (others wait out \
               its turns)",
        swaps: &[(
            "  redis.call('ZREM', KEYS[1], ARGV[1])\nend\nredis.call('ZREMRANGEBYSCORE'",
            "  redis.call('ZCARD', KEYS[1])\nend\nredis.call('ZREMRANGEBYSCORE'",
        )],
    },
    Mutant {
        name: "sched-once-cancel-any",
        what: "once_cancel.lua cancels a one-off job that has started or was cancelled already",
        swaps: &[(
            "if c[1] ~= '1' or e[1] ~= '1' or c[8] ~= '0' or e[2] ~= 'scheduled' then",
            "if c[1] ~= '1' or e[1] ~= '1' then",
        )],
    },
    Mutant {
        name: "sched-once-trim-pending",
        what: "once_trim.lua trims a run that is still pending",
        swaps: &[(
            "  if not redis.call('ZSCORE', KEYS[3], id) then",
            "  if true then",
        )],
    },
    Mutant {
        name: "sched-register-no-ttl",
        what: "register.lua writes an entry that never expires: a dead replica stays listed",
        swaps: &[(
            "redis.call('SET', KEYS[2], head .. ARGV[3], 'PX', string.format('%.0f', ttl))",
            "redis.call('SET', KEYS[2], head .. ARGV[3])",
        )],
    },
    Mutant {
        name: "sched-withdraw-kept-forever",
        what: "withdraw.lua queues a withdrawn request again without the list's expiry: a list \
               whose last request was taken is made again to be kept forever",
        swaps: &[(
            "redis.call('EXPIRE', KEYS[4], ARGV[3])",
            "redis.call('TTL', KEYS[4])",
        )],
    },
    Mutant {
        name: "sched-request-kept-forever",
        what: "request.lua queues a request without the list's expiry",
        swaps: &[(
            "redis.call('EXPIRE', KEYS[1], ARGV[2])",
            "redis.call('TTL', KEYS[1])",
        )],
    },
];
