//! Checking `#[rate_limited]`'s options at compile time: what dlock-core would reject at run
//! time (a rate of zero, a burst of zero, a cost above the burst, a rate finer than the
//! limiter's microsecond) and combinations that cannot mean what the user wants. The result is
//! a [`Plan`] with every default filled in.
//!
//! Rejected combinations, each with the reason in its message:
//! * `wait` without `on_limited = "wait"`: a limited call fails at once, so the wait would never
//!   be used.
//! * `on_limited = "wait"` without `wait`: every wait is bounded, so that a backlog cannot
//!   hold requests without limit.
//! * `cost` above `burst`: such a call could never conform.

use std::time::Duration;

use proc_macro2::Span;
use syn::{Expr, LitStr, Path};

use crate::duration;
use crate::errors::{Checked, Errors};
use crate::item::Function;
use crate::rate_limited::args::RateArgs;
use crate::validate::{KeyPiece, Report, choice, crate_path, label, resolve_key};

/// Everything the expansion needs, validated and with defaults filled in.
pub(crate) struct Plan {
    pub(crate) key: Vec<KeyPiece>,
    /// `count` cells per `per`.
    pub(crate) count: u32,
    pub(crate) per: Duration,
    pub(crate) burst: u32,
    pub(crate) cost: u32,
    /// `Some` with `on_limited = "wait"`: the longest wait for a slot.
    pub(crate) wait: Option<Duration>,
    pub(crate) fail_open: bool,
    pub(crate) label: String,
    pub(crate) client: Option<Expr>,
    pub(crate) krate: Path,
}

/// Validates `args` for `function`; `None` if anything was reported to `errors`.
pub(crate) fn validate(
    args: &RateArgs,
    function: &Function<'_>,
    errors: &mut Errors,
) -> Option<Plan> {
    let mut report = Report {
        errors,
        failed: false,
    };
    let key = report.take(resolve_key(
        args.key.as_ref(),
        args.given.contains("key"),
        "name the budget, e.g. `#[rate_limited(key = \"user:{user_id}\", rate = \"100/s\")]` \
         (a fixed name such as \"partner-api\" is one budget for every call)",
        function,
    ));
    let rate = report.take(rate(args));
    let burst = report.take(whole(args.burst.as_ref(), "burst"));
    let cost = report.take(whole(args.cost.as_ref(), "cost"));
    let waits = report.take(choice(
        args.on_limited.as_ref(),
        "on_limited",
        ["error", "wait"],
    ));
    let wait = report.take(wait(args, waits));
    let default_label = args
        .key
        .as_ref()
        .map(|key| key.value.value())
        .unwrap_or_default();
    let label = report.take(label(
        args.label.as_ref(),
        default_label,
        "omit it to count under the key template",
    ));
    let krate = report.take(crate_path(args.krate.as_ref(), "dlock_core", "my_dlock"));
    let (count, per) = rate.flatten()?;
    let burst = burst.flatten().unwrap_or(count);
    let cost = cost.flatten().unwrap_or(1);
    if let Some(opt) = &args.cost
        && cost > burst
    {
        let burst_is = match &args.burst {
            Some(_) => format!("`burst = {burst}`"),
            None => format!("the burst, which is the rate's count ({burst}) unless given"),
        };
        report.take::<()>(Err((
            opt.value.span(),
            format!(
                "`cost = {cost}` is above {burst_is}: such a call could never conform; raise \
                 `burst` or lower `cost`"
            ),
        )));
    }
    if report.failed {
        return None;
    }
    Some(Plan {
        key: key.flatten()?,
        count,
        per,
        burst,
        cost,
        wait: wait?,
        fail_open: args.fail_open.as_ref().is_some_and(|f| f.value.value),
        label: label?,
        client: args.client.as_ref().map(|c| c.value.clone()),
        krate: krate?,
    })
}

/// `rate = "N/period"`: `Ok(None)` when it was written with a value that is not a string
/// (already reported).
fn rate(args: &RateArgs) -> Checked<Option<(u32, Duration)>> {
    let Some(opt) = &args.rate else {
        if args.given.contains("rate") {
            return Ok(None);
        }
        return Err((
            Span::call_site(),
            "missing `rate`: give the budget as a count per period, e.g. `rate = \"100/s\"`, \
             `rate = \"6000/m\"` or `rate = \"5/10s\"`"
                .to_owned(),
        ));
    };
    parse_rate(&opt.value).map(Some)
}

/// The rate grammar: `count "/" period`, where the period is a unit alone (`s` is `1s`) or a
/// duration of the duration grammar (`10s`, `1h30m`).
fn parse_rate(lit: &LitStr) -> Checked<(u32, Duration)> {
    let text = lit.value();
    let at = format!("`rate = {text:?}`");
    let fail = |message: String| Err((lit.span(), message));
    if text.chars().any(char::is_whitespace) {
        return fail(format!(
            "spaces are not allowed in {at}; write it together, e.g. \"100/s\""
        ));
    }
    let Some((count, period)) = text.split_once('/') else {
        return fail(format!(
            "{at} has no period; write a count per period, e.g. \"100/s\", \"6000/m\" or \
             \"5/10s\""
        ));
    };
    let count = match count.parse::<u64>() {
        Ok(0) => {
            return fail(format!(
                "{at} admits nothing; give at least 1 per period, e.g. \"1/s\""
            ));
        }
        Ok(n) => match u32::try_from(n) {
            Ok(n) => n,
            Err(_) => {
                return fail(format!(
                    "the count in {at} is above the largest, {} (`u32::MAX`); count per a \
                     shorter period",
                    u32::MAX
                ));
            }
        },
        Err(_) => {
            return fail(format!(
                "the count in {at} is not a whole number; write e.g. \"100/s\""
            ));
        }
    };
    let per = match period {
        "ms" | "s" | "m" | "h" | "d" => duration::parse(&format!("1{period}")),
        _ => duration::parse(period),
    };
    let per = match per {
        Ok(per) => per,
        Err(_) => {
            let hint = match period {
                "sec" | "second" => " (write `s`)",
                "min" | "minute" => " (write `m`)",
                "hour" => " (write `h`)",
                "day" => " (write `d`)",
                "M" => " (`M` is not minutes: write `m`)",
                _ => "",
            };
            return fail(format!(
                "unknown period `{period}` in {at}; use ms, s, m, h, d, or a duration such as \
                 \"10s\"{hint}"
            ));
        }
    };
    // The limiter counts in microseconds: at most one cell per microsecond.
    if u128::from(count) > per.as_micros() {
        return fail(format!(
            "{at} is more than one cell per microsecond, the limiter's resolution; count in \
             larger cells (a `cost` per call over a smaller rate)"
        ));
    }
    Ok((count, per))
}

/// A whole number of at least 1 (`burst`, `cost`); `Ok(None)` when not given.
fn whole(opt: Option<&crate::args::Opt<syn::LitInt>>, name: &str) -> Checked<Option<u32>> {
    let Some(opt) = opt else {
        return Ok(None);
    };
    let lit = &opt.value;
    match lit.base10_parse::<u32>() {
        Ok(0) if name == "burst" => Err((
            lit.span(),
            "`burst = 0` admits nothing; give at least 1 (`burst = 1` spaces every call by the \
             rate's interval)"
                .to_owned(),
        )),
        Ok(0) => Err((
            lit.span(),
            "`cost = 0` takes nothing, so it would limit nothing; a call takes at least 1 cell \
             (`cost = 1`)"
                .to_owned(),
        )),
        Ok(n) => Ok(Some(n)),
        Err(_) => Err((
            lit.span(),
            format!(
                "`{name} = {lit}` is not a whole number from 1 to {} (`u32::MAX`)",
                u32::MAX
            ),
        )),
    }
}

/// `wait = "…"` with `on_limited = "wait"` (`waits`): both or neither.
fn wait(args: &RateArgs, waits: Option<bool>) -> Checked<Option<Duration>> {
    match (&args.wait, waits) {
        (Some(opt), Some(false)) => Err((
            opt.span,
            "`wait` is the longest wait for a slot with `on_limited = \"wait\"`; without it a \
             limited call fails at once: add `on_limited = \"wait\"`, or remove `wait`"
                .to_owned(),
        )),
        (None, Some(true)) if !args.given.contains("wait") => Err((
            args.on_limited
                .as_ref()
                .map_or_else(Span::call_site, |opt| opt.value.span()),
            "`on_limited = \"wait\"` needs the longest wait for a slot: add e.g. \
             `wait = \"2s\"` (an unbounded wait would hold requests for as long as the backlog \
             grows)"
                .to_owned(),
        )),
        (Some(opt), Some(true)) => {
            let text = opt.value.value();
            let span = opt.value.span();
            if text == "forever" {
                return Err((
                    span,
                    "`#[rate_limited]` waits a bounded time: give the longest wait, e.g. \
                     `wait = \"2s\"`, beyond which a call fails with `ErrorKind::RateLimited`"
                        .to_owned(),
                ));
            }
            match duration::parse(&text) {
                Ok(wait) => Ok(Some(wait)),
                Err(duration::DurationError::Zero) => Err((
                    span,
                    format!(
                        "`wait = {text:?}` is zero; to fail at once when limited, use \
                         `on_limited = \"error\"` (the default) and omit `wait`"
                    ),
                )),
                Err(duration::DurationError::TooLarge) => Err((
                    span,
                    format!(
                        "`wait = {text:?}` is too large: a duration is at most {} (u64::MAX \
                         milliseconds); give the longest wait a request may take",
                        duration::LONGEST
                    ),
                )),
                Err(e) => Err((span, e.message("wait", &text))),
            }
        }
        _ => Ok(None),
    }
}
