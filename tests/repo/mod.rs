//! The repository's own promises: the README's programs run as written, the Makefile's
//! entry points, and the test kit's faults held to dlock's key layout.
//!
//! Run alone with `make test-repo` (filter `repo::`; tests/README.md).

mod makefile;
mod readme;
mod scripts_table;
mod testkit_faults;
