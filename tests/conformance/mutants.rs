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
            "redis.call('LREM', queue, 1, entry)\n  local _, failed = admit_from_head(key, counter, now, nil)",
            "redis.call('LREM', queue, 1, entry)\n  local failed = nil",
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
        name: "fenced-compares-numbers",
        what: "fenced.lua compares the tokens as Lua numbers (doubles), which round above 2^53",
        swaps: &[(
            "  if #a ~= #b then\n    return #a > #b\n  end\n  return a > b\n",
            "  return tonumber(a) > tonumber(b)\n",
        )],
    },
];

/// Records which substitutions matched, across the scripts.
static APPLIED: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());

impl Mutant {
    /// The mutant named `name`.
    pub(crate) fn named(name: &str) -> Option<Mutant> {
        ALL.iter().copied().find(|m| m.name == name)
    }

    /// `text` (the script `source`'s) with the substitutions made.
    pub(crate) fn apply(self, _source: Source, mut text: String) -> Result<String, String> {
        for (from, to) in self.swaps {
            if text.contains(from) {
                text = text.replace(from, to);
                if let Ok(mut applied) = APPLIED.lock() {
                    applied.push(from);
                }
            }
        }
        Ok(text)
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
