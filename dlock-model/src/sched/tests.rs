//! The scheduler steps' own scenarios: each script's replies and effects on the state, the
//! cases the checked model and the conformance driver rely on.

use super::*;

fn claim_args(replica: &str, run: Ms, token: &str) -> ClaimArgs {
    ClaimArgs {
        run_id: run.to_string(),
        occurrence: run,
        replica: replica.to_owned(),
        host: "h".to_owned(),
        pid: "1".to_owned(),
        token: token.to_owned(),
        retention: 100,
        keep: 3,
        fire_at: run,
        grace: 5,
        liveness: 20,
        lease: 0,
        offset: 0,
    }
}

fn take_args(replica: &str, run: &str, token: &str) -> TakeRequestArgs {
    TakeRequestArgs {
        run_id: run.to_owned(),
        replica: replica.to_owned(),
        host: "h".to_owned(),
        pid: "1".to_owned(),
        token: token.to_owned(),
        retention: 100,
        keep: 3,
        lease: 0,
    }
}

fn once_args(run: &str, key: Option<&str>, due: Ms) -> OnceArgs {
    OnceArgs {
        run_id: run.to_owned(),
        key_id: key.map(str::to_owned),
        // The run id stands for the key's hash; the key is what the caller gave.
        key: key.map_or_else(String::new, |id| format!("key of {id}")),
        due: Some(due),
        delay: 0,
        replica: "a".to_owned(),
        host: "h".to_owned(),
        pid: "1".to_owned(),
        args: "{}".to_owned(),
        retention: 50,
        channel: "wake".to_owned(),
        message: "job".to_owned(),
        sharded: false,
        max_wait: None,
        replace: false,
        trace: String::new(),
    }
}

#[test]
fn a_claim_waits_for_the_fire_time_then_for_the_turn_holders_grace() {
    let mut s = JobRedis::default();
    heartbeat(&mut s, 0, "a", 20, false);
    // Too early: wait until the fire time.
    let early = claim(&mut s, 5, &claim_args("b", 10, "t1"));
    assert!(
        matches!(early, ClaimReply::Wait { wait: 5, .. }),
        "{early:?}"
    );
    // Turn 0 of [a, b] is a's: b waits out the grace.
    let turn = claim(&mut s, 11, &claim_args("b", 10, "t1"));
    assert_eq!(
        turn,
        ClaimReply::Wait {
            wait: 4,
            now: 11,
            next: Some("b".to_owned()),
            due: None
        }
    );
    // After the grace b wins, and the turn moves on.
    let won = claim(&mut s, 15, &claim_args("b", 10, "t1"));
    assert!(matches!(won, ClaimReply::Won { now: 15, .. }), "{won:?}");
    assert_eq!(s.turn, Some(1));
    assert_eq!(
        s.ledger["10:claim"],
        "1\x1fb\x1fh\x1f1\x1f15\x1f0\x1ft1\x1f1"
    );
    // Once claimed, claimed for everyone.
    let again = claim(&mut s, 16, &claim_args("a", 10, "t2"));
    assert!(matches!(again, ClaimReply::Claimed { .. }), "{again:?}");
}

#[test]
fn a_dead_turn_holder_leaves_the_live_set_and_nobody_waits_for_it() {
    let mut s = JobRedis::default();
    heartbeat(&mut s, 0, "a", 5, false);
    // a is live until 5: b (turn 0 is a's) waits; at 6 a has left, b claims at once.
    assert!(matches!(
        claim(&mut s, 3, &claim_args("b", 3, "t")),
        ClaimReply::Wait { .. }
    ));
    let won = claim(&mut s, 6, &claim_args("b", 6, "t"));
    assert!(matches!(won, ClaimReply::Won { .. }), "{won:?}");
    assert_eq!(s.replicas.keys().collect::<Vec<_>>(), ["b"]);
}

#[test]
fn a_paused_job_claims_and_takes_nothing_until_resumed() {
    let mut s = JobRedis::default();
    request(&mut s, 0, 0, 60, "wake", "job", false);
    pause(&mut s, 0);
    assert_eq!(
        claim(&mut s, 10, &claim_args("a", 10, "t")),
        ClaimReply::Paused { now: 10 }
    );
    assert_eq!(
        take_request(&mut s, 10, &take_args("a", "m1", "t")),
        TakeRequestReply::Paused { now: 10 }
    );
    assert_eq!(s.drain_published().len(), 1);
    assert_eq!(resume(&mut s, 11, "wake", "job", false), 1);
    assert_eq!(s.drain_published().len(), 1);
    assert_eq!(
        take_request(&mut s, 12, &take_args("a", "m1", "t")),
        TakeRequestReply::Took {
            requested: 0,
            now: 12
        }
    );
    assert_eq!(resume(&mut s, 13, "wake", "job", false), 0);
    assert!(s.drain_published().is_empty());
}

#[test]
fn a_withdrawn_request_is_queued_again_at_the_head() {
    let mut s = JobRedis::default();
    request(&mut s, 0, 1, 60, "wake", "job", false);
    request(&mut s, 0, 2, 60, "wake", "job", false);
    take_request(&mut s, 3, &take_args("a", "m1", "t"));
    assert_eq!(s.requests, [2]);
    // Another attempt's token, then the right one; twice is once.
    assert!(!withdraw(&mut s, 4, "m1", "other", 60));
    assert!(withdraw(&mut s, 4, "m1", "t", 60));
    assert!(!withdraw(&mut s, 4, "m1", "t", 60));
    assert_eq!(s.requests, [1, 2]);
    assert!(s.runs.is_empty() && s.claims.is_empty() && s.ledger.is_empty());
    // The last request taken deletes the list; queued again, it expires again.
    let mut s = JobRedis::default();
    request(&mut s, 0, 1, 60, "wake", "job", false);
    take_request(&mut s, 3, &take_args("a", "m1", "t"));
    assert_eq!((s.requests.len(), s.requests_expire), (0, None));
    assert!(withdraw(&mut s, 4, "m1", "t", 60));
    assert_eq!(
        (s.requests.as_slice(), s.requests_expire),
        ([1].as_slice(), Some(60_004))
    );
}

#[test]
fn a_started_run_is_not_withdrawn() {
    let mut s = JobRedis::default();
    claim(&mut s, 10, &claim_args("a", 10, "t"));
    let running = end_record("running", "", "7", "", "", "");
    s.ledger.insert("10:end".to_owned(), running);
    assert!(!withdraw(&mut s, 11, "10", "t", 60));
    assert!(s.claims.contains_key("10"));
}

#[test]
fn the_ledger_is_trimmed_to_its_runs_but_never_a_pending_one() {
    let mut s = JobRedis::default();
    let mut at_least_once = claim_args("a", 1, "t");
    at_least_once.lease = 10;
    claim(&mut s, 1, &at_least_once);
    for run in [2, 3, 4] {
        claim(&mut s, run, &claim_args("a", run, "t"));
    }
    // Four runs, keep 3: the oldest is pending (in retries), so it stays; none is removed.
    assert_eq!(s.runs.len(), 4);
    s.retries.clear();
    claim(&mut s, 5, &claim_args("a", 5, "t"));
    assert_eq!(s.runs.keys().collect::<Vec<_>>(), ["3", "4", "5"]);
}

#[test]
fn heartbeat_drops_expired_replicas_and_a_zero_liveness_leaves() {
    let mut s = JobRedis::default();
    heartbeat(&mut s, 0, "a", 5, false);
    heartbeat(&mut s, 4, "b", 5, false);
    assert_eq!(heartbeat(&mut s, 6, "b", 5, true), (6, -1));
    assert_eq!(s.replicas.keys().collect::<Vec<_>>(), ["b"]);
    heartbeat(&mut s, 7, "b", 0, false);
    assert!(s.replicas.is_empty() && s.replicas_expire.is_none());
}

#[test]
fn register_keeps_the_index_until_its_last_entry_expires() {
    let mut r = Registry::default();
    let args = |token: &str, ttl| RegisterArgs {
        entry_key: format!("e:{token}"),
        token: token.to_owned(),
        ttl,
        body: "jobs".to_owned(),
        liveness: 3,
    };
    assert_eq!(register(&mut r, 0, &args("a", 10)), 0);
    register(&mut r, 2, &args("b", 10));
    assert_eq!(r.entries["e:a"], ("3 0 10 3\njobs".to_owned(), 10));
    assert_eq!(r.index_expire, Some(12));
    register(&mut r, 11, &args("b", 0));
    assert!(r.index.is_empty() && r.entries.is_empty() && r.index_expire.is_none());
}

#[test]
fn an_idempotency_key_enqueues_once_within_the_retention() {
    let mut s = JobRedis::default();
    let first = once(&mut s, 0, &once_args("o1", Some("ok"), 5));
    assert_eq!((first.status, first.id.as_str(), first.due), (1, "ok", 5));
    assert_eq!(
        s.ledger["ok:key"], "1\u{1f}key of ok",
        "the key is stored with its run"
    );
    let again = once(&mut s, 1, &once_args("o2", Some("ok"), 9));
    assert_eq!((again.status, again.due), (0, 5));
    assert_eq!(s.drain_published().len(), 1);
    // Cancelled, trimmed: the claim alone is left within the retention, and still refuses.
    assert_eq!(once_cancel(&mut s, 2, "ok", "no"), (true, 2));
    assert_eq!(once_cancel(&mut s, 2, "ok", "no"), (false, 2));
    assert_eq!(once_trim(&mut s, 3, 0, 10), 1);
    assert!(
        s.ledger.is_empty(),
        "a trim leaves none of the run's records: {s:?}"
    );
    assert_eq!(once(&mut s, 4, &once_args("o3", Some("ok"), 9)).due, -1);
    // Past the retention, the key enqueues again.
    assert_eq!(once(&mut s, 60, &once_args("o4", Some("ok"), 61)).status, 1);
}

#[test]
fn once_trim_never_drops_a_pending_run_and_looks_at_most_as_told() {
    let mut s = JobRedis::default();
    for (i, run) in ["o1", "o2", "o3"].into_iter().enumerate() {
        once(&mut s, 0, &once_args(run, None, i as Ms));
    }
    assert_eq!(once_trim(&mut s, 1, 0, 10), 0);
    s.retries.remove("o1");
    s.retries.remove("o2");
    assert_eq!(once_trim(&mut s, 1, 0, 1), 1);
    assert_eq!(once_trim(&mut s, 1, 0, 10), 1);
    assert_eq!(s.runs.keys().collect::<Vec<_>>(), ["o3"]);
}

#[test]
fn a_debounced_key_moves_its_due_time_up_to_the_first_call_plus_the_max_wait() {
    let mut s = JobRedis::default();
    let debounce = |due: Ms| OnceArgs {
        max_wait: Some(10),
        ..once_args("o", Some("ok"), due)
    };
    // The first call is capped too: due no later than now + max wait.
    assert_eq!(once(&mut s, 0, &debounce(30)).due, 10);
    let moved = once(&mut s, 2, &debounce(6));
    assert_eq!((moved.status, moved.due), (3, 6));
    assert_eq!(s.retries["ok"], 6);
    assert_eq!(s.runs["ok"], 6);
    // Later calls move it later, never past the first call (0) + 10.
    assert_eq!(once(&mut s, 5, &debounce(12)).due, 10);
    let replace = OnceArgs {
        replace: true,
        args: "{\"v\":2}".to_owned(),
        ..once_args("o", Some("ok"), 99)
    };
    let replaced = once(&mut s, 6, &replace);
    assert_eq!(
        (replaced.status, replaced.due),
        (3, 10),
        "replace alone keeps the due time"
    );
    assert_eq!(s.ledger["ok:args"], "{\"v\":2}");
    // Claimed (attempt 1): nothing changes any more.
    let claim = claim_record("b", "h", "2", 10, true, "t", 1);
    s.ledger.insert("ok:claim".to_owned(), claim);
    s.ledger.remove("ok:end");
    let before = s.clone();
    assert_eq!(once(&mut s, 11, &debounce(20)).status, 4);
    assert_eq!(once(&mut s, 11, &replace).status, 4);
    assert_eq!(s, before);
    // A newer dlock's records: refused by their version, untouched.
    let newer = "2\u{1f}b".to_owned();
    s.ledger.insert("ok:claim".to_owned(), newer);
    s.ledger.insert("ok:end".to_owned(), "2\u{1f}x".to_owned());
    let before = s.clone();
    assert_eq!(once(&mut s, 12, &replace).status, 5);
    assert_eq!(s, before);
}

#[test]
fn the_turn_offset_gives_the_jobs_of_a_group_due_at_one_instant_different_replicas() {
    // Three live replicas, three jobs of a group with equal turn counters (one claim each).
    let mut jobs = [
        JobRedis::default(),
        JobRedis::default(),
        JobRedis::default(),
    ];
    let mut winners = Vec::new();
    for (offset, job) in jobs.iter_mut().enumerate() {
        for r in ["a", "b", "c"] {
            heartbeat(job, 0, r, 20, false);
        }
        job.turn = Some(1);
        // Inside the grace only the turn holder wins: ask as each replica in turn.
        for r in ["a", "b", "c"] {
            let args = ClaimArgs {
                offset: offset as i64,
                ..claim_args(r, 10, "t")
            };
            if matches!(claim(job, 10, &args), ClaimReply::Won { .. }) {
                winners.push(r);
            }
        }
        assert_eq!(
            job.turn,
            Some(2),
            "the stored counter moves by one, offset or not"
        );
    }
    assert_eq!(winners, ["b", "c", "a"]);
}
