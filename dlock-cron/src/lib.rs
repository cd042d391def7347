//! Cron expressions in IANA time zones, with one written daylight-saving rule — the calendar of
//! dlock's scheduler.
//!
//! A crate of its own so that one parser serves both sides: `dlock-scheduler` computes
//! occurrences with it at run time, and `dlock-macros` checks `#[scheduled(cron = …, tz = …)]`
//! with it at compile time, so a schedule the macro accepts is exactly one the scheduler runs.
//! Most users reach it through `dlock-scheduler`, which re-exports everything here.
//!
//! Everything is deterministic (no clock reads, no randomness, no dependence on the machine's
//! own time zone): every replica computes the same occurrences.
//!
//! ```
//! use chrono::{TimeZone, Utc};
//! use dlock_cron::Schedule;
//!
//! let noon = Schedule::new("0 12 * * *", "Europe/Berlin")?;
//! let after = Utc.with_ymd_and_hms(2026, 6, 1, 0, 0, 0).unwrap();
//! // Noon in Berlin is 10:00 UTC in summer.
//! assert_eq!(noon.next_after(after), Some(Utc.with_ymd_and_hms(2026, 6, 1, 10, 0, 0).unwrap()));
//! assert!(Schedule::new("0 12 * *", "UTC").is_err()); // 4 fields
//! # Ok::<(), dlock_cron::ScheduleError>(())
//! ```
//!
//! # Layout
//!
//! | module | what |
//! |---|---|
//! | `schedule` | [`Schedule`]: next / previous occurrence as a UTC instant; the DST rule |
//! | `fields` | cron syntax checks in front of croner, with messages naming the field |
//! | `tz` | time-zone names: IANA only, never fixed offsets |
//! | `error` | [`ScheduleError`] and [`ScheduleErrorKind`] |

mod error;
mod fields;
mod schedule;
mod tz;

pub use error::{ScheduleError, ScheduleErrorKind};
pub use schedule::{Occurrences, Schedule};

/// The `chrono` version this crate's API uses, re-exported.
pub use chrono;
/// The `chrono-tz` version this crate's API uses, re-exported.
pub use chrono_tz;
