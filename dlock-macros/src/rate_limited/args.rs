//! Parsing `#[rate_limited]`'s arguments: `key = "user:{id}", rate = "100/s", burst = 20, …`.
//!
//! Syntax only, through the shared machinery of `crate::args`; what the values mean is
//! `validate.rs`'s job.

use syn::parse::ParseStream;
use syn::{Expr, LitBool, LitInt, LitStr, Token};

use crate::args::{Given, Opt, Options, kw, option};
use crate::errors::Errors;

/// What each option takes, for error messages. The order is the documented one.
pub(crate) const OPTIONS: [(&str, &str); 10] = [
    (
        "key",
        "the budget's name in quotes, a template of the parameters: `key = \"user:{user_id}\"`",
    ),
    (
        "rate",
        "a count per period in quotes: `rate = \"100/s\"` (or /ms, /m, /h, /d, or a duration: \"5/10s\")",
    ),
    (
        "burst",
        "a whole number, the cells admitted at once after a quiet spell: `burst = 20`",
    ),
    (
        "cost",
        "a whole number, the cells one call takes: `cost = 1`",
    ),
    (
        "on_limited",
        "\"error\" or \"wait\": `on_limited = \"wait\"`",
    ),
    (
        "wait",
        "a duration in quotes, the longest wait for a slot: `wait = \"2s\"`",
    ),
    ("fail_open", "`true` or `false`: `fail_open = true`"),
    ("label", "a string: `label = \"api per user\"`"),
    (
        "client",
        "an expression: `client = self.locks` or `client = &CLIENT`",
    ),
    ("crate", "a path in quotes: `crate = \"my_dlock\"`"),
];

/// The options as written; each at most once.
#[derive(Default)]
pub(crate) struct RateArgs {
    pub(crate) key: Option<Opt<LitStr>>,
    pub(crate) rate: Option<Opt<LitStr>>,
    pub(crate) burst: Option<Opt<LitInt>>,
    pub(crate) cost: Option<Opt<LitInt>>,
    pub(crate) on_limited: Option<Opt<LitStr>>,
    pub(crate) wait: Option<Opt<LitStr>>,
    pub(crate) fail_open: Option<Opt<LitBool>>,
    pub(crate) label: Option<Opt<LitStr>>,
    pub(crate) client: Option<Opt<Expr>>,
    pub(crate) krate: Option<Opt<LitStr>>,
    pub(crate) given: Given,
}

impl Options for RateArgs {
    const OPTIONS: &'static [(&'static str, &'static str)] = &OPTIONS;
    const EXAMPLE: &'static str = "key = \"…\", rate = \"100/s\"";
    const LITERAL: &'static str = "the budget's name goes in `key = \"…\"`";
    const ALIASES: &'static [(&'static str, &'static str)] = &[
        ("name", "key"),
        ("limit", "rate"),
        ("per", "rate"),
        ("quota", "rate"),
        ("capacity", "burst"),
        ("permits", "cost"),
        ("cells", "cost"),
        ("on_busy", "on_limited"),
        ("timeout", "wait"),
    ];

    fn one(&mut self, input: ParseStream<'_>, errors: &mut Errors) -> bool {
        let (args, e, o) = (self, errors, Self::OPTIONS);
        if input.peek(kw::key) {
            option::<kw::key, _>(input, o, "key", &mut args.key, e);
        } else if input.peek(kw::rate) {
            option::<kw::rate, _>(input, o, "rate", &mut args.rate, e);
        } else if input.peek(kw::burst) {
            option::<kw::burst, _>(input, o, "burst", &mut args.burst, e);
        } else if input.peek(kw::cost) {
            option::<kw::cost, _>(input, o, "cost", &mut args.cost, e);
        } else if input.peek(kw::on_limited) {
            option::<kw::on_limited, _>(input, o, "on_limited", &mut args.on_limited, e);
        } else if input.peek(kw::wait) {
            option::<kw::wait, _>(input, o, "wait", &mut args.wait, e);
        } else if input.peek(kw::fail_open) {
            option::<kw::fail_open, _>(input, o, "fail_open", &mut args.fail_open, e);
        } else if input.peek(kw::label) {
            option::<kw::label, _>(input, o, "label", &mut args.label, e);
        } else if input.peek(kw::client) {
            option::<kw::client, _>(input, o, "client", &mut args.client, e);
        } else if input.peek(Token![crate]) {
            option::<Token![crate], _>(input, o, "crate", &mut args.krate, e);
        } else {
            return false;
        }
        true
    }

    fn given_mut(&mut self) -> &mut Given {
        &mut self.given
    }
}
