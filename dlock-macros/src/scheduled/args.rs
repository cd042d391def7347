//! Parsing `#[scheduled]`'s arguments: `name = "lottery", cron = "0 12 * * *", tz = "…", …`.
//!
//! Syntax only, through the shared machinery of `crate::args` (one generic `name = value`
//! helper that rejects duplicates, suggestions for unknown names, recovery at the next comma).
//! What the values mean is `validate.rs`'s job.

use syn::parse::ParseStream;
use syn::{LitInt, LitStr, Token};

use crate::args::{Given, Opt, Options, kw, option};
use crate::errors::Errors;

/// What each option takes, for error messages. The order is the documented one.
pub(crate) const OPTIONS: [(&str, &str); 13] = [
    (
        "name",
        "the job's name in quotes (its Redis key): `name = \"lottery\"`",
    ),
    (
        "cron",
        "a cron expression in quotes, 5 fields or 6 with seconds first: `cron = \"0 12 * * *\"`",
    ),
    (
        "tz",
        "an IANA time zone in quotes: `tz = \"Europe/Berlin\"`",
    ),
    ("jitter", "a duration in quotes: `jitter = \"2s\"`"),
    ("lease", "a duration in quotes: `lease = \"30s\"`"),
    ("max_run", "a duration in quotes: `max_run = \"10m\"`"),
    ("overlap", "\"skip\" or \"allow\": `overlap = \"allow\"`"),
    (
        "misfire",
        "\"fire_once\", \"skip\" or \"catch_up(<window>)\": `misfire = \"catch_up(1h)\"`",
    ),
    (
        "on_lost",
        "\"cancel\" or \"signal\": `on_lost = \"signal\"`",
    ),
    (
        "attempts",
        "a number from 1 to 100, attempts in all (at-least-once delivery): `attempts = 3`",
    ),
    (
        "backoff",
        "a duration in quotes, before the second attempt (with `attempts`): `backoff = \"1s\"`",
    ),
    (
        "group",
        "the name in quotes of a job group declared on the scheduler builder: `group = \"db-maintenance\"`",
    ),
    ("crate", "a path in quotes: `crate = \"my_scheduler\"`"),
];

/// The options as written; each at most once.
#[derive(Default)]
pub(crate) struct ScheduledArgs {
    pub(crate) name: Option<Opt<LitStr>>,
    pub(crate) cron: Option<Opt<LitStr>>,
    pub(crate) tz: Option<Opt<LitStr>>,
    pub(crate) jitter: Option<Opt<LitStr>>,
    pub(crate) lease: Option<Opt<LitStr>>,
    pub(crate) max_run: Option<Opt<LitStr>>,
    pub(crate) overlap: Option<Opt<LitStr>>,
    pub(crate) misfire: Option<Opt<LitStr>>,
    pub(crate) on_lost: Option<Opt<LitStr>>,
    pub(crate) attempts: Option<Opt<LitInt>>,
    pub(crate) backoff: Option<Opt<LitStr>>,
    pub(crate) group: Option<Opt<LitStr>>,
    pub(crate) krate: Option<Opt<LitStr>>,
    pub(crate) given: Given,
}

impl Options for ScheduledArgs {
    const OPTIONS: &'static [(&'static str, &'static str)] = &OPTIONS;
    const EXAMPLE: &'static str = "name = \"…\", cron = \"…\"";
    const LITERAL: &'static str = "the job's name goes in `name = \"…\"`";
    const ALIASES: &'static [(&'static str, &'static str)] = &[
        ("key", "name"),
        ("schedule", "cron"),
        ("timezone", "tz"),
        ("time_zone", "tz"),
        ("ttl", "lease"),
        ("max_hold", "max_run"),
        ("timeout", "max_run"),
        ("retries", "attempts"),
        ("max_attempts", "attempts"),
        ("delivery", "attempts"),
        ("retry_backoff", "backoff"),
        ("retry_delay", "backoff"),
        ("job_group", "group"),
        ("lock_group", "group"),
    ];

    fn one(&mut self, input: ParseStream<'_>, errors: &mut Errors) -> bool {
        let (args, e, o) = (self, errors, Self::OPTIONS);
        if input.peek(kw::name) {
            option::<kw::name, _>(input, o, "name", &mut args.name, e);
        } else if input.peek(kw::cron) {
            option::<kw::cron, _>(input, o, "cron", &mut args.cron, e);
        } else if input.peek(kw::tz) {
            option::<kw::tz, _>(input, o, "tz", &mut args.tz, e);
        } else if input.peek(kw::jitter) {
            option::<kw::jitter, _>(input, o, "jitter", &mut args.jitter, e);
        } else if input.peek(kw::lease) {
            option::<kw::lease, _>(input, o, "lease", &mut args.lease, e);
        } else if input.peek(kw::max_run) {
            option::<kw::max_run, _>(input, o, "max_run", &mut args.max_run, e);
        } else if input.peek(kw::overlap) {
            option::<kw::overlap, _>(input, o, "overlap", &mut args.overlap, e);
        } else if input.peek(kw::misfire) {
            option::<kw::misfire, _>(input, o, "misfire", &mut args.misfire, e);
        } else if input.peek(kw::on_lost) {
            option::<kw::on_lost, _>(input, o, "on_lost", &mut args.on_lost, e);
        } else if input.peek(kw::attempts) {
            option::<kw::attempts, _>(input, o, "attempts", &mut args.attempts, e);
        } else if input.peek(kw::backoff) {
            option::<kw::backoff, _>(input, o, "backoff", &mut args.backoff, e);
        } else if input.peek(kw::group) {
            option::<kw::group, _>(input, o, "group", &mut args.group, e);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::parse;
    use proc_macro2::TokenStream;
    use quote::quote;

    fn messages(tokens: TokenStream) -> String {
        let mut errors = Errors::default();
        parse::<ScheduledArgs>(tokens, &mut errors);
        errors
            .into_compile_errors()
            .map(|t| t.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn every_documented_option_is_parsed() {
        for (name, takes) in OPTIONS {
            // The example in the description is valid input.
            let example = takes.rsplit('`').nth(1).unwrap_or_default();
            assert!(example.starts_with(name), "{name}: {example}");
            let tokens: TokenStream = example.parse().unwrap_or_default();
            let text = messages(tokens);
            assert!(text.is_empty(), "{name}: {text}");
        }
    }

    #[test]
    fn parses_values() {
        let mut errors = Errors::default();
        let args: ScheduledArgs = parse(
            quote!(
                name = "n",
                cron = "* * * * *",
                tz = "UTC",
                crate = "x",
                misfire = "skip",
            ),
            &mut errors,
        );
        assert!(errors.is_empty());
        assert_eq!(args.name.map(|n| n.value.value()).as_deref(), Some("n"));
        assert!(args.cron.is_some() && args.tz.is_some() && args.krate.is_some());
        assert!(args.misfire.is_some() && args.jitter.is_none());
    }

    #[test]
    fn reports_every_error() {
        let text = messages(quote!(
            name = "a",
            name = "b",
            crn = "* * * * *",
            key = "x",
            jitter = 2,
            "lottery"
        ));
        assert!(text.contains("duplicate option `name`"), "{text}");
        assert!(text.contains("did you mean `cron`?"), "{text}");
        assert!(
            text.contains("unknown option `key`; did you mean `name`?"),
            "{text}"
        );
        assert!(text.contains("`jitter` takes a duration"), "{text}");
        assert!(text.contains("the job's name goes in `name"), "{text}");
        let text = messages(quote!(name = "a" cron = "* * * * *"));
        assert!(
            text.contains("expected `,` between options, as in `name"),
            "{text}"
        );
    }
}
