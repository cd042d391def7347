//! Every reply path of the counted scripts (`sites.rs` finds them in the texts) and how the
//! default run reaches it:
//! - `S`: by the random sequences (the fixed scenarios may reach it too);
//! - `F(why)`: only by a fixed case that writes what the path needs — another program's data
//!   at one of the lock's keys, a format version newer than this dlock's, or input no dlock
//!   client sends (`foreign.rs`, `ask.rs`, `rate.rs`, `fenced.rs`); the random sequences
//!   never write such data, so reaching it there would mean the row is wrong;
//! - [`NOT_FROM`]: a path of a shared function that one script cannot take (it never passes
//!   what the path needs), or that a standalone server cannot produce.
//!
//! A path of a shared file counts for every script that calls its function. The rows are
//! grouped by file, so a change to one script changes its own rows: a new `return` fails the
//! unit test `every_path_is_in_the_table` until a row names it, and a row whose path is gone
//! fails it too.

use dlock_core::__private::conformance::Source;

/// How the default run reaches a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reach {
    /// The random sequences.
    Sequences,
    /// Only a fixed case that writes another program's data (what it needs).
    Foreign(&'static str),
    /// Never, from this script (why).
    Never(&'static str),
}

const S: Reach = Reach::Sequences;

#[allow(non_snake_case)]
const fn F(why: &'static str) -> Reach {
    Reach::Foreign(why)
}

/// The paths that a script cannot take although its text carries them.
pub(crate) const NOT_FROM: &[(Source, &str, &str)] = &[
    (
        Source::Release,
        "common.lua hand_off: return 'caller', tonumber(fence_s)",
        "release.lua hands off with no caller entry",
    ),
    (
        Source::Extend,
        "extend.lua extend_shared: return -2",
        "a key of a slot this node does not serve: a cluster's (tests/cluster.rs)",
    ),
    (
        Source::SharedAcquire,
        "admission.lua dismiss: return false",
        "it dismisses only a holder it has just admitted",
    ),
    (
        Source::SharedLimit,
        "admission.lua dismiss: return false",
        "it dismisses only a holder it has just admitted",
    ),
    (
        Source::RwChange,
        "admission.lua dismiss: return false",
        "it dismisses a holder it has just found, or one just admitted",
    ),
];

/// Every path, by file.
pub(crate) const ROWS: &[(&str, Reach)] = &[
    // lock_value.lua
    (
        "lock_value.lua lock_version: return nil #1",
        F("another Redis type at the lock key"),
    ),
    (
        "lock_value.lua lock_version: return nil #2",
        F("another program's value at the lock key"),
    ),
    (
        "lock_value.lua lock_version: return tonumber(version) or 0",
        S,
    ),
    ("lock_value.lua read: return redis.pcall('GET', lock)", S),
    (
        "lock_value.lua foreign_error: return redis.error_reply('DLOCKFOREIGN ' .. lock .. ' ' .. why)",
        F("another program's data at a key of the lock"),
    ),
    (
        "lock_value.lua unusable: return foreign_error(lock, 'holds a value dlock did not write')",
        F("another program's value at the lock key"),
    ),
    (
        "lock_value.lua unusable: return foreign_error(lock, 'holds a lock of a newer dlock (format version ' .. version",
        F("a lock of a newer format version"),
    ),
    ("lock_value.lua unusable: return nil", S),
    (
        "lock_value.lua clock_ms: return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)",
        S,
    ),
    (
        "lock_value.lua deadline_of: return tonumber(string.match(value, '^%x+w2 (%d+) '))",
        S,
    ),
    (
        "lock_value.lua holds: return deadline == nil or now < deadline",
        S,
    ),
    (
        "lock_value.lua body_of: return string.match(value, '^%x+w2 %d+ (.*)$') or string.match(value, '^%x+[%-w]%d? (.*)$')",
        S,
    ),
    // common.lua
    (
        "common.lua next_fence: return nil, foreign_error(counter, 'holds data dlock did not write (the fence counter)')",
        F("another program's data at the fence counter"),
    ),
    (
        "common.lua next_fence: return string.format('%.0f', fence)",
        S,
    ),
    (
        "common.lua first_join: return redis.call('SET', key .. ':joined:' .. token, '1', 'NX', 'PX', ms) ~= false",
        S,
    ),
    ("common.lua hand_off: return nil", S),
    (
        "common.lua hand_off: return 'error', refused",
        F("another program's data at the fence counter"),
    ),
    ("common.lua hand_off: return 'caller', tonumber(fence_s)", S),
    ("common.lua hand_off: return 'grant', grant", S),
    // acquire.lua
    (
        "acquire.lua main: return foreign_error(queue, 'holds another Redis type (dlock keeps the queue of ' .. lock",
        F("another Redis type at the queue key"),
    ),
    ("acquire.lua main: return fence #1", S),
    (
        "acquire.lua main: return fence #2",
        F("another program's data at the fence counter"),
    ),
    (
        "acquire.lua main: return refused #1",
        F("another program's data at the fence counter"),
    ),
    ("acquire.lua main: return tonumber(fence)", S),
    (
        "acquire.lua main: return refused #2",
        F("another program's data, or a newer format, at the lock key"),
    ),
    (
        "acquire.lua main: return foreign_error(lock, 'has no expiry (dlock never writes a lock without a lease)')",
        F("a lock value without an expiry (someone's PERSIST)"),
    ),
    (
        "acquire.lua main: return {1, tonumber(issued) or 0, pttl}",
        S,
    ),
    ("acquire.lua main: return {0, pttl, now}", S),
    // release.lua
    ("release.lua main: return 1 #1", S),
    ("release.lua main: return 1 #2", S),
    (
        "release.lua foreign_queue: return foreign_error(queue, 'holds another Redis type (dlock keeps the queue of ' .. lock",
        F("another Redis type at the queue key"),
    ),
    (
        "release.lua main: return foreign_queue() #1",
        F("another Redis type at the queue key"),
    ),
    ("release.lua main: return 0 #1", S),
    (
        "release.lua main: return refused",
        F("a forced release of another program's data or a newer format"),
    ),
    (
        "release.lua main: return -1 #1",
        F("another program's data at the lock key"),
    ),
    (
        "release.lua main: return foreign_queue() #2",
        F("another Redis type at the queue key"),
    ),
    (
        "release.lua main: return grant #1",
        F("another program's data at the fence counter"),
    ),
    ("release.lua main: return 0 #2", S),
    ("release.lua main: return -1 #2", S),
    ("release.lua main: return 1 #3", S),
    (
        "release.lua main: return foreign_queue() #3",
        F("another Redis type at the queue key"),
    ),
    ("release.lua main: return {2, grant}", S),
    (
        "release.lua main: return grant #2",
        F("another program's data at the fence counter"),
    ),
    ("release.lua main: return 1 #4", S),
    // extend.lua
    ("extend.lua extend_shared: return -2", S),
    (
        "extend.lua extend_shared: return -1",
        F("another Redis type at K:exp"),
    ),
    ("extend.lua extend_shared: return 0", S),
    ("extend.lua extend_shared: return 1", S),
    ("extend.lua extended: return 2", S),
    ("extend.lua extended: return 1", S),
    ("extend.lua main: return out", S),
    // fence.lua
    ("fence.lua main: return 0 #1", S),
    (
        "fence.lua main: return -1 #1",
        F("another Redis type at the lock key"),
    ),
    ("fence.lua main: return 0 #2", S),
    ("fence.lua main: return -1 #2", S),
    ("fence.lua main: return tonumber(issued)", S),
    (
        "fence.lua main: return refused",
        F("another program's data at the fence counter"),
    ),
    ("fence.lua main: return tonumber(fence)", S),
    // fence_raise.lua (quorum.rs: the walks over three servers, and its scenarios)
    ("fence_raise.lua main: return 0", S),
    ("fence_raise.lua main: return -1", S),
    (
        "fence_raise.lua main: return redis.error_reply('DLOCKFOREIGN ' .. ARGV[4]",
        F("another program's data at the node's data-since record"),
    ),
    ("fence_raise.lua main: return {2, left}", S),
    (
        "fence_raise.lua main: return redis.error_reply('DLOCKFOREIGN ' .. ARGV[2]",
        F("another program's data at the fence counter"),
    ),
    ("fence_raise.lua main: return 1 #1", S),
    ("fence_raise.lua main: return 1 #2", S),
    // shared.lua
    (
        "shared.lua now_ms: return tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)",
        S,
    ),
    (
        "shared.lua shared_unusable: return foreign_error(key, 'holds another Redis type')",
        F("another Redis type at K"),
    ),
    ("shared.lua shared_unusable: return nil", S),
    (
        "shared.lua shared_unusable: return foreign_error(key, 'holds a lock of a newer dlock (format version ' .. version",
        F("a shared lock of a newer format version"),
    ),
    (
        "shared.lua shared_unusable: return foreign_error(key, 'holds a hash dlock did not write') #1",
        F("a hash whose version is no number at K"),
    ),
    (
        "shared.lua shared_unusable: return foreign_error(key, 'holds a hash dlock did not write') #2",
        F("a hash without a version at K"),
    ),
    ("shared.lua shared_unusable: return nil, true", S),
    // admission.lua
    (
        "admission.lua derived_unusable: return foreign_error(pair[1], 'holds a Redis ' .. found .. ' (dlock keeps a ' .. pair[2]",
        F("another Redis type at K:exp, K:queue or K:limit"),
    ),
    ("admission.lua derived_unusable: return nil", S),
    (
        "admission.lua begin: return nil, refused #1",
        F("another program's data, or a newer format, at K"),
    ),
    (
        "admission.lua begin: return nil, refused #2",
        F("another Redis type at K:exp, K:queue or K:limit"),
    ),
    ("admission.lua begin: return now", S),
    (
        "admission.lua admit: return nil, refused",
        F("another program's data at the fence counter"),
    ),
    ("admission.lua admit: return fence", S),
    ("admission.lua dismiss: return false", S),
    ("admission.lua dismiss: return true", S),
    ("admission.lua listening: return tonumber(found[2]) > 0", S),
    (
        "admission.lua admit_from_head: return nil, refused",
        F("another program's data at the fence counter"),
    ),
    ("admission.lua admit_from_head: return mine", S),
    (
        "admission.lua operator_limit: return false, foreign_error(key .. ':limit', 'holds another Redis type')",
        F("another Redis type at K:limit"),
    ),
    (
        "admission.lua operator_limit: return false, foreign_error(key .. ':limit', 'holds a value dlock did not write')",
        F("another program's value at K:limit"),
    ),
    ("admission.lua operator_limit: return tonumber(set)", S),
    // shared_acquire.lua
    (
        "shared_acquire.lua main: return refused",
        F("another program's data, or a newer format, at K or its keys"),
    ),
    (
        "shared_acquire.lua main: return {1, tonumber(fence), deadline - now}",
        S,
    ),
    (
        "shared_acquire.lua main: return foreign",
        F("another program's data at K:limit"),
    ),
    (
        "shared_acquire.lua main: return redis.error_reply('DLOCKLIMIT ' .. key .. ' ' .. stored)",
        S,
    ),
    (
        "shared_acquire.lua main: return redis.error_reply('DLOCKWEIGHT ' .. key .. ' ' .. ARGV[2] .. ' '",
        S,
    ),
    (
        "shared_acquire.lua main: return failed #1",
        F("another program's data at the fence counter"),
    ),
    (
        "shared_acquire.lua main: return failed #2",
        F("another program's data at the fence counter"),
    ),
    (
        "shared_acquire.lua main: return {1, tonumber(fence), tonumber(lease)}",
        S,
    ),
    (
        "shared_acquire.lua main: return failed #3",
        F("another program's data at the fence counter"),
    ),
    ("shared_acquire.lua main: return {0, wait, now}", S),
    // shared_release.lua
    (
        "shared_release.lua main: return refused",
        F("another program's data, or a newer format, at K or its keys"),
    ),
    (
        "shared_release.lua main: return failed",
        F("another program's data at the fence counter"),
    ),
    ("shared_release.lua main: return held", S),
    // shared_limit.lua
    (
        "shared_limit.lua main: return refused",
        F("another program's data, or a newer format, at K or its keys"),
    ),
    (
        "shared_limit.lua main: return foreign",
        F("another program's data at K:limit"),
    ),
    (
        "shared_limit.lua main: return failed",
        F("another program's data at the fence counter"),
    ),
    ("shared_limit.lua main: return before", S),
    // rw_change.lua
    (
        "rw_change.lua main: return refused",
        F("another program's data, or a newer format, at K or its keys"),
    ),
    (
        "rw_change.lua main: return {1, tonumber(fence), tonumber(redis.call('ZSCORE', key .. ':exp', new)) - now}",
        S,
    ),
    ("rw_change.lua main: return {0, 0, 0}", S),
    (
        "rw_change.lua main: return redis.error_reply('DLOCKMODE ' .. key .. ' the holder does not write')",
        S,
    ),
    (
        "rw_change.lua main: return redis.error_reply('DLOCKMODE ' .. key .. ' the holder does not read')",
        S,
    ),
    (
        "rw_change.lua main: return {-1, tonumber(redis.call('HGET', key, 'used') or '0'),",
        S,
    ),
    (
        "rw_change.lua main: return failed",
        F("another program's data at the fence counter"),
    ),
    (
        "rw_change.lua main: return {1, tonumber(fence), tonumber(lease)}",
        S,
    ),
    // election.lua
    ("election.lua main: return -1 #1", S),
    ("election.lua main: return -1 #2", S),
    (
        "election.lua main: return 0 #1",
        F("another Redis type at the leader record"),
    ),
    (
        "election.lua main: return redis.error_reply('DLOCKFOREIGN ' .. record .. ' holds another Redis type (dlock keeps'",
        F("another Redis type at the leader record"),
    ),
    (
        "election.lua main: return 0 #2",
        F("another program's value at the leader record"),
    ),
    (
        "election.lua main: return redis.error_reply('DLOCKFOREIGN ' .. record .. ' holds a value dlock did not write (dlock'",
        F("another program's value at the leader record"),
    ),
    ("election.lua main: return 0 #3", S),
    ("election.lua main: return 1 #1", S),
    ("election.lua main: return -1 #3", S),
    (
        "election.lua main: return -1 #4",
        F("a leader record with a larger fence than any holder of the lock was issued"),
    ),
    ("election.lua main: return 0 #4", S),
    ("election.lua main: return 1 #2", S),
    // election_read.lua
    (
        "election_read.lua main: return {counter, lock_fence, lock_fence, value, lease}",
        S,
    ),
    (
        "election_read.lua main: return {counter, lock_fence, 0, '', lease}",
        S,
    ),
    // guarded.lua
    (
        "guarded.lua wants_of: return nil",
        F("a batch no dlock client sends (it checks the commands first)"),
    ),
    (
        "guarded.lua wants_of: return string.match(WRITES, ' ' .. name .. '=(%a+) ')",
        S,
    ),
    (
        "guarded.lua main: return bad #1",
        F("another program's data, or a newer format, at K"),
    ),
    (
        "guarded.lua main: return foreign_error(KEYS[2], 'holds data dlock did not write')",
        F("another Redis type at K:exp"),
    ),
    ("guarded.lua main: return {0, 'gone'} #1", S),
    ("guarded.lua main: return {0, 'gone'} #2", S),
    (
        "guarded.lua main: return bad #2",
        F("another program's data, or a newer format, at the lock key"),
    ),
    ("guarded.lua main: return {0, 'gone'} #3", S),
    ("guarded.lua main: return {0, 'taken'}", S),
    (
        "guarded.lua main: return redis.error_reply('DLOCKGUARD command ' .. i .. ' (' .. tostring(name)",
        F("a batch no dlock client sends (it checks the commands first)"),
    ),
    (
        "guarded.lua main: return {-1, key, now, name} #1",
        F("another Redis type at a guarded write's target"),
    ),
    (
        "guarded.lua main: return {-1, key, now, name} #2",
        F("another Redis type at a guarded write's target"),
    ),
    ("guarded.lua main: return out", S),
    // fenced.lua
    (
        "fenced.lua larger: return #a > #b",
        F("a fence of another length than the server clock's 16 digits (fenced.rs's pairs)"),
    ),
    ("fenced.lua larger: return a > b", S),
    (
        "fenced.lua canonical: return false",
        F("another program's value at the fence key"),
    ),
    (
        "fenced.lua canonical: return #s < 20 or (#s == 20 and s <= '18446744073709551615')",
        S,
    ),
    (
        "fenced.lua main: return redis.error_reply('DLOCKFOREIGN ' .. KEYS[2] .. ' holds another Redis type (dlock'",
        F("another Redis type at the fence key"),
    ),
    (
        "fenced.lua main: return redis.error_reply('DLOCKFOREIGN ' .. KEYS[2] .. ' holds a string that is not a fence'",
        F("another program's value at the fence key"),
    ),
    ("fenced.lua main: return {0, stored}", S),
    (
        "fenced.lua main: return {-1, now}",
        F("another Redis type at the data key"),
    ),
    ("fenced.lua main: return {1}", S),
    // ask.lua
    ("ask.lua main: return 0 #1", S),
    (
        "ask.lua main: return refused #1",
        F("another program's data, or a newer format, at the lock key"),
    ),
    (
        "ask.lua main: return foreign_error(KEYS[1], 'holds a lock without an expiry (was it PERSISTed?); its '",
        F("a lock value without an expiry (someone's PERSIST)"),
    ),
    ("ask.lua main: return 0 #2", S),
    ("ask.lua main: return 1", S),
    (
        "ask.lua main: return refused #2",
        F("another program's data, or a newer format, at K"),
    ),
    ("ask.lua main: return #holders / 2", S),
    // rate.lua
    (
        "rate.lua main: return redis.error_reply('DLOCKFOREIGN ' .. key .. ' holds another Redis type')",
        F("another Redis type at the limiter's key"),
    ),
    (
        "rate.lua main: return redis.error_reply('DLOCKFOREIGN ' .. key .. ' holds a rate limiter of a newer dlock '",
        F("a limiter of a newer format version"),
    ),
    (
        "rate.lua main: return redis.error_reply('DLOCKFOREIGN ' .. key .. ' holds a value dlock did not write')",
        F("another program's value at the limiter's key"),
    ),
    ("rate.lua remaining: return 0", S),
    (
        "rate.lua remaining: return math.floor(room / t + 1e-9) + 1",
        S,
    ),
    ("rate.lua main: return {1, 0, now, remaining(back)}", S),
    ("rate.lua main: return {1, 0, now, remaining(after)}", S),
    ("rate.lua main: return {1, wait, now, 0}", S),
    ("rate.lua main: return {0, wait, now, remaining(tat)}", S),
    // inspect.lua
    ("inspect.lua main: return {false, -2, waiters}", S),
    ("inspect.lua main: return {held, pttl, waiters}", S),
    // shared_inspect.lua
    (
        "shared_inspect.lua main: return redis.error_reply('DLOCKFOREIGN ' .. key .. ' holds another Redis type')",
        F("another Redis type at K"),
    ),
    (
        "shared_inspect.lua main: return redis.error_reply('DLOCKFOREIGN ' .. key .. ' holds a hash of format ' .. version",
        F("a shared lock of a newer format version"),
    ),
    (
        "shared_inspect.lua main: return redis.error_reply('DLOCKFOREIGN ' .. queue .. ' holds another Redis type (dlock keeps'",
        F("another Redis type at K:queue"),
    ),
    (
        "shared_inspect.lua main: return redis.error_reply('DLOCKFOREIGN ' .. exp .. ' holds another Redis type (dlock keeps'",
        F("another Redis type at K:exp"),
    ),
    ("shared_inspect.lua main: return out #1", S),
    (
        "shared_inspect.lua main: return redis.error_reply('DLOCKFOREIGN ' .. exp .. ' has no expiry (dlock keeps the lease ends'",
        F("a K:exp without an expiry (someone's PERSIST)"),
    ),
    ("shared_inspect.lua main: return out #2", S),
];

/// How `source` reaches its path `id`; `None` for a path the table does not know.
pub(crate) fn reach(source: Source, id: &str) -> Option<Reach> {
    if let Some((_, _, why)) = NOT_FROM.iter().find(|(s, i, _)| *s == source && *i == id) {
        return Some(Reach::Never(why));
    }
    ROWS.iter().find(|(i, _)| *i == id).map(|(_, reach)| *reach)
}
