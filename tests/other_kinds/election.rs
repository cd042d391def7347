//! Leader election: one leader at a time, candidates served in arrival order, a resignation
//! hands over at once, a killed leader is replaced once its lease runs out, a leader paused past
//! its lease never writes the leader record again — and every observer sees the same leaders in
//! the same order (fences strictly increasing, none skipped while each leader waits to be seen).

use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use dlock_core::{Client, Election, Leadership, LostReason, MutexOptions};
use redis::AsyncCommands;
use tokio::task::JoinHandle;

use crate::support::{Backend, Worker, backend_tests, eventually, queue_reaches};

/// Long enough that waiting for a lease to run out would fail the bounded waits below.
const LONG_LEASE: Duration = Duration::from_secs(30);
/// The bound on a hand-over that must not wait for a lease.
const PROMPTLY: Duration = Duration::from_secs(10);

fn election(client: &Client, name: &str, ttl: Duration) -> Election {
    client
        .election_with(name, MutexOptions::new().ttl(ttl))
        .unwrap()
}

/// What an observer reported, in order: `(fence, value)` of every leader, `None` for every
/// vacancy.
type Reports = Arc<StdMutex<Vec<Option<(u64, String)>>>>;

/// An observer on its own client, recording every leader it reports, in order.
struct Observer {
    seen: Reports,
    task: JoinHandle<()>,
}

impl Observer {
    async fn start(backend: &Backend, name: &str) -> Observer {
        let mut leaders = backend
            .client()
            .election(name)
            .unwrap()
            .observe()
            .await
            .unwrap();
        let seen = Reports::default();
        let record = seen.clone();
        let task = tokio::spawn(async move {
            loop {
                let now = leaders
                    .borrow_and_update()
                    .as_ref()
                    .map(|l| (l.fencing_token().get(), l.value().to_owned()));
                {
                    let mut seen = record.lock().unwrap();
                    if seen.last() != Some(&now) {
                        seen.push(now);
                    }
                }
                if leaders.changed().await.is_err() {
                    return;
                }
            }
        });
        Observer { seen, task }
    }

    /// Waits until the observer reports the leader of `fence` (`None`: nobody).
    async fn sees(&self, fence: Option<u64>) {
        eventually(PROMPTLY, &format!("an observer sees {fence:?}"), || async {
            let seen = self.seen.lock().unwrap();
            (seen.last().cloned().flatten().map(|(f, _)| f) == fence).then_some(())
        })
        .await;
    }

    /// The fences of the leaders reported, in order (vacancies left out).
    fn leaders(&self) -> Vec<u64> {
        let seen = self.seen.lock().unwrap();
        seen.iter().flatten().map(|(fence, _)| *fence).collect()
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Campaigns in the background, on its own client.
fn candidate(election: Election, value: &str) -> JoinHandle<Leadership> {
    let value = value.to_owned();
    tokio::spawn(async move { election.campaign(value).await.unwrap() })
}

async fn promptly(candidate: JoinHandle<Leadership>, what: &str) -> Leadership {
    tokio::time::timeout(PROMPTLY, candidate)
        .await
        .unwrap_or_else(|_| panic!("{what} did not lead within {PROMPTLY:?}"))
        .unwrap()
}

/// The leader record as stored, `"1 <fence> <value>"`, if any.
async fn record(backend: &Backend, name: &str) -> Option<String> {
    let mut con = backend.raw().await;
    con.get(format!("dlock:{{election:{name}}}:leader"))
        .await
        .unwrap()
}

backend_tests!(
    /// Three candidates on three clients lead one at a time, in the order they came; each
    /// resignation hands over at once (the lease is 30 s); the record and both observers follow.
    async fn candidates_lead_in_turn_and_observers_agree(backend: Backend) {
        let name = "primary";
        let early = Observer::start(&backend, name).await;
        let elections: Vec<Election> = (0..3)
            .map(|_| election(&backend.client(), name, LONG_LEASE))
            .collect();
        let first = elections[0].campaign("c0").await.unwrap();
        let f0 = first.fencing_token().get();
        early.sees(Some(f0)).await;
        // Started after the first leader: it reads who leads when it starts.
        let late = Observer::start(&backend, name).await;
        late.sees(Some(f0)).await;
        assert_eq!(record(&backend, name).await, Some(format!("1 {f0} c0")));

        let con = backend.raw().await;
        let queue = format!("dlock:{{election:{name}}}:queue");
        let second = candidate(elections[1].clone(), "c1");
        queue_reaches(&con, &queue, 1).await;
        let third = candidate(elections[2].clone(), "c2");
        queue_reaches(&con, &queue, 2).await;
        assert!(
            !second.is_finished() && !third.is_finished(),
            "two leaders at once"
        );
        let leader = elections[2].leader().await.unwrap().unwrap();
        assert_eq!((leader.fencing_token().get(), leader.value()), (f0, "c0"));

        let lease = first.lease();
        assert!(first.resign().await.unwrap().was_held());
        assert_eq!(lease.lost().await.reason(), LostReason::Released);
        let second = promptly(second, "the first candidate in the queue").await;
        assert_eq!(
            second.value(),
            "c1",
            "candidates lead in the order they came"
        );
        assert!(!third.is_finished(), "two leaders at once");
        let f1 = second.fencing_token().get();
        assert!(f1 > f0);
        for observer in [&early, &late] {
            observer.sees(Some(f1)).await;
        }

        assert!(second.resign().await.unwrap().was_held());
        let third = promptly(third, "the second candidate in the queue").await;
        assert_eq!(third.value(), "c2");
        let f2 = third.fencing_token().get();
        assert!(f2 > f1);
        for observer in [&early, &late] {
            observer.sees(Some(f2)).await;
        }
        assert_eq!(record(&backend, name).await, Some(format!("1 {f2} c2")));

        // Dropped rather than resigned: the vacancy is announced all the same.
        drop(third);
        for observer in [&early, &late] {
            observer.sees(None).await;
        }
        assert_eq!(elections[0].leader().await.unwrap(), None);
        assert_eq!(record(&backend, name).await, None);
        assert_eq!(early.leaders(), [f0, f1, f2]);
        assert_eq!(late.leaders(), [f0, f1, f2]);
    }

    /// A leader process killed with SIGKILL is replaced by the waiting candidate once its lease
    /// has run out (and not before), and observers move to the new leader.
    async fn a_killed_leader_is_replaced_after_its_lease(backend: Backend) {
        let name = "killed";
        let observer = Observer::start(&backend, name).await;
        let mut leader = Worker::spawn(&[
            "elect".into(),
            backend.worker_arg(),
            format!("name={name}"),
            "value=worker".into(),
            "ttl_ms=1500".into(),
        ]);
        let line = leader.line(Duration::from_secs(30));
        let old: u64 = line["leader ".len()..].parse().unwrap();
        observer.sees(Some(old)).await;

        let con = backend.raw().await;
        let next = candidate(election(&backend.client(), name, LONG_LEASE), "next");
        queue_reaches(&con, &format!("dlock:{{election:{name}}}:queue"), 1).await;
        // The lease left by the server's clock (the key itself is kept a lease longer while a
        // candidate waits: issue #35).
        let before_pttl = Instant::now();
        let left = backend
            .client()
            .inspect(&format!("election:{name}"))
            .await
            .unwrap()
            .expect("the leader holds its lock")
            .remaining;
        let pttl = i64::try_from(left.as_millis()).unwrap();
        assert!(
            pttl > 0,
            "the leader's lock should have a lease, {pttl} ms left"
        );
        leader.child_mut().kill();

        let next = promptly(next, "the candidate after a killed leader").await;
        let waited = before_pttl.elapsed();
        assert!(
            waited + Duration::from_millis(2) >= Duration::from_millis(pttl.unsigned_abs()),
            "led after {waited:?}, before the killed leader's lease of {pttl} ms ran out"
        );
        let new = next.fencing_token().get();
        assert!(new > old);
        observer.sees(Some(new)).await;
        assert_eq!(observer.leaders(), [old, new]);
        next.resign().await.unwrap();
    }

    /// A leader process paused (SIGSTOP) past its lease is replaced; resumed, it learns it lost
    /// the leadership, and neither its record refresh nor its resignation touches the new
    /// leader's record. Observers never go back to the old leader.
    async fn a_paused_leader_is_replaced_and_never_writes_again(backend: Backend) {
        let name = "paused";
        let observer = Observer::start(&backend, name).await;
        let paused = Worker::spawn(&[
            "elect".into(),
            backend.worker_arg(),
            format!("name={name}"),
            "value=stale".into(),
            "ttl_ms=500".into(),
            "after_lost_ms=1500".into(),
        ]);
        let line = paused.line(Duration::from_secs(30));
        let old: u64 = line["leader ".len()..].parse().unwrap();
        observer.sees(Some(old)).await;
        paused.child().stop().unwrap();

        // A long lease: the new leader refreshes its record every 10 s, so a stale write in
        // between would still be there to see at the end.
        let next = election(&backend.client(), name, LONG_LEASE)
            .campaign_timeout("next", PROMPTLY)
            .await
            .unwrap();
        let new = next.fencing_token().get();
        assert!(new > old);
        observer.sees(Some(new)).await;

        paused.child().cont().unwrap();
        let lost = paused.line(Duration::from_secs(10));
        assert!(lost.starts_with("lost "), "{lost}");
        let resigned = paused.line(Duration::from_secs(10));
        assert_eq!(resigned, "resigned TakenOver");

        assert_eq!(record(&backend, name).await, Some(format!("1 {new} next")));
        let leader = next.lease();
        assert!(leader.is_held(), "the new leader lost its leadership");
        assert_eq!(observer.leaders(), [old, new]);
        assert!(next.resign().await.unwrap().was_held());
        observer.sees(None).await;
    }
);

backend_tests!(
    /// An observer built with the default lease (30 s: it reads every 10 s by its own interval)
    /// follows candidates that use a 1 s lease: their leader killed, it reports the vacancy
    /// within about that lease, not its own interval.
    async fn an_observer_follows_the_candidates_lease_not_its_own(backend: Backend) {
        let name = "short";
        let observer = Observer::start(&backend, name).await;
        let mut leader = Worker::spawn(&[
            "elect".into(),
            backend.worker_arg(),
            format!("name={name}"),
            "value=worker".into(),
            "ttl_ms=1000".into(),
        ]);
        let line = leader.line(Duration::from_secs(30));
        let fence: u64 = line["leader ".len()..].parse().unwrap();
        observer.sees(Some(fence)).await;
        leader.child_mut().kill();
        // The killed leader's lease (1 s) plus reading slack; the observer's own interval is
        // 10 s.
        eventually(
            Duration::from_secs(4),
            "the observer reports the vacancy",
            || async {
                let seen = observer.seen.lock().unwrap();
                (seen.last() == Some(&None)).then_some(())
            },
        )
        .await;
    }
);
