//! Who leads, as observers see it: [`Leader`], and what one observer knows ([`Observed`]: the
//! highest fence it has seen, and the leader it reports), which never goes back to an older
//! leader, whatever order notices and reads arrive in. Pure state, with its unit tests; below
//! `mod.rs`, which feeds it from the channel and the reads: it imports nothing of its folder.

use crate::scripts::LeaderRead;
use crate::scripts::wire::LeaderNotice;
use crate::token::FencingToken;

/// Who leads an election, as [`Election::observe`](crate::Election::observe) and [`Election::leader`](crate::Election::leader) report it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leader {
    pub(super) fence: FencingToken,
    pub(super) value: String,
}

impl Leader {
    /// The leader's fencing token: larger than that of every earlier leader of the election.
    pub fn fencing_token(&self) -> FencingToken {
        self.fence
    }

    /// The value the leader campaigned with (its address, say).
    pub fn value(&self) -> &str {
        &self.value
    }
}

/// What an observer knows: the highest fence it has seen, and the leader it reports.
#[derive(Debug, Default)]
pub(super) struct Observed {
    seen: u64,
    /// The leader it reports.
    pub(super) current: Option<Leader>,
}

impl Observed {
    /// A leader announced or read: taken only if newer than every leader seen.
    pub(super) fn leader(&mut self, fence: u64, value: String) -> bool {
        if fence <= self.seen {
            return false;
        }
        self.seen = fence;
        self.current = Some(Leader {
            fence: FencingToken::new(fence),
            value,
        });
        true
    }

    /// The leader of `fence` resigned.
    fn vacant(&mut self, fence: u64) -> bool {
        self.seen = self.seen.max(fence);
        self.end_if(|leader| leader == fence)
    }

    /// A read of the record. Without a published leader, the current one is dropped only when
    /// the read proves its leadership over: its fence was issued before the read (at most the
    /// counter then) and the lock held another one (a fence never comes back to the lock). A
    /// read that ran before the current leader was announced proves nothing and changes
    /// nothing.
    pub(super) fn read(&mut self, read: LeaderRead) -> bool {
        match read.leader {
            Some((fence, value)) => self.leader(fence, value),
            None => self.end_if(|leader| leader <= read.counter && leader != read.lock_fence),
        }
    }

    fn end_if(&mut self, over: impl FnOnce(u64) -> bool) -> bool {
        if self.current.as_ref().is_some_and(|l| over(l.fence.get())) {
            self.current = None;
            return true;
        }
        false
    }

    /// Applies a notice heard on the channel.
    pub(super) fn notice(&mut self, notice: LeaderNotice) -> bool {
        match notice {
            LeaderNotice::Leader { fence, value } => self.leader(fence, value),
            LeaderNotice::Vacant { fence } => self.vacant(fence),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(counter: u64, lock_fence: u64, leader: Option<(u64, &str)>) -> LeaderRead {
        LeaderRead {
            counter,
            lock_fence,
            leader: leader.map(|(fence, value)| (fence, value.to_owned())),
            lease_left: None,
        }
    }

    fn fence(seen: &Observed) -> Option<u64> {
        seen.current.as_ref().map(|l| l.fencing_token().get())
    }

    #[test]
    fn observers_never_go_back_to_an_older_leader() {
        let mut seen = Observed::default();
        assert!(seen.leader(10, "a".into()));
        assert!(seen.leader(20, "b".into()));
        // A late notice or read of the leader before: ignored.
        assert!(!seen.leader(10, "a".into()));
        assert!(!seen.read(read(15, 10, Some((10, "a")))));
        assert_eq!(fence(&seen), Some(20));
        // The vacancy of an older leader changes nothing; the current one's ends it.
        assert!(!seen.vacant(10));
        assert!(seen.vacant(20));
        assert_eq!(fence(&seen), None);
        // A read that ran before the resignation does not bring it back.
        assert!(!seen.read(read(20, 20, Some((20, "b")))));
        assert_eq!(fence(&seen), None);
        assert!(seen.notice(LeaderNotice::Leader {
            fence: 30,
            value: "c".into()
        }));
        assert_eq!(seen.current.as_ref().map(Leader::value), Some("c"));
    }

    #[test]
    fn a_read_without_leader_ends_only_a_leadership_it_proves_over() {
        let mut seen = Observed::default();
        assert!(seen.leader(20, "b".into()));
        // Ran before fence 20 was issued (the counter was below it): proves nothing.
        assert!(!seen.read(read(19, 10, None)));
        // Ran while the lock held fence 20, before its record was written: still leading.
        assert!(!seen.read(read(20, 20, None)));
        assert_eq!(fence(&seen), Some(20));
        // Ran after 20 was issued, and the lock held another fence (or none): over.
        assert!(seen.read(read(25, 0, None)));
        assert_eq!(fence(&seen), None);
    }
}
