//! Code generation. For
//! ```text
//! #[rate_limited(key = "user:{user_id}", rate = "100/s", burst = 20)]
//! async fn search(user_id: u64, q: String) -> Result<Hits, ApiError> { body }
//! ```
//! the function keeps its signature and its body becomes
//! ```text
//! static __DLOCK_RATE: ::dlock_core::__private::RateSpec = /* the quota, fixed at compile time */;
//! match ::dlock_core::__private::default_client() {
//!     Ok(__dlock_client) => {
//!         let mut __dlock_key = ::dlock_core::__private::String::from("user:");
//!         ::dlock_core::__private::key_part(&user_id, &mut __dlock_key);
//!         ::dlock_core::__private::rate_limited(__dlock_client, &__dlock_key, &__DLOCK_RATE,
//!             async move { body }).await
//!     }
//!     Err(e) => ::dlock_core::__private::LimitedOutput::from_limit_error(e),
//! }
//! ```
//! The spec is a `static`, not a `const`: its outage flag (one log line per Redis outage when
//! failing open) is shared by every call of the function. The body's future is built before
//! the decision and dropped unpolled when the call is limited.

use proc_macro2::{Literal, Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::{Ident, Type};

use crate::expand::{
    ReturnSpans, default_client, duration, given_client, key_code, option_duration, respan, wrap,
};
use crate::item::Function;
use crate::rate_limited::validate::Plan;

/// The function with its body run once the budget admits it.
pub(crate) fn expand(function: &Function<'_>, output: &Type, plan: &Plan) -> TokenStream {
    wrap(function, output, |body| limited(output, plan, body))
}

/// Spec, client and key, then `rate_limited(…, async move { body }).await`; the call is
/// spanned on the return type's name, where an unmet `LimitedOutput` bound is reported (as
/// `#[distributed_lock]`'s `run`).
fn limited(output: &Type, plan: &Plan, body: TokenStream) -> TokenStream {
    let krate = &plan.krate;
    let private = quote!(#krate::__private);
    let at = ReturnSpans::of(output).name;
    let run = respan(quote!(#private::rate_limited), at);
    let spec_name = quote!(__DLOCK_RATE);
    let spec = spec(plan);
    let client = Ident::new("__dlock_client", Span::mixed_site());
    let key = Ident::new("__dlock_key", Span::mixed_site());
    let build_key = key_code(&plan.key, &private, &key);
    let client_arg = match plan.client {
        Some(_) => quote!(&#client),
        None => quote!(#client),
    };
    let call = quote_spanned! {at=>
        #run(#client_arg, &#key, &#spec_name, async move { #body }).await
    };
    let limited = match &plan.client {
        Some(expr) => {
            let bind_client = given_client(expr, krate, &client);
            quote!(#bind_client #build_key #call)
        }
        None => default_client(
            krate,
            quote!(LimitedOutput::from_limit_error),
            at,
            &client,
            quote!(#build_key #call),
        ),
    };
    quote! {
        static #spec_name: #private::RateSpec = #spec;
        #limited
    }
}

/// The `RateSpec` literal.
fn spec(plan: &Plan) -> TokenStream {
    let krate = &plan.krate;
    let private = quote!(#krate::__private);
    let per = duration(&private, plan.per);
    let wait = option_duration(&private, plan.wait);
    let (count, burst, cost) = (
        Literal::u32_unsuffixed(plan.count),
        Literal::u32_unsuffixed(plan.burst),
        Literal::u32_unsuffixed(plan.cost),
    );
    let (label, fail_open) = (&plan.label, plan.fail_open);
    quote! {
        #private::RateSpec {
            label: #label,
            count: #count,
            per: #per,
            burst: #burst,
            cost: #cost,
            wait: #wait,
            fail_open: #fail_open,
            outage: #private::StdAtomicBool::new(false),
        }
    }
}
