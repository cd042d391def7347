//! `#[scheduled]`: parse → validate → expand, as for `#[distributed_lock]`, sharing its option
//! parsing (`crate::args`), duration grammar (`crate::duration`), error collection
//! (`crate::errors`) and value checks (`crate::validate`).
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
use syn::ItemFn;

use crate::errors::Errors;
use crate::scheduled::args::ScheduledArgs;
use crate::scheduled::item::Handler;

/// Parse → validate → expand; on any error, the errors, the function unchanged and a stub
/// `job()` (so that calls to it do not add errors of their own).
pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let args: ScheduledArgs = crate::args::parse(attr, &mut errors);
    let func = match syn::parse2::<ItemFn>(item.clone()) {
        Ok(func) => func,
        Err(e) => {
            errors.push(
                e.span(),
                format!("`#[scheduled]` goes on an `async fn` with a body ({e})"),
            );
            return unchanged(errors, item);
        }
    };
    let stub_crate = args
        .krate
        .as_ref()
        .and_then(|krate| krate.value.parse().ok())
        .unwrap_or_else(|| syn::parse_quote!(::dlock_scheduler));
    let plan = validate::validate(args, &mut errors);
    let handler = Handler::read(&func, &mut errors);
    match (handler, plan) {
        (Some(handler), Some(plan)) if errors.is_empty() => {
            let module = expand::expand(&handler, &plan);
            quote!(#item #module)
        }
        // A method sits in an `impl` block, where no module can go.
        _ if Handler::is_method(&func) => unchanged(errors, item),
        _ => {
            let stub = expand::stub(&func, &stub_crate);
            let errors = errors.into_compile_errors();
            quote!(#errors #item #stub)
        }
    }
}

/// The errors, then the function as written.
fn unchanged(errors: Errors, item: TokenStream) -> TokenStream {
    let errors = errors.into_compile_errors();
    quote!(#errors #item)
}

#[cfg(test)]
mod tests {
    use quote::quote;

    fn lottery() -> proc_macro2::TokenStream {
        quote!(
            async fn lottery(ctx: JobContext) -> Result<(), E> {
                Ok(())
            }
        )
    }

    #[test]
    fn expands_to_absolute_paths_only() {
        let out = super::expand(
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
        let out = super::expand(
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
        let out = super::expand(
            quote!(name = "a{b", cron = "0 0 30 2 *", nope = 1),
            item.clone(),
        );
        let text = out.to_string();
        assert_eq!(text.matches("compile_error").count(), 3, "{text}");
        assert!(text.contains(&item.to_string()), "{text}");
        assert!(text.contains("unreachable"), "{text}");
    }
}
