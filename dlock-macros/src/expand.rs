//! Code generation. For
//! ```text
//! #[distributed_lock(key = "order:{order_id}", ttl = "10s")]
//! async fn pay(order_id: u64) -> Result<Receipt, PayError> { body }
//! ```
//! the function keeps its signature and its body becomes
//! ```text
//! const __DLOCK_SPEC: ::dlock_core::__private::Spec = /* the options, fixed at compile time */;
//! match ::dlock_core::__private::default_client() {
//!     Ok(__dlock_client) => {
//!         let mut __dlock_key = ::dlock_core::__private::String::from("order:");
//!         ::dlock_core::__private::key_part(&order_id, &mut __dlock_key);
//!         ::dlock_core::__private::run(__dlock_client, &__dlock_key, &__DLOCK_SPEC,
//!             move |_| async move {
//!                 if let Some(__dlock_ret) = None::<Result<Receipt, PayError>> {
//!                     return __dlock_ret;
//!                 }
//!                 body
//!             })
//!         .await
//!     }
//!     Err(__dlock_error) => ::dlock_core::__private::ErrorOutput::from_lock_error(__dlock_error),
//! }
//! ```
//! (with `client = expr`, the client is bound first and there is no `match`). The lock's kind
//! is a field of the `Spec` (`Kind::Mutex`, `Kind::Read`, `Kind::Write` or
//! `Kind::Semaphore { permits, limit }`): `run` picks the runner (`with_lock`, `with_read`,
//! `with_write`, `with_permits`), so the code around the body is the same for every kind.
//! * Only absolute paths (`::dlock_core::…`, or the `crate = "…"` path), and the macro's own
//!   locals are `mixed_site` hygienic: they can neither clash with nor be seen by user code.
//! * The key is computed by reference before the body runs; each `key_part` call carries the
//!   parameter's span, so "not a `KeyPart`" is reported on the parameter. Keyword field names
//!   are emitted raw (`{msg.type}` reads `msg.r#type`).
//! * The body moves into an `async move` block: `return` and `?` still produce the function's
//!   value (the lock is released first). The never-taken `if let … None::<R>` (as in
//!   async-trait) fixes the block's output type before the body is checked, so `?` infers;
//!   `impl Trait` in `R` becomes `_` there. A one-expression body keeps its braces' location but
//!   not their hygiene, so `unused_braces` does not flag them (see [`marked_block`]).
//! * The `run`/`run_or_skip` call, its `.await` and the `from_lock_error` of a missing default
//!   client are spanned on one token of the return type: a return type that cannot report a
//!   busy or lost lock is reported there, once (see [`locked`]).
//! * Paths spanned on a user's token have their inner names marked as the macro's, so that
//!   `unused_qualifications` leaves them alone (see [`respan`]).
//! * For `#[async_trait]` output (see `item.rs`) the same code goes inside its
//!   `Box::pin(async move { … })`, around async-trait's own statements, which already fix the
//!   output type.
//! * `client = expr` is cloned (an `Arc` clone) rather than borrowed, so the borrow does not
//!   outlive into the `move` closure: `client = self.locks` works in `&mut self` methods, and a
//!   client parameter may still be used in the body.

use proc_macro2::{Delimiter, Group, Ident, Literal, Span, TokenStream, TokenTree};
use quote::{ToTokens, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{
    AttrStyle, Block, ExprAsync, ExprCall, GenericArgument, ItemFn, PathArguments, Stmt, Type,
};

use crate::item::{Body, Function};
use crate::kind::LockKind;
use crate::template;
use crate::validate::{KeyPiece, KeyValue, Plan, Wait};

/// The function with its body run under the lock.
pub(crate) fn expand(function: &Function<'_>, output: &Type, plan: &Plan) -> TokenStream {
    wrap(function, output, |body| locked(output, plan, body))
}

/// The function with its body (an `async fn`'s block, or an `#[async_trait]` body's async
/// block) replaced by `run(body)`: the code of an attribute that runs the body under a
/// condition (a lock, a rate limit).
pub(crate) fn wrap(
    function: &Function<'_>,
    output: &Type,
    run: impl Fn(TokenStream) -> TokenStream,
) -> TokenStream {
    let item = function.item;
    let (outer, inner): (Vec<_>, Vec<_>) = item
        .attrs
        .iter()
        .partition(|attr| matches!(attr.style, AttrStyle::Outer));
    let (vis, sig) = (&item.vis, &item.sig);
    let body = match &function.body {
        Body::AsyncFn => async_fn_body(item, output, &run),
        Body::AsyncTrait { stmt, call, block } => {
            async_trait_body(item, &run, (*stmt, call, block))
        }
    };
    quote! {
        #(#outer)*
        #vis #sig {
            #(#inner)*
            #body
        }
    }
}

fn async_fn_body(
    item: &ItemFn,
    output: &Type,
    run: &impl Fn(TokenStream) -> TokenStream,
) -> TokenStream {
    let mut erased = output.clone();
    erase_impl_trait(&mut erased);
    let ret = Ident::new("__dlock_ret", Span::mixed_site());
    let block = marked_block(&item.block);
    let body = quote! {
        if let ::core::option::Option::Some(#ret) = ::core::option::Option::None::<#erased> {
            #[allow(unreachable_code)]
            return #ret;
        }
        #block
    };
    run(body)
}

/// The function's block, as the tail of the `async move` block.
///
/// There, rustc's `unused_braces` lint flags the braces of a body that is one expression
/// (`{ Ok(()) }` on one line) and suggests removing them, which is not valid Rust. The lint skips
/// braces that come from a macro expansion, so such a block gets braces located on the user's
/// but marked as the macro's. Any other block is kept as written (the lint never fires on it,
/// and rustc's messages about it, e.g. "remove this semicolon", stay those of plain code).
fn marked_block(block: &Block) -> TokenStream {
    if !matches!(block.stmts.as_slice(), [Stmt::Expr(_, None)]) {
        return block.to_token_stream();
    }
    let stmts = &block.stmts;
    let mut braces = Group::new(Delimiter::Brace, quote!(#(#stmts)*));
    braces.set_span(Span::call_site().located_at(block.brace_token.span.join()));
    TokenTree::Group(braces).into()
}

/// Keeps every statement of an `#[async_trait]` body and runs its async block under the lock.
fn async_trait_body(
    item: &ItemFn,
    run: &impl Fn(TokenStream) -> TokenStream,
    (index, call, block): (usize, &ExprCall, &ExprAsync),
) -> TokenStream {
    let stmts = item.block.stmts.iter().enumerate().map(|(i, stmt)| {
        if i != index {
            return stmt.to_token_stream();
        }
        let func = &call.func;
        let attrs = &block.attrs;
        let capture = &block.capture;
        let inner = &block.block.stmts;
        let wrapped = run(quote!(#(#inner)*));
        quote!(#func(#(#attrs)* async #capture { #wrapped }))
    });
    quote!(#(#stmts)*)
}

/// Spec, client and key, then `run(…, move |guard| async move { body }).await`.
///
/// Every token that can fail on a wrong return type (the `run` call and its `.await`, and the
/// `from_lock_error` of a missing default client) is spanned on the same single token of the
/// return type ([`ReturnSpans::name`]): rustc reports the unmet `ErrorOutput`/`SkipOutput`
/// bound of each at that span, and drops the repeats, so the user sees the trait's note once.
/// (A single token, because rustc reports the `.await`'s obligation on the `await` keyword,
/// which cannot cover the whole type.)
fn locked(output: &Type, plan: &Plan, body: TokenStream) -> TokenStream {
    let krate = &plan.krate;
    let private = quote!(#krate::__private);
    let at = ReturnSpans::of(output).name;
    let runner = if plan.skip {
        quote!(run_or_skip)
    } else {
        quote!(run)
    };
    let run = respan(quote!(#private::#runner), at);
    let spec = spec(plan);
    let spec_name = quote!(__DLOCK_SPEC);
    let client = Ident::new("__dlock_client", Span::mixed_site());
    let key = Ident::new("__dlock_key", Span::mixed_site());
    let build_key = key_code(&plan.key, &private, &key);
    let guard = plan
        .guard
        .as_ref()
        .map_or_else(|| quote!(_), ToTokens::to_token_stream);
    let client_arg = match plan.client {
        Some(_) => quote!(&#client),
        None => quote!(#client),
    };
    let call = quote_spanned! {at=>
        #run(#client_arg, &#key, &#spec_name, move |#guard| async move { #body }).await
    };
    let locked = match &plan.client {
        Some(expr) => {
            let bind_client = given_client(expr, krate, &client);
            quote!(#bind_client #build_key #call)
        }
        None => {
            let output_trait = if plan.skip {
                quote!(SkipOutput::from_lock_error)
            } else {
                quote!(ErrorOutput::from_lock_error)
            };
            default_client(krate, output_trait, at, &client, quote!(#build_key #call))
        }
    };
    quote! {
        const #spec_name: #private::Spec = #spec;
        #locked
    }
}

/// The spans of the return type's first and last tokens: a path whose first token has `first`
/// and the rest `last` covers the whole type in rustc's messages (`Span::join` is not stable).
/// `name` is its most telling single token: the last path segment's name (`Result` in
/// `std::io::Result<u64>`), else the first token.
///
/// `first`, `last` and [`ReturnSpans::respan`] serve `#[scheduled]` only, hence the `allow`
/// without its feature (not `expect`: rustc does not count its "fields never read" report
/// toward an `expect` on the struct or the fields).
#[cfg_attr(not(feature = "scheduled"), allow(dead_code))]
pub(crate) struct ReturnSpans {
    pub(crate) first: Span,
    pub(crate) last: Span,
    pub(crate) name: Span,
}

impl ReturnSpans {
    pub(crate) fn of(ty: &Type) -> Self {
        let mut tokens = ty.to_token_stream().into_iter();
        let first = tokens.next().map_or_else(Span::call_site, |t| t.span());
        let last = tokens.last().map_or(first, |t| t.span());
        let name = match ty {
            Type::Path(path) => path
                .path
                .segments
                .last()
                .map_or(first, |segment| segment.ident.span()),
            _ => first,
        };
        Self { first, last, name }
    }

    /// `tokens` spanned over the return type.
    #[cfg_attr(not(feature = "scheduled"), allow(dead_code))]
    pub(crate) fn respan(&self, tokens: TokenStream) -> TokenStream {
        let mut tokens = respan(tokens, self.last).into_iter();
        let head = tokens.next().map(|mut tree| {
            tree.set_span(self.first);
            tree
        });
        head.into_iter().chain(tokens).collect()
    }
}

/// `client = expr`: evaluated without an expected type (so `if`/`match` expressions work), then
/// deref-coerced from `&Client`, `&&Client` or `&Arc<Client>` and cloned (see the module docs).
/// A type error belongs to the expression, so the call is spanned there.
pub(crate) fn given_client(expr: &syn::Expr, krate: &syn::Path, client: &Ident) -> TokenStream {
    let span = expr.span();
    let expr = Group::new(Delimiter::Parenthesis, expr.to_token_stream());
    let given = Ident::new("__dlock_given", Span::mixed_site().located_at(span));
    let clone = respan(quote!(#krate::Client::clone), span);
    quote! {
        let #given = &#expr;
        let #client: #krate::Client = #clone(#given);
    }
}

/// `locked` with the process-wide default client; without one, the call returns the error
/// through `R`, with `from_error` (`ErrorOutput::from_lock_error`, a path in `__private`).
/// The conversion comes after `locked` (a `match`, not an early `return`): rustc checks the
/// `run` call first, and drops the conversion's error on a wrong return type as a duplicate of
/// that one.
pub(crate) fn default_client(
    krate: &syn::Path,
    from_error: TokenStream,
    at: Span,
    client: &Ident,
    locked: TokenStream,
) -> TokenStream {
    let private = quote!(#krate::__private);
    let from_lock_error = respan(quote!(#private::#from_error), at);
    let error = Ident::new("__dlock_error", Span::mixed_site());
    let lock_error = quote_spanned!(at=> #from_lock_error(#error));
    quote! {
        match #private::default_client() {
            ::core::result::Result::Ok(#client) => { #locked }
            ::core::result::Result::Err(#error) => #lock_error,
        }
    }
}

/// `d` as a `const` expression: `StdDuration::from_millis(ms)` through `private` (every
/// duration of the grammar is whole milliseconds), and `None`/`Some(…)` of one.
pub(crate) fn duration(private: &TokenStream, d: std::time::Duration) -> TokenStream {
    let ms = Literal::u64_unsuffixed(u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    quote!(#private::StdDuration::from_millis(#ms))
}

/// As [`duration`], for an optional one.
pub(crate) fn option_duration(
    private: &TokenStream,
    d: Option<std::time::Duration>,
) -> TokenStream {
    match d {
        Some(d) => {
            let d = duration(private, d);
            quote!(::core::option::Option::Some(#d))
        }
        None => quote!(::core::option::Option::None),
    }
}

/// The `Spec` literal.
fn spec(plan: &Plan) -> TokenStream {
    let krate = &plan.krate;
    let private = quote!(#krate::__private);
    let duration = |d: std::time::Duration| duration(&private, d);
    let ttl = option_duration(&private, plan.ttl);
    let max_hold = option_duration(&private, plan.max_hold);
    let wait = match plan.wait {
        Wait::No => quote!(#krate::Wait::No),
        Wait::AtMost(d) => {
            let d = duration(d);
            quote!(#krate::Wait::AtMost(#d))
        }
        Wait::Forever => quote!(#krate::Wait::Forever),
    };
    let on_lost = if plan.signal {
        quote!(#krate::OnLost::Signal)
    } else {
        quote!(#krate::OnLost::Cancel)
    };
    let kind = match plan.kind {
        LockKind::Mutex => quote!(#private::Kind::Mutex),
        LockKind::Read => quote!(#private::Kind::Read),
        LockKind::Write => quote!(#private::Kind::Write),
        LockKind::Semaphore { permits, of } => {
            let (permits, of) = (
                Literal::u32_unsuffixed(permits),
                Literal::u32_unsuffixed(of),
            );
            quote!(#private::Kind::Semaphore { permits: #permits, limit: #of })
        }
    };
    let (watchdog, reentrant, label) = (plan.watchdog, plan.reentrant, &plan.label);
    quote! {
        #private::Spec {
            kind: #kind,
            ttl: #ttl,
            watchdog: #watchdog,
            max_hold: #max_hold,
            wait: #wait,
            on_lost: #on_lost,
            reentrant: #reentrant,
            label: #label,
        }
    }
}

/// Statements that build the lock name in `key`.
pub(crate) fn key_code(parts: &[KeyPiece], private: &TokenStream, key: &Ident) -> TokenStream {
    let has_values = parts.iter().any(|p| matches!(p, KeyPiece::Value(_)));
    let (first, rest) = match parts.split_first() {
        Some((KeyPiece::Text(text), rest)) => (quote!(#private::String::from(#text)), rest),
        _ => (quote!(#private::String::new()), parts),
    };
    if !has_values {
        return quote!(let #key = #first;);
    }
    let steps = rest.iter().map(|part| match part {
        KeyPiece::Text(text) => quote!(#key.push_str(#text);),
        KeyPiece::Value(value) => key_value(value, private, key),
    });
    quote! {
        let mut #key = #first;
        #(#steps)*
    }
}

/// `key_part(&param.field, &mut key);`, every token spanned on the parameter: a type that is not
/// a `KeyPart`, and a field that does not exist, are reported there. (Spanning the field names
/// on the key literal instead would make rustc underline everything from the attribute to the
/// parameter for the `KeyPart` error.)
fn key_value(value: &KeyValue, private: &TokenStream, key: &Ident) -> TokenStream {
    let root = &value.root;
    let span = root.span();
    // The field names are located on the parameter but marked as the macro's: rustc then offers
    // no edit for an unknown field (it would rewrite the parameter's name, which is not where
    // the field is written).
    let field = Span::call_site().located_at(span);
    // `template::placeholder` admits only `u32` indices and names that are identifiers, as
    // written or as `r#name` (a keyword such as `type`, never `self`, `super`…).
    let members = value.members.iter().map(|m| match m.parse::<u32>() {
        Ok(index) => syn::Index { index, span: field }.to_token_stream(),
        Err(_) if template::needs_raw(m) => Ident::new_raw(m, field).to_token_stream(),
        Err(_) => Ident::new(m, field).to_token_stream(),
    });
    let expr = if value.deref {
        quote_spanned!(span=> &*#root)
    } else {
        // In parentheses spanned on the parameter: the value's span, where a type that is not a
        // `KeyPart` is reported, is then the parameter's alone.
        let mut place = Group::new(Delimiter::Parenthesis, quote!(#root #(.#members)*));
        place.set_span(span);
        quote_spanned!(span=> &#place)
    };
    let key_part = respan(quote!(#private::key_part), span);
    quote_spanned!(span=> #key_part(#expr, &mut #key);)
}

/// A path with every token on `span` (for paths whose errors belong to a user's token), its
/// inner names marked as the macro's though still located there.
///
/// The mark keeps rustc's `unused_qualifications` off the path: it skips paths with a name from
/// a macro, and would otherwise flag one that starts with a `crate = "crate::deps::locks"` in
/// scope, with a fix that deletes the user's token the path is spanned on. The first and last
/// tokens stay the user's, so the path's own span (first to last) is unchanged.
pub(crate) fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    let inner = Span::mixed_site().located_at(span);
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let last = tokens.len().saturating_sub(1);
    tokens
        .into_iter()
        .enumerate()
        .map(|(i, mut tree)| {
            let is_inner_name = matches!(tree, TokenTree::Ident(_)) && i != 0 && i != last;
            tree.set_span(if is_inner_name { inner } else { span });
            tree
        })
        .collect()
}

/// Replaces `impl Trait` by `_` (it cannot be named in a turbofish).
fn erase_impl_trait(ty: &mut Type) {
    match ty {
        Type::ImplTrait(_) => {
            *ty = Type::Infer(syn::TypeInfer {
                underscore_token: Default::default(),
            })
        }
        Type::Path(path) => {
            for segment in &mut path.path.segments {
                if let PathArguments::AngleBracketed(args) = &mut segment.arguments {
                    for arg in &mut args.args {
                        if let GenericArgument::Type(ty) = arg {
                            erase_impl_trait(ty);
                        }
                    }
                }
            }
        }
        Type::Reference(r) => erase_impl_trait(&mut r.elem),
        Type::Tuple(t) => t.elems.iter_mut().for_each(erase_impl_trait),
        Type::Array(a) => erase_impl_trait(&mut a.elem),
        Type::Slice(s) => erase_impl_trait(&mut s.elem),
        Type::Paren(p) => erase_impl_trait(&mut p.elem),
        Type::Group(g) => erase_impl_trait(&mut g.elem),
        _ => {}
    }
}
