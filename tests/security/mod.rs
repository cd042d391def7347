//! Security: a least-privilege ACL user, refused log-ins, TLS (and mutual TLS), and secrets
//! that never leak into logs or `Debug` output.
//!
//! Run alone with `make test-security` (filter `security::`; tests/README.md).

pub(crate) mod acl;
mod authentication;
mod secrets;
mod tls;
