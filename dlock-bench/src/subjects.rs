//! The list of subjects a run measures ([`Kind`]) and [`with_subject!`], which turns a `Kind`
//! into its [`Subject`](crate::subject::Subject) type for generic workload code. A new subject
//! (a peer library, a floor with other connection settings) is its own file plus one line in
//! `Kind`, one in `Kind::ALL` and one in `with_subject!`.

use serde::{Deserialize, Serialize};

use crate::rt::BoxError;
// The trait whose constants `with_subject!` reads.
use crate::subject::Subject as _;

/// Which subject: the identity of a row in every table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Kind {
    Floor,
    Dlock,
}

/// Runs `$body` with `$S` bound to the [`Subject`](crate::subject::Subject) type of `$kind`.
macro_rules! with_subject {
    ($kind:expr, $S:ident => $body:expr) => {
        match $kind {
            $crate::subjects::Kind::Floor => {
                type $S = $crate::floor::Floor;
                $body
            }
            $crate::subjects::Kind::Dlock => {
                type $S = $crate::dlock::Dlock;
                $body
            }
        }
    };
}
pub(crate) use with_subject;

impl Kind {
    /// Every subject, in row order.
    pub(crate) const ALL: [Kind; 2] = [Kind::Floor, Kind::Dlock];
    /// The subject every ratio is taken to.
    pub(crate) const REFERENCE: Kind = Kind::Floor;
    /// The subject the targets are about.
    pub(crate) const UNDER_TEST: Kind = Kind::Dlock;

    /// Row label in the report.
    pub(crate) fn label(self) -> &'static str {
        with_subject!(self, S => S::LABEL)
    }

    /// Name on the command line (`--subject NAME`).
    pub(crate) fn name(self) -> &'static str {
        with_subject!(self, S => S::NAME)
    }

    /// Whether the subject waits for a held lock (runs W3).
    pub(crate) fn waits(self) -> bool {
        with_subject!(self, S => S::WAITS)
    }

    /// The subject named `name` on the command line.
    pub(crate) fn parse(name: &str) -> Result<Kind, BoxError> {
        Kind::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| format!("unknown subject `{name}`").into())
    }
}
