//! The subjects a run can measure ([`Kind`]), which of them a run measures by default, what each
//! is compared with, and [`with_subject!`], which turns a `Kind` into its
//! [`Subject`](crate::subject::Subject) type for generic workload code. A new subject (a peer
//! library, a floor with other connection settings) is its own file plus one line in `Kind`, one
//! in `Kind::ALL` and one in `with_subject!` (and in `Kind::DEFAULT` and `Kind::compared_with` if
//! it runs by default and is compared).

use serde::{Deserialize, Serialize};

use crate::redis_stats::Plain;
use crate::rt::BoxError;
// The trait whose constants `with_subject!` reads.
use crate::subject::Subject as _;

/// Which subject: the identity of a row in every table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Kind {
    /// The raw floor on the `redis` crate's default connection settings (rslock's).
    Floor,
    /// The raw floor on dlock's connection settings today (RESP3, `TCP_NODELAY`).
    FloorNodelay,
    /// rslock, pinned.
    Rslock,
    /// dlock with default options.
    Dlock,
    /// dlock, `ClientBuilder::tcp_nodelay(true)`.
    DlockNodelay,
    /// dlock, `ClientBuilder::tcp_nodelay(false)`.
    DlockNagle,
    /// dlock, `MutexOptions::fenced()`.
    DlockFenced,
}

/// Runs `$body` with `$S` bound to the [`Subject`](crate::subject::Subject) type of `$kind`.
macro_rules! with_subject {
    ($kind:expr, $S:ident => $body:expr) => {
        match $kind {
            $crate::subjects::Kind::Floor => {
                type $S = $crate::floor::Floor<$crate::floor::Defaults>;
                $body
            }
            $crate::subjects::Kind::FloorNodelay => {
                type $S = $crate::floor::Floor<$crate::floor::Nodelay>;
                $body
            }
            $crate::subjects::Kind::Rslock => {
                type $S = $crate::rslock::Rslock;
                $body
            }
            $crate::subjects::Kind::Dlock => {
                type $S = $crate::dlock::Dlock<$crate::dlock::Defaults>;
                $body
            }
            $crate::subjects::Kind::DlockNodelay => {
                type $S = $crate::dlock::Dlock<$crate::dlock::Nodelay>;
                $body
            }
            $crate::subjects::Kind::DlockNagle => {
                type $S = $crate::dlock::Dlock<$crate::dlock::Nagle>;
                $body
            }
            $crate::subjects::Kind::DlockFenced => {
                type $S = $crate::dlock::Dlock<$crate::dlock::Fenced>;
                $body
            }
        }
    };
}
pub(crate) use with_subject;

impl Kind {
    /// Every subject, in row order.
    pub(crate) const ALL: [Kind; 7] = [
        Kind::Floor,
        Kind::FloorNodelay,
        Kind::Rslock,
        Kind::Dlock,
        Kind::DlockNodelay,
        Kind::DlockNagle,
        Kind::DlockFenced,
    ];
    /// The subjects of a run unless `--subjects` says otherwise: the two floors, rslock, dlock
    /// with default options (Nagle on), dlock with `TCP_NODELAY`, so that every run shows what
    /// the connection setting trades, and dlock with `fenced()`, the way for holders that always
    /// use their fence (W2-fence's second aim).
    pub(crate) const DEFAULT: [Kind; 6] = [
        Kind::Floor,
        Kind::FloorNodelay,
        Kind::Rslock,
        Kind::Dlock,
        Kind::DlockNodelay,
        Kind::DlockFenced,
    ];
    /// The floor issue #13's targets are ratios to: the `redis` crate's default settings, the
    /// connection rslock runs on.
    pub(crate) const REFERENCE: Kind = Kind::Floor;
    /// The subject the targets are about.
    pub(crate) const UNDER_TEST: Kind = Kind::Dlock;

    /// Row label in the report.
    pub(crate) fn label(self) -> &'static str {
        with_subject!(self, S => S::LABEL)
    }

    /// Name on the command line (`--subject NAME`) and in results.json.
    pub(crate) fn name(self) -> &'static str {
        with_subject!(self, S => S::NAME)
    }

    /// Whether the subject waits for a held lock (runs W3).
    pub(crate) fn waits(self) -> bool {
        with_subject!(self, S => S::WAITS)
    }

    /// Whether a holder can read a fencing token (runs W2-fence).
    pub(crate) fn fences(self) -> bool {
        with_subject!(self, S => S::FENCES)
    }

    /// Whether this is one of the raw floors.
    pub(crate) fn is_floor(self) -> bool {
        matches!(self, Kind::Floor | Kind::FloorNodelay)
    }

    /// The plain commands only the subject's client sends ([`Subject::OWN_PLAIN`]).
    ///
    /// [`Subject::OWN_PLAIN`]: crate::subject::Subject::OWN_PLAIN
    pub(crate) fn own_plain(self) -> Plain {
        with_subject!(self, S => S::OWN_PLAIN)
    }

    /// The subjects this one's figures are divided by in the ratio table, in column order:
    /// every dlock variant by both floors and by rslock; rslock and the `TCP_NODELAY` floor by
    /// the default-settings floor (the like-for-like pairs, and what `TCP_NODELAY` alone does).
    pub(crate) fn compared_with(self) -> &'static [Kind] {
        match self {
            Kind::Floor => &[],
            Kind::FloorNodelay | Kind::Rslock => &[Kind::Floor],
            Kind::Dlock | Kind::DlockNodelay | Kind::DlockNagle | Kind::DlockFenced => {
                &[Kind::Floor, Kind::FloorNodelay, Kind::Rslock]
            }
        }
    }

    /// The subject named `name` on the command line.
    pub(crate) fn parse(name: &str) -> Result<Kind, BoxError> {
        Kind::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
                format!("unknown subject `{name}`; use {}", names.join(", ")).into()
            })
    }

    /// The subjects of a comma-separated list (`--subjects`), in [`Kind::ALL`] order.
    pub(crate) fn parse_list(list: &str) -> Result<Vec<Kind>, BoxError> {
        let named = list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(Kind::parse)
            .collect::<Result<Vec<_>, _>>()?;
        if named.is_empty() {
            return Err("--subjects needs at least one subject".into());
        }
        Ok(Kind::ALL
            .into_iter()
            .filter(|k| named.contains(k))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_parse_back() {
        for kind in Kind::ALL {
            assert_eq!(Kind::parse(kind.name()).unwrap(), kind);
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.name()));
        }
        assert!(Kind::parse("redlock").is_err());
    }

    #[test]
    fn lists_keep_row_order() {
        let kinds = Kind::parse_list("dlock, floor,rslock").unwrap();
        assert_eq!(kinds, [Kind::Floor, Kind::Rslock, Kind::Dlock]);
        let default = Kind::DEFAULT.map(Kind::name).join(",");
        assert_eq!(Kind::parse_list(&default).unwrap(), Kind::DEFAULT);
        assert!(Kind::parse_list(",").is_err());
    }

    #[test]
    fn every_dlock_variant_is_compared_with_both_floors_and_rslock() {
        assert!(Kind::REFERENCE.compared_with().is_empty());
        for kind in Kind::ALL.into_iter().filter(|k| k.fences()) {
            assert_eq!(
                kind.compared_with(),
                [Kind::Floor, Kind::FloorNodelay, Kind::Rslock]
            );
        }
    }
}

/// What every workload is given: the server the benchmark started, the sizes of the run, and
/// the subjects of the pair and contention workloads.
#[derive(Clone, Debug)]
pub(crate) struct Setting {
    pub(crate) url: String,
    /// redis-server's process id (W1 1-CPU pins it).
    pub(crate) server_pid: u32,
    pub(crate) counts: crate::spec::Counts,
    /// The subjects of W1, W2 and W3, in row order (`--subjects`).
    pub(crate) subjects: Vec<Kind>,
}
