//! Distributed cron on dlock. The scheduler arrives with its own issue; this crate is a placeholder
//! so the workspace layout is in place.
