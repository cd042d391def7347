//! The scheduler (dlock-scheduler): replicas in separate processes, exactly-once and
//! at-least-once runs, groups, one-off and run-time schedules, the registry, control,
//! outages, stalls, shutdown, and the dashboard (over HTTP and in a real browser).
//!
//! Run alone with `make test-scheduler` (filter `scheduler::`; tests/README.md).

mod dashboard;
mod dashboard_browser;
mod scheduler_control;
mod scheduler_crash;
mod scheduler_debounce;
mod scheduler_exactly_once;
mod scheduler_group;
mod scheduler_group_spread;
mod scheduler_oneoff;
mod scheduler_operator;
mod scheduler_outage;
mod scheduler_records;
mod scheduler_registry;
mod scheduler_retry;
mod scheduler_runtime;
mod scheduler_share;
mod scheduler_shutdown;
mod scheduler_stall;
mod scheduler_trace;
