//! Parsing an attribute's arguments: `key = "…", ttl = "10s", client = self.client, …`.
//!
//! Only syntax lives here: every option is `name = value`, parsed by one generic helper
//! ([`option`]) that also rejects duplicates. What the values mean (durations, templates,
//! combinations) is `validate.rs`'s job. Parsing never stops at the first mistake: a bad option is
//! recorded and skipped up to the next comma, so one build reports every error.
//!
//! The machinery ([`parse`], [`option`], unknown-option suggestions) is shared by both attributes
//! through the [`Options`] trait; the keywords of both are declared once, in [`kw`]. This file
//! also holds `#[distributed_lock]`'s options ([`Args`]); `#[scheduled]`'s are in
//! `scheduled/args.rs`, `#[rate_limited]`'s in `rate_limited/args.rs`.

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::parse::{Parse, ParseStream, Parser};
use syn::spanned::Spanned;
use syn::{Expr, Ident, LitBool, LitInt, LitStr, Token};

use crate::errors::Errors;

/// The option keywords of both attributes, declared once. (`crate` is a Rust keyword:
/// `Token![crate]`.)
pub(crate) mod kw {
    // #[distributed_lock]
    syn::custom_keyword!(key);
    syn::custom_keyword!(ttl);
    syn::custom_keyword!(watchdog);
    syn::custom_keyword!(max_hold);
    syn::custom_keyword!(wait);
    syn::custom_keyword!(on_busy);
    syn::custom_keyword!(on_lost);
    syn::custom_keyword!(reentrant);
    syn::custom_keyword!(label);
    syn::custom_keyword!(client);
    syn::custom_keyword!(guard);
    syn::custom_keyword!(mode);
    syn::custom_keyword!(permits);
    syn::custom_keyword!(of);
    // #[scheduled] (it shares `on_lost` and `crate`)
    syn::custom_keyword!(name);
    syn::custom_keyword!(cron);
    syn::custom_keyword!(tz);
    syn::custom_keyword!(jitter);
    syn::custom_keyword!(lease);
    syn::custom_keyword!(max_run);
    syn::custom_keyword!(overlap);
    syn::custom_keyword!(misfire);
    syn::custom_keyword!(attempts);
    syn::custom_keyword!(backoff);
    syn::custom_keyword!(group);
    // #[rate_limited] (it shares `key`, `wait`, `label`, `client` and `crate`)
    syn::custom_keyword!(rate);
    syn::custom_keyword!(burst);
    syn::custom_keyword!(cost);
    syn::custom_keyword!(on_limited);
    syn::custom_keyword!(fail_open);
}

/// An attribute's set of options: which names it knows, what each takes, where each goes.
pub(crate) trait Options: Default {
    /// Each option's name and what it takes (for messages), in the documented order.
    const OPTIONS: &'static [(&'static str, &'static str)];
    /// Two options as an example, for a missing `,`: `key = "…", ttl = "10s"`.
    const EXAMPLE: &'static str;
    /// Where a bare literal in place of an option belongs: ``the lock name goes in `key = "…"` ``.
    const LITERAL: &'static str;
    /// Names users may reach for, and the option that means it (`ttl` → `lease`): suggested
    /// before the near misses by spelling.
    const ALIASES: &'static [(&'static str, &'static str)] = &[];

    /// Parses one option with [`option`] if the input starts with one of the names; `false`
    /// (nothing consumed) otherwise.
    fn one(&mut self, input: ParseStream<'_>, errors: &mut Errors) -> bool;

    /// The names of the options written, whether or not their values parsed.
    fn given_mut(&mut self) -> &mut Given;
}

/// The names of the options written, valid or not: an option whose value did not parse (already
/// reported, e.g. `key = KEY`) is not also reported as missing.
#[derive(Default)]
pub(crate) struct Given(Vec<String>);

impl Given {
    /// Whether the option `name` was written.
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.0.iter().any(|given| given == name)
    }
}

/// What each option of `#[distributed_lock]` takes, for error messages. The order is the
/// documented one.
pub(crate) const OPTIONS: [(&str, &str); 15] = [
    (
        "key",
        "a lock-name template in quotes: `key = \"order:{order_id}\"`",
    ),
    ("ttl", "a duration in quotes: `ttl = \"10s\"`"),
    ("watchdog", "`true` or `false`: `watchdog = false`"),
    ("max_hold", "a duration in quotes: `max_hold = \"10m\"`"),
    (
        "wait",
        "a duration or \"forever\" in quotes: `wait = \"5s\"`",
    ),
    ("on_busy", "\"error\" or \"skip\": `on_busy = \"skip\"`"),
    (
        "on_lost",
        "\"cancel\" or \"signal\": `on_lost = \"signal\"`",
    ),
    ("reentrant", "`true` or `false`: `reentrant = false`"),
    ("label", "a string: `label = \"nightly report\"`"),
    (
        "client",
        "an expression: `client = self.locks` or `client = &CLIENT`",
    ),
    ("crate", "a path in quotes: `crate = \"my_dlock\"`"),
    (
        "guard",
        "an identifier to bind the lease to: `guard = lease`",
    ),
    (
        "mode",
        "\"read\" or \"write\" in quotes, for a read-write lock: `mode = \"read\"`",
    ),
    (
        "permits",
        "a whole number, the permits one call takes from a semaphore: `permits = 1`",
    ),
    (
        "of",
        "a whole number, the semaphore's number of permits: `of = 4`",
    ),
];

/// One option as written: where its name is, and its value.
pub(crate) struct Opt<V> {
    pub(crate) span: Span,
    pub(crate) value: V,
}

/// The options of `#[distributed_lock]` as written; each at most once.
#[derive(Default)]
pub(crate) struct Args {
    pub(crate) key: Option<Opt<LitStr>>,
    pub(crate) ttl: Option<Opt<LitStr>>,
    pub(crate) watchdog: Option<Opt<LitBool>>,
    pub(crate) max_hold: Option<Opt<LitStr>>,
    pub(crate) wait: Option<Opt<LitStr>>,
    pub(crate) on_busy: Option<Opt<LitStr>>,
    pub(crate) on_lost: Option<Opt<LitStr>>,
    pub(crate) reentrant: Option<Opt<LitBool>>,
    pub(crate) label: Option<Opt<LitStr>>,
    pub(crate) client: Option<Opt<Expr>>,
    pub(crate) krate: Option<Opt<LitStr>>,
    pub(crate) guard: Option<Opt<Ident>>,
    pub(crate) mode: Option<Opt<LitStr>>,
    pub(crate) permits: Option<Opt<LitInt>>,
    pub(crate) of: Option<Opt<LitInt>>,
    pub(crate) given: Given,
}

/// Parses an attribute's arguments, recording every error in `errors`.
pub(crate) fn parse<A: Options>(tokens: TokenStream, errors: &mut Errors) -> A {
    let mut args = A::default();
    let parser = |input: ParseStream<'_>| {
        while !input.is_empty() {
            let name = match input.fork().parse::<TokenTree>() {
                Ok(TokenTree::Ident(name)) => Some(name.to_string()),
                _ => None,
            };
            if args.one(input, errors) {
                args.given_mut().0.extend(name);
            } else {
                unknown::<A>(input, errors);
            }
            if input.is_empty() {
                break;
            }
            if input.parse::<Token![,]>().is_err() {
                errors.push(
                    input.span(),
                    format!("expected `,` between options, as in `{}`", A::EXAMPLE),
                );
                skip_to_comma(input);
                let _ = input.parse::<Option<Token![,]>>();
            }
        }
        Ok(())
    };
    if let Err(e) = parser.parse2(tokens) {
        errors.push_error(e);
    }
    args
}

impl Options for Args {
    const OPTIONS: &'static [(&'static str, &'static str)] = &OPTIONS;
    const EXAMPLE: &'static str = "key = \"…\", ttl = \"10s\"";
    const LITERAL: &'static str = "the lock name goes in `key = \"…\"`";

    fn one(&mut self, input: ParseStream<'_>, errors: &mut Errors) -> bool {
        let (args, e, o) = (self, errors, Self::OPTIONS);
        if input.peek(kw::key) {
            option::<kw::key, _>(input, o, "key", &mut args.key, e);
        } else if input.peek(kw::ttl) {
            option::<kw::ttl, _>(input, o, "ttl", &mut args.ttl, e);
        } else if input.peek(kw::watchdog) {
            option::<kw::watchdog, _>(input, o, "watchdog", &mut args.watchdog, e);
        } else if input.peek(kw::max_hold) {
            option::<kw::max_hold, _>(input, o, "max_hold", &mut args.max_hold, e);
        } else if input.peek(kw::wait) {
            option::<kw::wait, _>(input, o, "wait", &mut args.wait, e);
        } else if input.peek(kw::on_busy) {
            option::<kw::on_busy, _>(input, o, "on_busy", &mut args.on_busy, e);
        } else if input.peek(kw::on_lost) {
            option::<kw::on_lost, _>(input, o, "on_lost", &mut args.on_lost, e);
        } else if input.peek(kw::reentrant) {
            option::<kw::reentrant, _>(input, o, "reentrant", &mut args.reentrant, e);
        } else if input.peek(kw::label) {
            option::<kw::label, _>(input, o, "label", &mut args.label, e);
        } else if input.peek(kw::client) {
            option::<kw::client, _>(input, o, "client", &mut args.client, e);
        } else if input.peek(Token![crate]) {
            option::<Token![crate], _>(input, o, "crate", &mut args.krate, e);
        } else if input.peek(kw::guard) {
            option::<kw::guard, _>(input, o, "guard", &mut args.guard, e);
        } else if input.peek(kw::mode) {
            option::<kw::mode, _>(input, o, "mode", &mut args.mode, e);
        } else if input.peek(kw::permits) {
            option::<kw::permits, _>(input, o, "permits", &mut args.permits, e);
        } else if input.peek(kw::of) {
            option::<kw::of, _>(input, o, "of", &mut args.of, e);
        } else {
            return false;
        }
        true
    }

    fn given_mut(&mut self) -> &mut Given {
        &mut self.given
    }
}

/// The one helper for `name = value`: parses the keyword `K`, `=` and a `V`, and stores it in
/// `slot` unless the option was already given. `options` is the attribute's
/// [`Options::OPTIONS`], for the messages.
pub(crate) fn option<K, V>(
    input: ParseStream<'_>,
    options: &[(&str, &'static str)],
    name: &str,
    slot: &mut Option<Opt<V>>,
    errors: &mut Errors,
) where
    K: Parse + Spanned,
    V: Parse,
{
    let span = match input.parse::<K>() {
        Ok(keyword) => keyword.span(),
        Err(e) => return errors.push_error(e),
    };
    let takes = takes(options, name);
    if input.parse::<Token![=]>().is_err() {
        errors.push(span, format!("`{name}` needs a value: it takes {takes}"));
        return skip_to_comma(input);
    }
    let value_span = input.span();
    let value = match input.parse::<V>() {
        Ok(value) => value,
        Err(_) => {
            // A `const`, a path or a call where a literal belongs: say why it cannot be one.
            let named = match input.fork().parse::<TokenTree>() {
                Ok(TokenTree::Ident(ident)) => ident != "true" && ident != "false",
                Ok(TokenTree::Punct(punct)) => punct.as_char() == ':',
                _ => false,
            };
            let why = match unquoted::<V>(input) {
                Some(word) => format!("; put the value in quotes: `{name} = \"{word}\"`"),
                None if named => "; write the value itself, not a constant or an expression: \
                                  the attribute reads it at compile time"
                    .to_owned(),
                None => String::new(),
            };
            errors.push(value_span, format!("`{name}` takes {takes}{why}"));
            return skip_to_comma(input);
        }
    };
    if slot.is_some() {
        errors.push(span, format!("duplicate option `{name}`; give it once"));
    } else {
        *slot = Some(Opt { span, value });
    }
}

/// A lone word that is a valid value once quoted (`mode = read`, `on_busy = skip`): not a
/// constant's `SCREAMING_CASE` name, which `key = KEY` means.
fn unquoted<V: Parse>(input: ParseStream<'_>) -> Option<String> {
    let fork = input.fork();
    let word = fork.parse::<Ident>().ok()?.to_string();
    let alone = fork.is_empty() || fork.peek(Token![,]);
    let constant = !word.chars().any(|c| c.is_lowercase());
    let valid = syn::parse_str::<V>(&format!("{word:?}")).is_ok();
    (alone && !constant && valid).then_some(word)
}

fn takes(options: &[(&str, &'static str)], name: &str) -> &'static str {
    options
        .iter()
        .find(|(n, _)| *n == name)
        .map_or("a value", |(_, takes)| takes)
}

/// Reports an unknown option (with a suggestion if it is a near miss) and skips it.
fn unknown<A: Options>(input: ParseStream<'_>, errors: &mut Errors) {
    let names: Vec<&str> = A::OPTIONS.iter().map(|(name, _)| *name).collect();
    let list = names.join(", ");
    let span = input.span();
    let message = match input.fork().parse::<TokenTree>() {
        Ok(TokenTree::Ident(ident)) => {
            let ident = ident.to_string();
            let alias = A::ALIASES.iter().find(|(alias, _)| *alias == ident);
            let near = alias
                .map(|(_, name)| name)
                .or_else(|| names.iter().find(|name| distance(name, &ident) <= 2));
            match near {
                Some(near) => format!("unknown option `{ident}`; did you mean `{near}`?"),
                None => format!("unknown option `{ident}`; the options are {list}"),
            }
        }
        Ok(TokenTree::Literal(_)) => {
            format!("expected `name = value`; {} (options: {list})", A::LITERAL)
        }
        _ => format!("expected an option `name = value`; the options are {list}"),
    };
    errors.push(span, message);
    skip_to_comma(input);
}

/// Skips tokens up to (not including) the next top-level comma.
fn skip_to_comma(input: ParseStream<'_>) {
    let _ = input.step(|cursor| {
        let mut rest = *cursor;
        while let Some((tree, next)) = rest.token_tree() {
            if matches!(&tree, TokenTree::Punct(p) if p.as_char() == ',') {
                break;
            }
            rest = next;
        }
        Ok(((), rest))
    });
}

/// Edit distance, for "did you mean" (the names are short).
pub(crate) fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substituted = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substituted.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    fn parse_ok(tokens: TokenStream) -> Args {
        let mut errors = Errors::default();
        let args: Args = parse(tokens, &mut errors);
        assert!(errors.into_compile_errors().is_none());
        args
    }

    fn messages(tokens: TokenStream) -> String {
        let mut errors = Errors::default();
        parse::<Args>(tokens, &mut errors);
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
        let args = parse_ok(quote!(
            key = "a:{b}",
            ttl = "10s",
            watchdog = false,
            client = self.locks,
            crate = "x",
            guard = lease,
        ));
        assert_eq!(args.key.map(|k| k.value.value()).as_deref(), Some("a:{b}"));
        assert!(args.watchdog.is_some_and(|w| !w.value.value));
        assert!(args.client.is_some() && args.krate.is_some() && args.guard.is_some());
    }

    #[test]
    fn reports_every_error() {
        let text = messages(quote!(
            ttl = "1s",
            ttl = "2s",
            tll = 3,
            key,
            wait = 5,
            label = "x"
        ));
        assert!(text.contains("duplicate option `ttl`"), "{text}");
        assert!(text.contains("did you mean `ttl`?"), "{text}");
        assert!(text.contains("`key` needs a value"), "{text}");
        assert!(text.contains("`wait` takes a duration"), "{text}");
        let text = messages(quote!(key = "a" ttl = "1s"));
        assert!(text.contains("expected `,` between options"), "{text}");
    }

    #[test]
    fn a_lone_word_is_told_to_go_in_quotes_and_a_constant_is_not() {
        let text = messages(quote!(
            mode = read,
            on_busy = skip,
            key = KEY,
            permits = one
        ));
        assert!(
            text.contains("put the value in quotes: `mode = \\\"read\\\"`"),
            "{text}"
        );
        assert!(text.contains("`on_busy = \\\"skip\\\"`"), "{text}");
        assert!(text.contains("not a constant or an expression"), "{text}");
        // A number does not become one by quoting it.
        assert!(!text.contains("`permits = \\\"one\\\"`"), "{text}");
    }

    #[test]
    fn records_the_options_written_even_with_bad_values() {
        let mut errors = Errors::default();
        let args: Args = parse(quote!(key = KEY, crate = my::path, tll = "1s"), &mut errors);
        assert!(args.key.is_none() && args.krate.is_none());
        assert!(args.given.contains("key") && args.given.contains("crate"));
        assert!(!args.given.contains("tll") && !args.given.contains("ttl"));
    }

    #[test]
    fn edit_distance() {
        assert_eq!(distance("ttl", "ttl"), 0);
        assert_eq!(distance("ttl", "tll"), 1);
        assert_eq!(distance("max_hold", "maxhold"), 1);
        assert!(distance("key", "client") > 2);
    }
}
