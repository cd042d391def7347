//! The pipeline both attributes run, written once: parse the options → check them and the
//! function → expand. On any error the output is the `compile_error!`s *and* the user's function
//! unchanged, so that its own errors still show and rust-analyzer keeps working.
//!
//! What differs per attribute is the [`Attribute`] trait: `#[distributed_lock]` implements it
//! in `lib.rs`, `#[scheduled]` in `scheduled/mod.rs`. Errors are collected, never first-only:
//! the options are parsed to the end, and `check` reports every problem it finds.

use proc_macro2::TokenStream;
use quote::quote;
use syn::ItemFn;

use crate::args::{self, Options};
use crate::errors::Errors;

/// The parts of one attribute macro; [`attribute`] is the rest.
pub(crate) trait Attribute {
    /// The attribute as written, without `#[…]` (`distributed_lock`), for messages.
    const NAME: &'static str;

    /// Its options, as parsed (syntax only: [`args::parse`]).
    type Args: Options;

    /// Everything the expansion needs, checked and with defaults filled in; may borrow the
    /// function.
    type Plan<'f>;

    /// Reads the function and checks the options against it, reporting every problem to
    /// `errors`; `None` if one was reported.
    fn check<'f>(
        args: &Self::Args,
        func: &'f ItemFn,
        errors: &mut Errors,
    ) -> Option<Self::Plan<'f>>;

    /// The code that replaces `item` (the function as written), once nothing was reported.
    fn expand(plan: Self::Plan<'_>, item: TokenStream) -> TokenStream;

    /// What follows the unchanged function when something was reported. Nothing by default.
    fn after_errors(args: &Self::Args, func: &ItemFn) -> TokenStream {
        let _ = (args, func);
        TokenStream::new()
    }
}

/// Parse → check → expand; on any error, the errors, then the function unchanged, then
/// [`Attribute::after_errors`].
pub(crate) fn attribute<A: Attribute>(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let args: A::Args = args::parse(attr, &mut errors);
    let func = match syn::parse2::<ItemFn>(item.clone()) {
        Ok(func) => func,
        Err(e) => {
            errors.push(
                e.span(),
                format!("`#[{}]` goes on an `async fn` with a body ({e})", A::NAME),
            );
            return unchanged(errors, item, TokenStream::new());
        }
    };
    match A::check(&args, &func, &mut errors) {
        // An option that did not parse is reported by `args::parse` but may leave a plan.
        Some(plan) if errors.is_empty() => A::expand(plan, item),
        _ => {
            let after = A::after_errors(&args, &func);
            unchanged(errors, item, after)
        }
    }
}

/// The errors, then the function as written (so its own errors and rust-analyzer still work),
/// then `after`.
fn unchanged(errors: Errors, item: TokenStream, after: TokenStream) -> TokenStream {
    let errors = errors.into_compile_errors();
    quote!(#errors #item #after)
}

#[cfg(test)]
mod tests {
    use proc_macro2::{Span, TokenStream};
    use quote::quote;
    use syn::ItemFn;

    use super::{Attribute, attribute};
    use crate::args::Args;
    use crate::errors::Errors;

    /// Accepts a function named `ok`; its plan is the function's name.
    struct Fake;

    impl Attribute for Fake {
        const NAME: &'static str = "fake";
        type Args = Args;
        type Plan<'f> = &'f syn::Ident;

        fn check<'f>(_: &Args, func: &'f ItemFn, errors: &mut Errors) -> Option<&'f syn::Ident> {
            if func.sig.ident != "ok" {
                errors.push(Span::call_site(), "not ok");
            }
            Some(&func.sig.ident)
        }

        fn expand(name: &syn::Ident, _item: TokenStream) -> TokenStream {
            quote!(expanded #name)
        }

        fn after_errors(_: &Args, _: &ItemFn) -> TokenStream {
            quote!(after)
        }
    }

    fn run(attr: TokenStream, item: TokenStream) -> String {
        attribute::<Fake>(attr, item).to_string()
    }

    #[test]
    fn expands_when_nothing_was_reported() {
        assert_eq!(
            run(
                quote!(),
                quote!(
                    fn ok() {}
                )
            ),
            "expanded ok"
        );
    }

    #[test]
    fn on_error_the_errors_then_the_function_unchanged_then_after_errors() {
        let out = run(
            quote!(),
            quote!(
                fn no() {}
            ),
        );
        assert!(
            out.starts_with(":: core :: compile_error ! { \"not ok\" }"),
            "{out}"
        );
        assert!(out.ends_with("fn no () { } after"), "{out}");
    }

    #[test]
    fn an_option_error_stops_the_expansion_even_with_a_plan() {
        let out = run(
            quote!(nope = 1),
            quote!(
                fn ok() {}
            ),
        );
        assert!(out.contains("unknown option `nope`"), "{out}");
        assert!(out.ends_with("fn ok () { } after"), "{out}");
        assert!(!out.contains("expanded"), "{out}");
    }

    #[test]
    fn not_a_function_is_named_after_the_attribute_and_kept() {
        let out = run(
            quote!(),
            quote!(
                struct S;
            ),
        );
        assert!(
            out.contains("`#[fake]` goes on an `async fn` with a body"),
            "{out}"
        );
        assert!(out.ends_with("struct S ;"), "{out}");
    }
}
