//! `#[scheduled]`: its parts of the pipeline shared with `#[distributed_lock]`
//! (`crate::pipeline`), which also shares its option parsing (`crate::args`), duration grammar
//! (`crate::duration`), limits (`crate::limits`), error collection (`crate::errors`) and value
//! checks (`crate::validate`).
//!
//! | module | what lives there |
//! |---|---|
//! | `args` | the options and their keywords (`crate::args::kw`) |
//! | `item` | the function's shape: free, non-generic `async fn`, `JobContext` or no parameter |
//! | `validate` | cron and tz through `dlock_cron`, the name, durations, combinations → `Plan` |
//! | `expand` | the job module next to the function |

mod args;
mod expand;
mod item;
mod validate;

use proc_macro2::TokenStream;
use quote::quote;
use syn::{ItemFn, Path};

use crate::errors::Errors;
use crate::pipeline::Attribute;
use crate::scheduled::args::ScheduledArgs;
use crate::scheduled::item::Handler;
use crate::scheduled::validate::Plan;

/// `#[scheduled]`'s parts of the pipeline: the options (`validate`), the function's shape
/// (`item`), the job module next to the function (`expand`), and on error a stub `job()`.
pub(crate) struct Scheduled;

impl Attribute for Scheduled {
    const NAME: &'static str = "scheduled";
    type Args = ScheduledArgs;
    type Plan<'f> = (Handler<'f>, Plan);

    fn check<'f>(
        args: &ScheduledArgs,
        func: &'f ItemFn,
        errors: &mut Errors,
    ) -> Option<(Handler<'f>, Plan)> {
        // The options first, then the function: the order the errors are listed in.
        let plan = validate::validate(args, errors);
        let handler = Handler::read(func, errors);
        Some((handler?, plan?))
    }

    fn expand((handler, plan): (Handler<'_>, Plan), item: TokenStream) -> TokenStream {
        let module = expand::expand(&handler, &plan);
        quote!(#item #module)
    }

    /// A stub `job()`, so that calls to it do not add errors of their own; none for a method,
    /// which sits in an `impl` block where no module can go.
    fn after_errors(args: &ScheduledArgs, func: &ItemFn) -> TokenStream {
        if Handler::is_method(func) {
            return TokenStream::new();
        }
        let krate: Path = args
            .krate
            .as_ref()
            .and_then(|krate| krate.value.parse().ok())
            .unwrap_or_else(|| syn::parse_quote!(::dlock_scheduler));
        expand::stub(func, &krate)
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use crate::pipeline::attribute;

    fn expand(
        attr: proc_macro2::TokenStream,
        item: proc_macro2::TokenStream,
    ) -> proc_macro2::TokenStream {
        attribute::<super::Scheduled>(attr, item)
    }

    fn lottery() -> proc_macro2::TokenStream {
        quote!(
            async fn lottery(ctx: JobContext) -> Result<(), E> {
                Ok(())
            }
        )
    }

    #[test]
    fn expands_to_absolute_paths_only() {
        let out = expand(
            quote!(
                name = "lottery",
                cron = "0 12 * * *",
                tz = "Europe/Berlin",
                jitter = "2s"
            ),
            lottery(),
        );
        let text = out.to_string();
        assert!(!text.contains("compile_error"), "{text}");
        assert!(text.contains("enum lottery { }"), "{text}");
        assert!(text.contains("impl lottery"), "{text}");
        assert!(
            text.contains(":: dlock_scheduler :: __private :: job (\"lottery\" , \"0 12 * * *\" , \"Europe/Berlin\""),
            "{text}"
        );
        assert!(text.contains("fn job ()"), "{text}");
        assert!(
            !text.contains("pub fn job"),
            "private like the function: {text}"
        );
        assert!(
            text.contains(
                ". jitter (:: dlock_scheduler :: __private :: Duration :: from_millis (2000))"
            ),
            "{text}"
        );
        assert_eq!(
            text.matches("dlock_scheduler").count(),
            text.matches(":: dlock_scheduler").count(),
            "every path to dlock-scheduler is absolute: {text}"
        );
    }

    #[test]
    fn visibility_and_crate_path_are_kept_as_written() {
        let item = quote!(
            pub(super) async fn tick() -> Result<(), E> {
                Ok(())
            }
        );
        let out = expand(
            quote!(
                name = "tick",
                cron = "* * * * *",
                crate = "super::deps::sched"
            ),
            item,
        );
        let text = out.to_string();
        assert!(text.contains("pub (super) enum tick { }"), "{text}");
        assert!(text.contains("pub (super) fn job"), "{text}");
        assert!(
            text.contains("super :: deps :: sched :: __private :: job"),
            "{text}"
        );
        assert!(!text.contains("super :: super"), "{text}");
        assert!(text.contains("| _ | tick ()"), "{text}");
        assert!(!text.contains("dlock_scheduler"), "{text}");
    }

    #[test]
    fn on_error_the_function_is_emitted_unchanged_with_a_stub() {
        let item = lottery();
        let out = expand(
            quote!(name = "a{b", cron = "0 0 30 2 *", nope = 1),
            item.clone(),
        );
        let text = out.to_string();
        assert_eq!(text.matches("compile_error").count(), 3, "{text}");
        assert!(text.contains(&item.to_string()), "{text}");
        assert!(text.contains("unreachable"), "{text}");
    }
}
