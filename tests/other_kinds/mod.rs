//! The kinds with an algorithm of their own (not a queued lock): leader election, the quorum
//! lock (Redlock over independent masters), the rate limiter (GCRA), dlock-tower's
//! single-flight across processes.
//!
//! Run alone with `make test-other_kinds` (filter `other_kinds::`; tests/README.md).

mod election;
mod quorum;
mod rate_limiter;
mod single_flight;
