//! Checking the options against each other and against the function, at compile time: what
//! dlock-core would reject at run time (a TTL out of range, a bad lock name) and combinations
//! that cannot mean what the user wants. The result is a [`Plan`] with every default filled in.
//!
//! Rejected combinations, each with the reason in its message:
//! * `max_hold` with `watchdog = false`: `max_hold` caps *renewal*; a fixed lease has none.
//! * `max_hold` not longer than `ttl`: the watchdog would never renew, so `max_hold` does
//!   nothing; drop it or shorten `ttl`.
//! * `on_busy = "skip"` with `wait = "forever"`: a call that waits forever is never busy.
//! * `on_lost = "signal"` without `guard`: the body is told through the lease, so it needs one.
//! * `guard` named like a parameter: it would hide that parameter inside the body.
//!
//! The options that choose the kind of lock (`mode`, `permits`, `of`) are checked in `kind.rs`.

use std::time::Duration;

use proc_macro2::Span;
use syn::ext::IdentExt;
use syn::{Expr, Ident, LitStr, Path};

use crate::args::{Args, Opt};
use crate::duration;
use crate::errors::{Checked, Errors, Problems};
use crate::item::{Function, Why};
use crate::kind::{LockKind, lock_kind};
use crate::limits::{MAX_LABEL_LEN, MAX_TTL, MIN_TTL, MIN_WATCHDOG_TTL, above_max_ttl};
use crate::template::{self, Segment};

/// How long to wait for the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wait {
    No,
    AtMost(Duration),
    Forever,
}

/// A value interpolated into the key: `root.members…`, spanned on the parameter.
pub(crate) struct KeyValue {
    /// The parameter (or `self`) with its span in the signature.
    pub(crate) root: Ident,
    pub(crate) members: Vec<String>,
    /// A reference parameter used whole: interpolated as `&*root`.
    pub(crate) deref: bool,
}

/// One piece of the key, resolved against the function.
pub(crate) enum KeyPiece {
    Text(String),
    Value(KeyValue),
}

/// Everything the expansion needs, validated and with defaults filled in.
pub(crate) struct Plan {
    pub(crate) kind: LockKind,
    pub(crate) key: Vec<KeyPiece>,
    pub(crate) ttl: Option<Duration>,
    pub(crate) watchdog: bool,
    pub(crate) max_hold: Option<Duration>,
    pub(crate) wait: Wait,
    pub(crate) skip: bool,
    pub(crate) signal: bool,
    pub(crate) reentrant: bool,
    pub(crate) label: String,
    pub(crate) client: Option<Expr>,
    pub(crate) krate: Path,
    pub(crate) guard: Option<Ident>,
}

/// Validates `args` for `function`; `None` if anything was reported to `errors`.
pub(crate) fn validate(args: &Args, function: &Function<'_>, errors: &mut Errors) -> Option<Plan> {
    let mut report = Report {
        errors,
        failed: false,
    };
    let kind = report.take_all(lock_kind(args));
    let key = report.take(resolve_key(
        args.key.as_ref(),
        args.given.contains("key"),
        "name the lock, e.g. `#[distributed_lock(key = \"order:{order_id}\")]`",
        function,
    ));
    let ttl = report.take(opt_duration(args.ttl.as_ref(), "ttl"));
    let max_hold = report.take(opt_duration(args.max_hold.as_ref(), "max_hold"));
    let wait = report.take(parse_wait(args.wait.as_ref()));
    let skip = report.take(choice(args.on_busy.as_ref(), "on_busy", ["error", "skip"]));
    let signal = report.take(choice(
        args.on_lost.as_ref(),
        "on_lost",
        ["cancel", "signal"],
    ));
    let label = report.take(label(
        args.label.as_ref(),
        function.item.sig.ident.unraw().to_string(),
        "omit it to use the function's name",
    ));
    let krate = report.take(crate_path(args.krate.as_ref(), "dlock_core", "my_dlock"));
    let watchdog = args.watchdog.as_ref().is_none_or(|w| w.value.value);
    if let (Some(ttl), Some(max_hold)) = (ttl, max_hold) {
        report.all(ranges(ttl, max_hold, watchdog, args));
    }
    let partial = Partial {
        args,
        watchdog,
        wait,
        skip,
        signal,
    };
    report.all(combinations(&partial, function));
    if report.failed {
        return None;
    }
    Some(Plan {
        kind: kind?,
        key: key.flatten()?,
        ttl: ttl?,
        watchdog,
        max_hold: max_hold?,
        wait: wait?,
        skip: skip?,
        signal: signal?,
        reentrant: args.reentrant.as_ref().is_none_or(|r| r.value.value),
        label: label?,
        client: args.client.as_ref().map(|c| c.value.clone()),
        krate: krate?,
        guard: args.guard.as_ref().map(|g| g.value.clone()),
    })
}

/// Records failed checks and remembers that one failed.
pub(crate) struct Report<'e> {
    pub(crate) errors: &'e mut Errors,
    pub(crate) failed: bool,
}

impl Report<'_> {
    pub(crate) fn all(&mut self, found: Vec<(Span, String)>) {
        for (span, message) in found {
            self.take::<()>(Err((span, message)));
        }
    }

    /// As [`Report::take`], for a check that finds several problems at once.
    pub(crate) fn take_all<T>(&mut self, checked: Result<T, Problems>) -> Option<T> {
        match checked {
            Ok(value) => Some(value),
            Err(found) => {
                self.all(found);
                None
            }
        }
    }

    pub(crate) fn take<T>(&mut self, checked: Checked<T>) -> Option<T> {
        match checked {
            Ok(value) => Some(value),
            Err((span, message)) => {
                self.errors.push(span, message);
                self.failed = true;
                None
            }
        }
    }
}

/// The key's pieces; `Ok(None)` when `key` was written (`given`) with a value that is not a
/// string literal (already reported by `args`: it is not missing too). `missing` says what to
/// write when it is missing.
pub(crate) fn resolve_key(
    key: Option<&Opt<LitStr>>,
    given: bool,
    missing: &str,
    function: &Function<'_>,
) -> Checked<Option<Vec<KeyPiece>>> {
    let Some(key) = key else {
        if given {
            return Ok(None);
        }
        return Err((Span::call_site(), format!("missing `key`: {missing}")));
    };
    let lit = &key.value;
    let template = lit.value();
    let segments = template::parse(&template).map_err(|e| (lit.span(), e.message(&template)))?;
    segments
        .into_iter()
        .map(|segment| match segment {
            Segment::Text(text) => Ok(KeyPiece::Text(text)),
            Segment::Placeholder(p) => {
                let (root, deref) = resolve_root(&p.root, function, lit.span())?;
                Ok(KeyPiece::Value(KeyValue {
                    root,
                    deref: deref && p.members.is_empty(),
                    members: p.members,
                }))
            }
        })
        .collect::<Checked<_>>()
        .map(Some)
}

/// The parameter a placeholder names, with its span in the signature. An error is spanned on
/// the key (`key`), or on the binding when the name is bound where a key cannot read it.
fn resolve_root(
    root: &str,
    function: &Function<'_>,
    key: Span,
) -> Result<(Ident, bool), (Span, String)> {
    if root == "self" {
        return function
            .receiver
            .map(|span| (Ident::new("self", span), false))
            .ok_or_else(|| {
                (
                    key,
                    "`{self…}` in `key` needs a method; this function has no `self` parameter \
                     (name one of its parameters instead)"
                        .to_owned(),
                )
            });
    }
    if let Some(param) = function.params.iter().find(|p| p.ident.unraw() == root) {
        return Ok((param.ident.clone(), param.is_ref));
    }
    if let Some(name) = function.unkeyable.iter().find(|u| u.ident.unraw() == root) {
        return Err(match name.why {
            Why::SliceRest => (
                name.ident.span(),
                format!(
                    "`{{{root}}}` in `key` names `{root} @ ..`, the rest of a slice pattern: a \
                     slice is not a key part; bind the elements the key needs (`[first, ..]`)"
                ),
            ),
            Why::AsyncTrait => (
                key,
                format!(
                    "`{{{root}}}` is bound by a parameter's pattern in an `#[async_trait]` \
                     method, which async-trait binds inside its body, after the key is built: \
                     bind the parameter to a name (`pair: (u32, u32)`) and key on its parts \
                     (`{{pair.0}}`), or use a native `async fn` in the trait"
                ),
            ),
        });
    }
    let mut available: Vec<String> = function
        .params
        .iter()
        .map(|p| format!("`{}`", p.ident))
        .collect();
    if function.receiver.is_some() {
        available.insert(0, "`self`".to_owned());
    }
    Err((
        key,
        if available.is_empty() {
            format!("unknown placeholder `{{{root}}}` in `key`: this function has no parameters")
        } else {
            format!(
                "unknown placeholder `{{{root}}}` in `key`; the parameters are {}",
                available.join(", ")
            )
        },
    ))
}

pub(crate) fn opt_duration(opt: Option<&Opt<LitStr>>, name: &str) -> Checked<Option<Duration>> {
    opt.map(|opt| {
        let text = opt.value.value();
        duration::parse(&text).map_err(|e| (opt.value.span(), e.message(name, &text)))
    })
    .transpose()
}

fn parse_wait(opt: Option<&Opt<LitStr>>) -> Checked<Wait> {
    match opt {
        None => Ok(Wait::No),
        Some(opt) if opt.value.value() == "forever" => Ok(Wait::Forever),
        Some(opt) => {
            let text = opt.value.value();
            match duration::parse(&text) {
                Ok(wait) => Ok(Wait::AtMost(wait)),
                Err(duration::DurationError::Zero) => Err((
                    opt.value.span(),
                    format!("`wait = {text:?}` is zero; to try once without waiting, omit `wait`"),
                )),
                Err(e) => Err((opt.value.span(), e.message("wait", &text))),
            }
        }
    }
}

/// `false` for the first choice (the default), `true` for the second.
pub(crate) fn choice(opt: Option<&Opt<LitStr>>, name: &str, choices: [&str; 2]) -> Checked<bool> {
    let Some(opt) = opt else {
        return Ok(false);
    };
    let value = opt.value.value();
    match choices.iter().position(|c| *c == value) {
        Some(i) => Ok(i == 1),
        None => Err((
            opt.value.span(),
            format!(
                "unknown value {value:?} for `{name}`; use `{name} = \"{}\"` (the default) or \
                 `{name} = \"{}\"`",
                choices[0], choices[1]
            ),
        )),
    }
}

/// `label = "…"`, or `default`; `omit` says what omitting it does (for an empty one).
pub(crate) fn label(opt: Option<&Opt<LitStr>>, default: String, omit: &str) -> Checked<String> {
    let Some(opt) = opt else {
        return Ok(default);
    };
    let label = opt.value.value();
    let span = opt.value.span();
    if label.is_empty() {
        return Err((span, format!("empty `label`; {omit}")));
    }
    if label.len() > MAX_LABEL_LEN {
        return Err((
            span,
            format!(
                "`label` is {} bytes long; the limit is {MAX_LABEL_LEN}",
                label.len()
            ),
        ));
    }
    if let Some(c) = label.chars().find(|c| c.is_control()) {
        return Err((
            span,
            format!("`label` contains the control character {c:?}; use printable text"),
        ));
    }
    Ok(label)
}

/// `crate = "path"`, or `::krate` (e.g. `dlock_core`) by default; `example` is a renamed one.
pub(crate) fn crate_path(opt: Option<&Opt<LitStr>>, krate: &str, example: &str) -> Checked<Path> {
    let Some(opt) = opt else {
        let krate = Ident::new(krate, Span::call_site());
        return Ok(syn::parse_quote!(::#krate));
    };
    opt.value.parse::<Path>().map_err(|_| {
        (
            opt.value.span(),
            format!(
                "`crate = {:?}` is not a path; name the crate {} was renamed to, e.g. \
                 `crate = \"{example}\"` or `crate = \"::deps::{krate}\"`",
                opt.value.value(),
                krate.replace('_', "-"),
            ),
        )
    })
}

/// Range checks of the durations that dlock-core enforces at run time. The messages quote the
/// limits as written in the grammar; `limits::tests::limits_match_dlock_core` keeps them in step.
fn ranges(
    ttl: Option<Duration>,
    max_hold: Option<Duration>,
    watchdog: bool,
    args: &Args,
) -> Vec<(Span, String)> {
    let mut found = Vec::new();
    if let (Some(ttl), Some(opt)) = (ttl, &args.ttl) {
        let text = opt.value.value();
        if ttl < MIN_TTL {
            found.push((
                opt.value.span(),
                format!("`ttl = {text:?}` is below the shortest lease, 10ms (dlock_core::MIN_TTL)"),
            ));
        } else if watchdog && ttl < MIN_WATCHDOG_TTL {
            found.push((
                opt.value.span(),
                format!(
                    "`ttl = {text:?}` is below the shortest lease the watchdog can keep, 100ms \
                     (dlock_core::MIN_WATCHDOG_TTL); use a longer ttl, or `watchdog = false` \
                     for a fixed lease"
                ),
            ));
        } else if ttl > MAX_TTL {
            found.push((opt.value.span(), above_max_ttl("ttl", &text)));
        }
    }
    if let (Some(max_hold), Some(opt)) = (max_hold, &args.max_hold) {
        let text = opt.value.value();
        if max_hold < MIN_WATCHDOG_TTL {
            found.push((
                opt.value.span(),
                format!(
                    "`max_hold = {text:?}` is below the shortest lease the watchdog can keep, \
                     100ms (dlock_core::MIN_WATCHDOG_TTL)"
                ),
            ));
        } else if let (Some(ttl), Some(ttl_opt)) = (ttl, &args.ttl)
            && max_hold <= ttl
        {
            found.push((
                opt.value.span(),
                format!(
                    "`max_hold = {text:?}` is not longer than `ttl = {:?}`: the lease would never \
                     be renewed, so `max_hold` does nothing; remove it or shorten `ttl`",
                    ttl_opt.value.value()
                ),
            ));
        }
    }
    found
}

/// Combinations that cannot mean what the user wants (see the module docs).
fn combinations(plan: &Partial<'_>, function: &Function<'_>) -> Vec<(Span, String)> {
    let args = plan.args;
    let mut found = Vec::new();
    if let (false, Some(max_hold)) = (plan.watchdog, &args.max_hold) {
        found.push((
            max_hold.span,
            "`max_hold` caps the watchdog's renewals, but there is no watchdog \
             (`watchdog = false`); remove `max_hold` or `watchdog = false`"
                .to_owned(),
        ));
    }
    if let (Some(true), Some(Wait::Forever), Some(opt)) = (plan.skip, plan.wait, &args.on_busy) {
        found.push((
            opt.value.span(),
            "`on_busy = \"skip\"` never applies with `wait = \"forever\"` (the call waits \
             until it gets the lock); give `wait` a limit or remove `on_busy`"
                .to_owned(),
        ));
    }
    if let (Some(true), None, Some(opt)) = (plan.signal, &args.guard, &args.on_lost) {
        found.push((
            opt.value.span(),
            "`on_lost = \"signal\"` lets the body react to a lost lease itself, but the body \
             cannot see the lease; add `guard = lease` and watch `lease.lost()` or \
             `lease.cancellation_token()`"
                .to_owned(),
        ));
    }
    if let Some(guard) = &args.guard
        && function.params.iter().any(|p| p.ident == guard.value)
    {
        found.push((
            guard.value.span(),
            format!(
                "`guard = {}` would hide the parameter of that name inside the body; choose \
                 another name",
                guard.value
            ),
        ));
    }
    found
}

/// The options the combination checks look at.
struct Partial<'a> {
    args: &'a Args,
    watchdog: bool,
    wait: Option<Wait>,
    skip: Option<bool>,
    signal: Option<bool>,
}
