//! Which lock the body runs under: the mutex (the default), a hold of a read-write lock
//! (`mode = "read" | "write"`), or permits of a semaphore (`permits = N, of = LIMIT`); and the
//! options that mean nothing for that kind. Kept apart from `validate.rs`, which checks the
//! options every kind shares.
//!
//! Rejected, each with the fix in its message:
//! * a `mode` other than `"read"` / `"write"` (with a suggestion for a near miss);
//! * `permits` without `of` and `of` without `permits`: the semaphore's size is part of its
//!   identity in Redis (the first holder stores it), so it is written next to the request;
//! * `mode` with `permits` / `of`: one function runs under one lock;
//! * `permits = 0`, `of = 0`, `permits` above `of` (such a call could never run), and values
//!   beyond `u32`;
//! * `reentrant` on a semaphore: every call takes permits of its own, also one nested in
//!   another's body, so there is nothing to re-enter.

use syn::LitInt;

use crate::args::{Args, Opt, distance};
use crate::errors::{Checked, Problems};

/// The lock a function runs under, checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LockKind {
    Mutex,
    Read,
    Write,
    Semaphore { permits: u32, of: u32 },
}

/// The lock `args` ask for, or every problem with the options that choose it.
pub(crate) fn lock_kind(args: &Args) -> Result<LockKind, Problems> {
    let mut found = Vec::new();
    let mode = args
        .mode
        .as_ref()
        .map(mode)
        .transpose()
        .unwrap_or_else(|e| {
            found.push(e);
            None
        });
    let semaphore = semaphore(args).unwrap_or_else(|mut e| {
        found.append(&mut e);
        None
    });
    if let Some(mode_opt) = &args.mode
        && (args.given.contains("permits") || args.given.contains("of"))
    {
        found.push((
            mode_opt.span,
            "`mode` chooses a hold of a read-write lock and `permits`/`of` a semaphore; one \
             function runs under one lock: remove `mode` for the semaphore, or `permits` and \
             `of` for the read-write lock"
                .to_owned(),
        ));
    }
    if let (true, Some(reentrant)) = (is_semaphore(args), &args.reentrant) {
        found.push((
            reentrant.span,
            "`reentrant` does not apply to a semaphore: every call takes permits of its own, \
             also one nested in another's body (it waits for free permits like any other \
             call); remove `reentrant`"
                .to_owned(),
        ));
    }
    if !found.is_empty() {
        return Err(found);
    }
    Ok(match (mode, semaphore) {
        (Some(kind), _) => kind,
        (None, Some((permits, of))) => LockKind::Semaphore { permits, of },
        (None, None) => LockKind::Mutex,
    })
}

/// Whether the options ask for a semaphore, whatever their values.
fn is_semaphore(args: &Args) -> bool {
    args.mode.is_none() && (args.given.contains("permits") || args.given.contains("of"))
}

/// `mode = "read" | "write"`.
fn mode(opt: &Opt<syn::LitStr>) -> Checked<LockKind> {
    let value = opt.value.value();
    match value.as_str() {
        "read" => return Ok(LockKind::Read),
        "write" => return Ok(LockKind::Write),
        _ => {}
    }
    let choices = "`mode` takes \"read\" (beside other readers) or \"write\" (alone); without \
                   `mode` the lock is a mutex";
    let message = match near_mode(&value) {
        Some(near) => {
            format!("unknown mode {value:?}; did you mean `mode = \"{near}\"`? {choices}")
        }
        None => format!("unknown mode {value:?}; {choices}"),
    };
    Err((opt.value.span(), message))
}

/// The mode a misspelt or synonymous value most likely means.
fn near_mode(value: &str) -> Option<&'static str> {
    let value = value.to_lowercase();
    match value.as_str() {
        "shared" | "reader" | "r" => return Some("read"),
        "exclusive" | "writer" | "w" => return Some("write"),
        _ => {}
    }
    ["read", "write"]
        .into_iter()
        .find(|mode| distance(mode, &value) <= 2)
}

/// `permits = N, of = LIMIT`: `Ok(None)` for neither, and for one whose value did not parse
/// (already reported by `args`: it is not missing too).
fn semaphore(args: &Args) -> Result<Option<(u32, u32)>, Problems> {
    let (permits, of) = (args.permits.as_ref(), args.of.as_ref());
    let mut found = Vec::new();
    let mut number = |opt: &Opt<LitInt>, name: &str| match count(opt, name) {
        Ok(n) => Some(n),
        Err(e) => {
            found.push(e);
            None
        }
    };
    let permits_n = permits.and_then(|opt| number(opt, "permits"));
    let of_n = of.and_then(|opt| number(opt, "of"));
    match (permits, of) {
        (Some(opt), None) if !args.given.contains("of") => found.push((
            opt.span,
            format!(
                "`permits = {}` needs the semaphore's size: add `of = LIMIT`, the number of \
                 permits it has, e.g. `permits = {0}, of = 4`",
                opt.value
            ),
        )),
        (None, Some(opt)) if !args.given.contains("permits") => found.push((
            opt.span,
            format!(
                "`of = {}` needs the permits one call takes: add `permits = N`, e.g. \
                 `permits = 1, of = {0}`",
                opt.value
            ),
        )),
        _ => {}
    }
    if let (Some(opt), Some(p), Some(o)) = (permits, permits_n, of_n)
        && p > o
    {
        found.push((
            opt.value.span(),
            format!(
                "`permits = {p}` is more than the semaphore has (`of = {o}`): the call could \
                 never run; take at most {o} or raise `of`"
            ),
        ));
    }
    if !found.is_empty() {
        return Err(found);
    }
    Ok(permits_n.zip(of_n))
}

/// A count of permits: a whole number from 1 to `u32::MAX`.
fn count(opt: &Opt<LitInt>, name: &str) -> Checked<u32> {
    let lit = &opt.value;
    let zero = match name {
        "permits" => {
            "`permits = 0` takes nothing, so it would guard nothing; a call takes at \
                      least 1 permit (`permits = 1`)"
        }
        _ => {
            "`of = 0` is a semaphore without permits: no call could ever run; give it at \
              least 1 (`of = 1` admits one call at a time)"
        }
    };
    match lit.base10_parse::<u32>() {
        Ok(0) => Err((lit.span(), zero.to_owned())),
        Ok(n) => Ok(n),
        Err(_) => Err((
            lit.span(),
            format!(
                "`{name} = {lit}` is above the largest count, {} (`u32::MAX`); use a smaller \
                 number",
                u32::MAX
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::parse;
    use crate::errors::Errors;
    use proc_macro2::TokenStream;
    use quote::quote;

    fn kind(tokens: TokenStream) -> Result<LockKind, String> {
        let mut errors = Errors::default();
        let args: Args = parse(tokens, &mut errors);
        assert!(errors.is_empty(), "the options parse");
        lock_kind(&args).map_err(|found| {
            found
                .into_iter()
                .map(|(_, message)| message)
                .collect::<Vec<_>>()
                .join("\n")
        })
    }

    #[test]
    fn each_kind_from_its_options() {
        assert_eq!(kind(quote!(key = "k")), Ok(LockKind::Mutex));
        assert_eq!(kind(quote!(mode = "read")), Ok(LockKind::Read));
        assert_eq!(kind(quote!(mode = "write")), Ok(LockKind::Write));
        assert_eq!(
            kind(quote!(permits = 2, of = 5)),
            Ok(LockKind::Semaphore { permits: 2, of: 5 })
        );
        assert_eq!(
            kind(quote!(of = 3, permits = 3)),
            Ok(LockKind::Semaphore { permits: 3, of: 3 })
        );
    }

    #[test]
    fn modes_suggest_the_near_one() {
        let err = kind(quote!(mode = "reed")).unwrap_err();
        assert!(err.contains("did you mean `mode = \"read\"`?"), "{err}");
        let err = kind(quote!(mode = "Writer")).unwrap_err();
        assert!(err.contains("did you mean `mode = \"write\"`?"), "{err}");
        let err = kind(quote!(mode = "exclusive")).unwrap_err();
        assert!(err.contains("`mode = \"write\"`"), "{err}");
        let err = kind(quote!(mode = "mutex")).unwrap_err();
        assert!(!err.contains("did you mean"), "{err}");
        assert!(err.contains("without `mode` the lock is a mutex"), "{err}");
    }

    #[test]
    fn every_misuse_is_reported_at_once() {
        let err = kind(quote!(mode = "raed", permits = 0, of = 0, reentrant = true)).unwrap_err();
        assert!(err.contains("unknown mode"), "{err}");
        assert!(err.contains("`permits = 0` takes nothing"), "{err}");
        assert!(
            err.contains("`of = 0` is a semaphore without permits"),
            "{err}"
        );
        assert!(err.contains("one function runs under one lock"), "{err}");
        // With `mode` the options are not a semaphore's: `reentrant` is not blamed.
        assert!(!err.contains("`reentrant` does not apply"), "{err}");
    }

    #[test]
    fn semaphore_counts() {
        let err = kind(quote!(permits = 3, of = 2)).unwrap_err();
        assert!(
            err.contains("`permits = 3` is more than the semaphore has"),
            "{err}"
        );
        let err = kind(quote!(permits = 1)).unwrap_err();
        assert!(err.contains("add `of = LIMIT`"), "{err}");
        let err = kind(quote!(of = 4)).unwrap_err();
        assert!(err.contains("add `permits = N`"), "{err}");
        let err = kind(quote!(permits = 1, of = 4294967296)).unwrap_err();
        assert!(err.contains("above the largest count, 4294967295"), "{err}");
        let err = kind(quote!(permits = 1, of = 2, reentrant = false)).unwrap_err();
        assert!(
            err.contains("`reentrant` does not apply to a semaphore"),
            "{err}"
        );
        assert_eq!(
            kind(quote!(permits = 1, of = 4294967295)),
            Ok(LockKind::Semaphore {
                permits: 1,
                of: u32::MAX
            })
        );
    }

    #[test]
    fn a_value_that_did_not_parse_is_not_also_missing() {
        let mut errors = Errors::default();
        let args: Args = parse(quote!(permits = "1", of = 4), &mut errors);
        assert!(
            !errors.is_empty(),
            "`permits = \"1\"` is reported by the parser"
        );
        assert!(
            matches!(lock_kind(&args), Ok(LockKind::Mutex)),
            "and `of` is not reported"
        );
    }
}
