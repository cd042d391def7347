//! Attribute macros for dlock. The macros arrive with their own issue; this crate is a placeholder
//! so the workspace layout is in place.
