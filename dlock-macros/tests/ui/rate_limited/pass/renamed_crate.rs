//! `crate = "…"` when dlock-core is reached through another path; the error type is the
//! user's own, converted with `From<dlock_core::Error>`.
#![deny(warnings)]

mod deps {
    pub use dlock_core as locks;
}

#[derive(Debug)]
pub enum ApiError {
    Limited(Option<std::time::Duration>),
    Other(dlock_core::Error),
}

impl From<dlock_core::Error> for ApiError {
    fn from(e: dlock_core::Error) -> Self {
        if e.is_rate_limited() {
            ApiError::Limited(e.retry_after())
        } else {
            ApiError::Other(e)
        }
    }
}

#[deps::locks::rate_limited(key = "k:{id}", rate = "3/h", crate = "deps::locks")]
pub async fn limited(id: u32) -> Result<u32, ApiError> {
    Ok(id)
}

fn main() {
    let _ = limited(1);
}
