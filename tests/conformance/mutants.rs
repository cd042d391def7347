//! Protocol bugs applied to the shipped Lua, one at a time, to show that the conformance test
//! catches each (`make model-mutants`, `DLOCK_MUTANT=<name>` or `all`). A mutant is a text
//! substitution in the assembled script text, made in memory when the test loads the scripts;
//! no mutated script is shipped. A substitution that no longer matches the scripts fails the
//! run, naming this file: a mutant must never silently test nothing.

use dlock_core::__private::conformance::Source;

/// One protocol bug.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Mutant {
    /// Its name, as `DLOCK_MUTANT` gives it.
    pub name: &'static str,
    /// What it breaks.
    pub what: &'static str,
    /// `(from, to)`: replaced wherever `from` occurs in a script's text.
    pub swaps: &'static [(&'static str, &'static str)],
}

/// Every mutant.
pub(crate) const ALL: &[Mutant] = &[
    Mutant {
        name: "newcomer-takes-expired",
        what: "acquire.lua takes an expired lock although callers are queued (no hand-off)",
        swaps: &[("if taken and waiting > 0 then", "if taken and false then")],
    },
    Mutant {
        name: "enqueue-forgets-keep",
        what: "keep (common.lua) flags the lock for its waiters but does not keep the key past \
               its holder's deadline: a newcomer's SET NX takes it ahead of the queue",
        swaps: &[(
            "    if redis.call('PEXPIREAT', lock, at, 'GT') == 1 then\n",
            "    if false then\n",
        )],
    },
    Mutant {
        name: "grant-above-limit",
        what: "admit_from_head (admission.lua) admits the head whatever the permits held",
        swaps: &[("if used + weight > limit then", "if weight > limit then")],
    },
    Mutant {
        name: "dead-waiter-inherits",
        what: "hand_off (common.lua) counts a grant that reached nobody as delivered",
        swaps: &[(
            "if redis.call(publish, lock .. ':wake:' .. client, grant) > 0 then",
            "if redis.call(publish, lock .. ':wake:' .. client, grant) >= 0 then",
        )],
    },
    Mutant {
        name: "reader-past-writer",
        what: "shared_acquire.lua admits a request that fits although others are queued",
        swaps: &[(
            "if not fence and redis.call('LLEN', queue) == 0 then",
            "if not fence then",
        )],
    },
    Mutant {
        name: "no-readmit-after-timeout",
        what: "shared_acquire.lua mode \"last\" leaves without admitting what fits behind it (S1)",
        swaps: &[(
            "forget_join(key, token)\n  local _, failed = admit_from_head(key, counter, now, nil)",
            "forget_join(key, token)\n  local failed = nil",
        )],
    },
    Mutant {
        name: "dead-head-blocks",
        what: "admit_from_head (admission.lua) waits behind a head that does not fit although its client is gone (S2)",
        swaps: &[(
            "if entry == caller_entry or listening(key, client, pub) then",
            "if true then",
        )],
    },
    Mutant {
        name: "limit-dropped-with-waiters",
        what: "set_expiry (admission.lua) lets the stored limit and the queue go with the last holder although requests wait (S3)",
        swaps: &[(
            "local waiting = now + 2 * tonumber(redis.call('HGET', key, 'qlease') or '0')",
            "local waiting = 0",
        )],
    },
    Mutant {
        name: "operator-limit-ignored",
        what: "shared_acquire.lua weighs a request against its handle's limit, not the one set_limit stored (S3)",
        swaps: &[("  limit = operator\n", "  limit = limit\n")],
    },
    Mutant {
        name: "fence-not-floored",
        what: "next_fence (common.lua) takes a plain INCR: a restart hands out old fences",
        swaps: &[(
            "local floor = tonumber(now[1]) * 1000000 + tonumber(now[2])",
            "local floor = 0",
        )],
    },
    // fence_raise.lua, the quorum's round 2 (quorum.rs runs it on three servers).
    Mutant {
        name: "raise-skips-keep-out",
        what: "fence_raise.lua counts a node whose data is younger than one TTL (restarted empty)",
        swaps: &[("if left > 0 then", "if false then")],
    },
    Mutant {
        name: "raise-keep-out-half",
        what: "fence_raise.lua keeps a restarted node out for half a TTL only",
        swaps: &[(
            "local left = since + tonumber(ARGV[5]) - now",
            "local left = since + math.floor(tonumber(ARGV[5]) / 2) - now",
        )],
    },
    Mutant {
        name: "raise-forgets-since",
        what: "fence_raise.lua does not write the data-since record it found missing: the node \
               is kept out forever",
        swaps: &[(
            "redis.call('SET', ARGV[4], now)",
            "redis.call('GET', ARGV[4])",
        )],
    },
    Mutant {
        name: "raise-trusts-clock-back",
        what: "fence_raise.lua keeps a data-since record later than the node's clock (a clock \
               that went back): the keep-out outlasts one TTL",
        swaps: &[("if not since or since > now then", "if not since then")],
    },
    Mutant {
        name: "raise-skips-owner",
        what: "fence_raise.lua raises the counter for whoever asks while anyone holds the lock",
        swaps: &[(
            "if type(held) ~= 'string' or string.sub(held, 1, 32) ~= ARGV[1] then",
            "if type(held) ~= 'string' then",
        )],
    },
    Mutant {
        name: "raise-counts-gone",
        what: "fence_raise.lua answers raised on a node where the caller's lease ran out",
        swaps: &[(
            "local held = redis.pcall('GET', KEYS[1])\nif not held then\n  return 0\n",
            "local held = redis.pcall('GET', KEYS[1])\nif not held then\n  return 1\n",
        )],
    },
    Mutant {
        name: "raise-short-of-fence",
        what: "fence_raise.lua takes a counter one below the quorum fence as raised: the node \
               that issued the largest round-1 fence stays below it",
        swaps: &[(
            "if value >= tonumber(ARGV[3]) then",
            "if value + 1 >= tonumber(ARGV[3]) then",
        )],
    },
    Mutant {
        name: "guarded-ignores-deadline",
        what: "guarded.lua takes a shared holder's record in K:exp as its hold, whatever its deadline",
        swaps: &[(
            "if not deadline or tonumber(deadline) <= now_ms() then",
            "if not deadline then",
        )],
    },
    Mutant {
        name: "guarded-skips-owner",
        what: "guarded.lua writes for whoever asks while the mutex is held, without comparing the owner",
        swaps: &[("if string.sub(value, 1, 32) ~= owner then", "if false then")],
    },
    Mutant {
        name: "ask-shortens-lease",
        what: "ask.lua halves the lease left of the mutex holder it asks",
        swaps: &[(
            "  record(string.sub(value, 1, 32), pttl)\n",
            "  redis.call('PEXPIRE', KEYS[1], math.floor(pttl / 2))\n  \
             record(string.sub(value, 1, 32), math.floor(pttl / 2))\n",
        )],
    },
    Mutant {
        name: "ask-records-next-waiter",
        what: "ask.lua records the mutex's first waiter beside its holder: told once it holds",
        swaps: &[(
            "  record(string.sub(value, 1, 32), pttl)\n",
            "  local head = redis.call('LINDEX', KEYS[1] .. ':queue', 0)\n  \
             if head then\n    record(string.match(head, '^1 (%x+) '), pttl)\n  \
             end\n  record(string.sub(value, 1, 32), pttl)\n",
        )],
    },
    Mutant {
        name: "ask-expires-early",
        what: "ask.lua keeps the request for half the lease it found: a renewal on time misses it",
        swaps: &[(
            "redis.call('PEXPIRE', ask, keep_ms)",
            "redis.call('PEXPIRE', ask, math.floor(keep_ms / 2))",
        )],
    },
    Mutant {
        name: "ask-asks-expired-holders",
        what: "ask.lua asks every holder in K:exp, those past their deadline and not purged too",
        swaps: &[("'(' .. now, '+inf', 'BYSCORE'", "'-inf', '+inf', 'BYSCORE'")],
    },
    Mutant {
        name: "ask-skips-foreign-check",
        what: "ask.lua records whatever the mutex key holds, another program's value too",
        swaps: &[(
            "  local refused = unusable(KEYS[1], value)\n  if refused then\n    return refused\n  \
             end\n  local pttl",
            "  local pttl",
        )],
    },
    Mutant {
        name: "extend-ignores-ask",
        what: "extend.lua never answers 2: an asked holder is not told",
        swaps: &[(
            "if redis.pcall('HEXISTS', key .. ':ask', token) == 1 then",
            "if false then",
        )],
    },
    Mutant {
        name: "extend-answers-any-token",
        what: "extend.lua answers 2 to any holder while the lock's ask key exists",
        swaps: &[(
            "redis.pcall('HEXISTS', key .. ':ask', token) == 1",
            "redis.pcall('EXISTS', key .. ':ask') == 1",
        )],
    },
    Mutant {
        name: "extend-skips-asked-renewal",
        what: "extend.lua answers an asked mutex holder 2 without renewing its lease",
        swaps: &[
            (
                "        redis.call('PEXPIRE', key, ARGV[2 * i])\n        out[i] = extended(key, owner)\n",
                "        out[i] = extended(key, owner)\n        if out[i] == 1 then\n          \
             redis.call('PEXPIRE', key, ARGV[2 * i])\n        end\n",
            ),
            (
                // The kept key's branch (callers wait: version 2) too.
                "          redis.call('SET', key, owner .. 'w2 ' .. moved .. ' ' .. rest, 'KEEPTTL')\n",
                "          if extended(key, owner) == 1 then\n            \
             redis.call('SET', key, owner .. 'w2 ' .. moved .. ' ' .. rest, 'KEEPTTL')\n          \
             end\n",
            ),
            (
                "          if redis.call('PEXPIREAT', key, at, 'GT') == 1 then\n",
                "          if extended(key, owner) == 1 and redis.call('PEXPIREAT', key, at, 'GT') == 1 then\n",
            ),
        ],
    },
    // The classes an independent round of mutations found missed (issue 44): a stale holder's
    // requests on a kept key, an upgrade while someone is queued, set_limit at a queued weight.
    Mutant {
        name: "extend-renews-stale-kept",
        what: "extend.lua renews a holder whose deadline passed on a key kept for its waiters",
        swaps: &[(
            "if tonumber(deadline) <= now then\n          out[i] = 0",
            "if false then\n          out[i] = 0",
        )],
    },
    Mutant {
        name: "ask-asks-stale-kept",
        what: "ask.lua asks the holder of a key kept past its deadline (and keeps the request \
               without an expiry)",
        swaps: &[("    if deadline <= now then\n      return 0\n    end\n", "")],
    },
    Mutant {
        name: "fence-to-stale-kept",
        what: "fence.lua gives a fence to the holder of a key kept past its deadline",
        swaps: &[(
            "if deadline_of(held) and not holds(held, clock_ms()) then\n  -- Kept",
            "if false then\n  -- Kept",
        )],
    },
    Mutant {
        name: "publish-by-stale-kept",
        what: "election.lua takes a kept key's expiry for the leader's lease: a leader past its \
               deadline publishes",
        swaps: &[("if deadline and pttl > 0 then", "if false then")],
    },
    Mutant {
        name: "guarded-by-stale-kept",
        what: "guarded.lua writes for the holder of a mutex key kept past its deadline",
        swaps: &[(
            "if deadline_of(value) and not holds(value, clock_ms()) then",
            "if false then",
        )],
    },
    Mutant {
        name: "release-stale-kept-as-own",
        what: "release.lua releases a key kept past its deadline as the caller's own (no \
               hand-off to the head as nobody's)",
        swaps: &[("if now and not holds(held, now) then", "if false then")],
    },
    Mutant {
        name: "upgrade-past-queue",
        what: "rw_change.lua upgrades the sole reader although requests are queued",
        swaps: &[("if used ~= 1 or waiting > 0 then", "if used ~= 1 then")],
    },
    Mutant {
        name: "limit-drops-equal-weight",
        what: "shared_limit.lua drops queued requests that weigh exactly the new limit",
        swaps: &[(
            "if token and tonumber(weight) > limit then",
            "if token and tonumber(weight) >= limit then",
        )],
    },
    // Found by the path coverage: a branch that only one state takes.
    Mutant {
        name: "observer-ignores-deadline",
        what: "election_read.lua reports the fence of a leader past its deadline",
        swaps: &[(
            "  if lease <= 0 then\n    lease = -2\n    lock_fence = 0",
            "  if false then\n    lease = -2\n    lock_fence = 0",
        )],
    },
    Mutant {
        name: "inspect-ignores-deadline",
        what: "inspect.lua reports the holder of a key kept past its deadline",
        swaps: &[(
            "  if deadline <= now then\n    return {false, -2, waiters}",
            "  if false then\n    return {false, -2, waiters}",
        )],
    },
    Mutant {
        name: "downgrade-admits-nobody",
        what: "rw_change.lua downgrades without admitting the readers queued behind the writer",
        swaps: &[(
            "(which reports the counter).\n  admit_from_head(key, counter, now, nil)\n",
            "(which reports the counter).\n",
        )],
    },
    Mutant {
        name: "limit-admits-nobody",
        what: "shared_limit.lua raises the limit without admitting what now fits",
        swaps: &[(
            "local _, failed = admit_from_head(key, ARGV[2], now, nil)",
            "local failed = nil",
        )],
    },
    Mutant {
        name: "limit-forgets-nudge",
        what: "shared_limit.lua drops a request heavier than the new limit without telling it",
        swaps: &[(
            "    redis.call(publish, key .. ':wake:' .. client, token .. ' 0 0 0 1')\n",
            "",
        )],
    },
    Mutant {
        name: "join-queues-twice",
        what: "first_join (common.lua) takes every \"join\" for a first one: a resent first \
               attempt queues the caller twice (a mutex's, a shared lock's)",
        swaps: &[(
            "return redis.call('SET', key .. ':joined:' .. token, '1', 'NX', 'PX', ms) ~= false",
            "return true",
        )],
    },
    Mutant {
        name: "queue-never-expires",
        what: "keep (common.lua) keeps the lock key for its waiters but gives the queue no \
               expiry: the entries of waiters that all died stay (issue #44)",
        swaps: &[("      redis.call('PEXPIREAT', lock .. ':queue', at)\n", "")],
    },
    Mutant {
        name: "handoff-leaves-queue-expiry",
        what: "hand_off (common.lua) sets the new holder's kept key but leaves the queue's \
               expiry as it was",
        swaps: &[(
            "        redis.call('PEXPIRE', queue, 2 * tonumber(lease))\n",
            "",
        )],
    },
    Mutant {
        name: "renewal-leaves-queue-expiry",
        what: "extend.lua keeps a holder's key one lease past its new deadline but not the \
               queue: the waiters' queue expires before the key kept for them",
        swaps: &[(
            "            redis.call('PEXPIREAT', key .. ':queue', at)\n",
            "",
        )],
    },
    Mutant {
        name: "retried-change-lost",
        what: "rw_change.lua does not recognise its own change sent again: the retry finds the \
               old token gone",
        swaps: &[(
            "local done = redis.call('HGET', key, new)\nif done then",
            "local done = redis.call('HGET', key, new)\nif false then",
        )],
    },
    Mutant {
        name: "retried-acquire-busy",
        what: "acquire.lua does not recognise a hold that is the caller's (a retry, a lost \
               grant): it answers busy and queues the caller behind itself",
        swaps: &[(
            "if string.sub(held, 1, 32) == string.sub(ARGV[1], 1, 32) then",
            "if false then",
        )],
    },
    Mutant {
        name: "leaving-keeps-flag",
        what: "release.lua lets a waiter leave a lock held by another without updating its \
               flag and keep",
        swaps: &[("    keep(lock, held, now or clock_ms(), 0)\n", "")],
    },
    Mutant {
        name: "extend-shared-renews-expired",
        what: "extend.lua renews a shared holder past its deadline that no purge removed yet",
        swaps: &[(
            "if not score or tonumber(score) <= now then",
            "if not score then",
        )],
    },
    Mutant {
        name: "fenced-refuses-equal",
        what: "fenced.lua refuses a write with the stored fence (a holder's second write, a \
               retry)",
        swaps: &[(
            "if stored and larger(stored, ARGV[1]) then",
            "if stored and not larger(ARGV[1], stored) then",
        )],
    },
    Mutant {
        name: "publish-refresh-republishes",
        what: "election.lua writes and announces a leader record that is already the caller's",
        swaps: &[("if current == wanted then", "if false then")],
    },
    Mutant {
        name: "resign-deletes-any-record",
        what: "election.lua resign deletes a record that is not the caller's",
        swaps: &[(
            "  if current_fence ~= tonumber(fence) then\n    return 0",
            "  if false then\n    return 0",
        )],
    },
    Mutant {
        name: "dead-grant-kept",
        what: "admit_from_head (admission.lua) leaves a grant that reached nobody in place",
        swaps: &[("        else\n          dismiss(key, token)\n", "")],
    },
    Mutant {
        name: "keep-shortened",
        what: "keep (common.lua) sets the kept key's expiry without GT: a waiter that leaves \
               (lease 0) or asks with a shorter lease cuts the keep of the others",
        swaps: &[(
            "redis.call('PEXPIREAT', lock, at, 'GT')",
            "redis.call('PEXPIREAT', lock, at)",
        )],
    },
    Mutant {
        name: "handoff-keeps-one-lease",
        what: "hand_off (common.lua) keeps the granted lock only its lease while others wait, \
               not a lease past its deadline",
        swaps: &[("'PX', 2 * tonumber(lease))", "'PX', tonumber(lease))")],
    },
    Mutant {
        name: "queue-kept-one-lease",
        what: "set_expiry (admission.lua) keeps a queue one of its longest leases after the last \
               script, where a live waiter may need two",
        swaps: &[(
            "local waiting = now + 2 * tonumber",
            "local waiting = now + 1 * tonumber",
        )],
    },
    Mutant {
        name: "renewal-keeps-one-lease",
        what: "extend.lua moves a kept key's expiry to the new deadline, not a lease past it",
        swaps: &[(
            "string.format('%.0f', now + 2 * lease)",
            "string.format('%.0f', now + lease)",
        )],
    },
    Mutant {
        name: "again-never-requeues",
        what: "acquire.lua and shared_acquire.lua mode \"again\" trust the entry even when the \
               queue is empty (a waiter whose entry left unheard is never queued again)",
        swaps: &[("queued = redis.call('LLEN', queue) > 0", "queued = true")],
    },
    Mutant {
        name: "busy-reports-keep",
        what: "acquire.lua tells a waiter the kept key's time to live, a lease more than the holder's deadline",
        swaps: &[(
            "if deadline then\n  pttl = deadline - now\nend",
            "if false then\n  pttl = deadline - now\nend",
        )],
    },
    Mutant {
        name: "handoff-always-flags",
        what: "hand_off (common.lua) writes the waiters' version and keep although nobody else waits",
        swaps: &[(
            "      if redis.call('LLEN', queue) > 0 then\n        -- More wait",
            "      if true then\n        -- More wait",
        )],
    },
    Mutant {
        name: "fence-reissued",
        what: "fence.lua issues a new fence to a hold that has one (a retry, a second ask)",
        swaps: &[(
            "if issued then\n  return tonumber(issued)",
            "if false then\n  return tonumber(issued)",
        )],
    },
    Mutant {
        name: "retried-shared-full-lease",
        what: "shared_acquire.lua tells a holder found again (a retry, a lost grant) its whole lease, not the time left",
        swaps: &[(
            "return {1, tonumber(fence), deadline - now}",
            "return {1, tonumber(fence), tonumber(lease)}",
        )],
    },
    Mutant {
        name: "queue-kept-with-holders-only",
        what: "set_expiry (admission.lua) keeps a queue only as long as its holders when there are any",
        swaps: &[("if not keep or waiting > keep then", "if not keep then")],
    },
    Mutant {
        name: "record-expires-with-lease",
        what: "election.lua lets the leader record expire with the lease, not twice it",
        swaps: &[(
            "redis.call('SET', record, wanted, 'PX', pttl * 2)",
            "redis.call('SET', record, wanted, 'PX', pttl)",
        )],
    },
    Mutant {
        name: "ask-shortens-request",
        what: "ask.lua moves the request's expiry to the lease it found even when that is sooner",
        swaps: &[(
            "if keep_ms > 0 and redis.call('PTTL', ask) < keep_ms then",
            "if keep_ms > 0 then",
        )],
    },
    Mutant {
        name: "shared-release-always-held",
        what: "shared_release.lua answers 1 although the caller held nothing",
        swaps: &[(
            "if dismiss(key, ARGV[1]) then",
            "if dismiss(key, ARGV[1]) or true then",
        )],
    },
    Mutant {
        name: "operator-limit-not-stored",
        what: "shared_limit.lua writes the limit in the hash only, not in K:limit: it goes with the hash",
        swaps: &[("redis.call('SET', key .. ':limit', ARGV[1])\n", "\n")],
    },
    Mutant {
        name: "renewal-forgets-hash",
        what: "extend.lua moves K:exp's expiry but not K's when nobody waits",
        swaps: &[("    redis.call('PEXPIREAT', key, last[2])\n", "\n")],
    },
    Mutant {
        name: "fenced-compares-numbers",
        what: "fenced.lua compares the tokens as Lua numbers (doubles), which round above 2^53",
        swaps: &[(
            "  if #a ~= #b then\n    return #a > #b\n  end\n  return a > b\n",
            "  return tonumber(a) > tonumber(b)\n",
        )],
    },
    Mutant {
        name: "rate-stale-tat-kept",
        what: "rate.lua keeps its key a minute past the TAT and reads the TAT without raising it to now",
        swaps: &[
            (
                "    tat = math.max(stored_tat, now)\n",
                "    tat = stored_tat\n",
            ),
            ("'PX', ms)", "'PX', ms + 60000)"),
        ],
    },
    Mutant {
        name: "rate-tolerance-whole-burst",
        what: "rate.lua takes a tolerance one cell too large: a full bucket admits burst + 1",
        swaps: &[(
            "local tau = tonumber(ARGV[4])",
            "local tau = tonumber(ARGV[4]) + t",
        )],
    },
    Mutant {
        name: "rate-refund-below-now",
        what: "rate.lua's refund moves the TAT back by n cells without flooring it at now",
        swaps: &[("math.max(tat - t * n, now)", "tat - t * n")],
    },
    Mutant {
        name: "rate-reserve-ignores-max-wait",
        what: "rate.lua reserves whatever the wait",
        swaps: &[(
            "if mode == 'reserve' and wait <= tonumber(ARGV[5]) then",
            "if mode == 'reserve' then",
        )],
    },
    Mutant {
        name: "rate-expires-early",
        what: "rate.lua's key expires halfway to its TAT: the bucket refills early",
        swaps: &[(
            "local ms = math.ceil((at - now) / 1000)",
            "local ms = math.ceil((at - now) / 2000)",
        )],
    },
    Mutant {
        name: "rate-refused-try-stores",
        what: "rate.lua moves the TAT on a refusal as if it had admitted",
        swaps: &[(
            "return {0, wait, now, remaining(tat)}",
            "store(tat + t * n)\nreturn {0, wait, now, remaining(tat)}",
        )],
    },
    Mutant {
        name: "rate-conforms-late",
        what: "rate.lua takes n cells to conform one cell later than they do",
        swaps: &[(
            "local wait = tat + t * (n - 1) - tau - now",
            "local wait = tat + t * n - tau - now",
        )],
    },
    Mutant {
        name: "rate-reads-newer-version",
        what: "rate.lua reads a limiter of any format version as its own",
        swaps: &[(
            "local stored_tat = version == '1' and ",
            "local stored_tat = version and ",
        )],
    },
    Mutant {
        name: "rate-overwrites-foreign",
        what: "rate.lua takes another program's value as a full bucket and overwrites it",
        swaps: &[(
            "    return redis.error_reply('DLOCKFOREIGN ' .. key .. ' holds a value dlock did not write')\n",
            "    tat = now\n",
        )],
    },
];

/// Every mutant: the lock scripts' ([`ALL`]) and the scheduler's.
pub(crate) fn all() -> impl Iterator<Item = Mutant> {
    ALL.iter().chain(crate::scheduler::mutants::ALL).copied()
}

/// Records which substitutions matched, across the scripts.
static APPLIED: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());

impl Mutant {
    /// The mutant named `name`.
    pub(crate) fn named(name: &str) -> Option<Mutant> {
        all().find(|m| m.name == name)
    }

    /// `text` (the script `source`'s) with the substitutions made.
    pub(crate) fn apply(self, _source: Source, text: String) -> Result<String, String> {
        Ok(self.swap(text))
    }

    /// Whether it changes a scheduler script (`scheduler/mutants.rs`).
    pub(crate) fn touches_scheduler(&self) -> bool {
        self.swaps.iter().any(|(from, _)| {
            dlock_scheduler::__private::conformance::Script::ALL
                .iter()
                .any(|s| s.text().contains(from))
        })
    }

    /// `text` (any script's, the scheduler's too) with the substitutions made.
    pub(crate) fn swap(self, mut text: String) -> String {
        for (from, to) in self.swaps {
            if text.contains(from) {
                text = text.replace(from, to);
                if let Ok(mut applied) = APPLIED.lock() {
                    applied.push(from);
                }
            }
        }
        text
    }

    /// Fails unless each of its substitutions matches the text of some shipped script
    /// (checked before the mutant is run: a stale mutant is not a caught one).
    pub(crate) fn applies(&self) -> Result<(), String> {
        for (from, _) in self.swaps {
            let found = Source::ALL
                .iter()
                .any(|source| source.text().contains(from))
                || dlock_scheduler::__private::conformance::Script::ALL
                    .iter()
                    .any(|s| s.text().contains(from));
            if !found {
                return Err(format!(
                    "mutant {}: {from:?} is in no script any more; update \
                     tests/conformance/mutants.rs",
                    self.name
                ));
            }
        }
        Ok(())
    }

    /// Fails unless every substitution matched some script.
    pub(crate) fn check_applied(self) -> Result<(), String> {
        let applied = APPLIED.lock().map_err(|_| "poisoned")?;
        for (from, _) in self.swaps {
            if !applied.contains(from) {
                return Err(format!(
                    "mutant {}: {from:?} is in no script any more; update \
                     tests/conformance/mutants.rs",
                    self.name
                ));
            }
        }
        Ok(())
    }
}
