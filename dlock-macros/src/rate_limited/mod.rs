//! `#[rate_limited]`: its parts of the pipeline shared with `#[distributed_lock]`
//! (`crate::pipeline`), whose option parsing (`crate::args`), function reading (`crate::item`),
//! key templates (`crate::template`, resolved by `crate::validate::resolve_key`), durations
//! (`crate::duration`) and code around the body (`crate::expand::wrap`) it shares.
//!
//! | module | what lives there |
//! |---|---|
//! | `args` | the options and their keywords (`crate::args::kw`) |
//! | `validate` | the rate grammar, burst and cost, the bounded wait, combinations → `Plan` |
//! | `expand` | the body run once the budget admits it |

mod args;
mod expand;
mod validate;

use proc_macro2::TokenStream;
use syn::{ItemFn, Type};

use crate::errors::Errors;
use crate::item::{Function, Wording};
use crate::pipeline::Attribute;
use crate::rate_limited::args::RateArgs;
use crate::rate_limited::validate::Plan;

/// `#[rate_limited]`'s wording in the messages about the function.
const WORDING: Wording = Wording {
    attribute: "#[rate_limited]",
    unit_return: "a `#[rate_limited]` function reports a limited call through its return \
    type; return `Result<T, E>` with `E: From<dlock_core::Error>` (e.g. \
    `-> Result<(), dlock_core::Error>`)",
};

/// `#[rate_limited]`'s parts of the pipeline.
pub(crate) struct RateLimited;

/// A function whose body runs once admitted, with its checked options.
pub(crate) struct Limited<'f> {
    function: Function<'f>,
    output: &'f Type,
    plan: Plan,
}

impl Attribute for RateLimited {
    const NAME: &'static str = "rate_limited";
    type Args = RateArgs;
    type Plan<'f> = Limited<'f>;

    fn check<'f>(args: &RateArgs, func: &'f ItemFn, errors: &mut Errors) -> Option<Limited<'f>> {
        let function = Function::read(func, &WORDING, errors)?;
        let plan = validate::validate(args, &function, errors)?;
        Some(Limited {
            output: function.output?,
            function,
            plan,
        })
    }

    fn expand(limited: Limited<'_>, _item: TokenStream) -> TokenStream {
        expand::expand(&limited.function, limited.output, &limited.plan)
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use crate::pipeline::attribute;

    fn expand(attr: TokenStream, item: TokenStream) -> String {
        attribute::<super::RateLimited>(attr, item).to_string()
    }

    use proc_macro2::TokenStream;

    fn search() -> TokenStream {
        quote!(
            async fn search(user: u64, q: String) -> Result<u64, E> {
                Ok(user)
            }
        )
    }

    #[test]
    fn expands_to_absolute_paths_only() {
        let text = expand(
            quote!(key = "user:{user}", rate = "100/s", burst = 20),
            search(),
        );
        assert!(!text.contains("compile_error"), "{text}");
        assert!(
            text.contains(":: dlock_core :: __private :: rate_limited ("),
            "{text}"
        );
        assert!(text.contains("count : 100"), "{text}");
        assert!(text.contains("burst : 20"), "{text}");
        assert!(text.contains("cost : 1"), "{text}");
        assert!(text.contains("label : \"user:{user}\""), "{text}");
        assert!(
            text.contains("per : :: dlock_core :: __private :: StdDuration :: from_millis (1000)"),
            "{text}"
        );
        assert!(
            text.contains("wait : :: core :: option :: Option :: None"),
            "{text}"
        );
        assert_eq!(
            text.matches("dlock_core").count(),
            text.matches(":: dlock_core").count(),
            "every path to dlock-core is absolute: {text}"
        );
    }

    #[test]
    fn burst_defaults_to_the_count_and_wait_is_carried() {
        let text = expand(
            quote!(
                key = "k",
                rate = "5/10s",
                on_limited = "wait",
                wait = "2s",
                crate = "my::dl"
            ),
            search(),
        );
        assert!(text.contains("burst : 5"), "{text}");
        assert!(text.contains("from_millis (10000)"), "{text}");
        assert!(
            text.contains(
                "Option :: Some (my :: dl :: __private :: StdDuration :: from_millis (2000))"
            ),
            "{text}"
        );
        assert!(!text.contains("dlock_core"), "{text}");
    }

    #[test]
    fn every_error_at_once_and_the_function_unchanged() {
        let item = search();
        let text = expand(
            quote!(key = "user:{nobody}", rate = "0/s", burst = 0, wait = "1s"),
            item.clone(),
        );
        assert_eq!(text.matches("compile_error").count(), 4, "{text}");
        assert!(text.ends_with(&item.to_string()), "{text}");
    }
}
