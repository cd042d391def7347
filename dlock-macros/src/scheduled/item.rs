//! The annotated function of `#[scheduled]`: a free, non-generic `async fn` that takes a
//! `JobContext` or nothing and returns `Result<(), E>`.
//!
//! Only the shape is checked here, each problem on its token. Whether the parameter really is a
//! `JobContext` and the return type a `Result<(), E: Display>` is left to the compiler: the
//! expansion spans its call so that a mismatch is reported on the parameter's type or on the
//! return type (see `expand.rs`).

use quote::ToTokens;
use syn::spanned::Spanned;
use syn::{FnArg, ItemFn, ReturnType, Type};

use crate::errors::Errors;

/// What the expansion needs to know about the handler.
pub(crate) struct Handler<'a> {
    pub(crate) item: &'a ItemFn,
    /// The type of the `JobContext` parameter, if it takes one.
    pub(crate) context: Option<&'a Type>,
    /// The return type (not `()`).
    pub(crate) output: &'a Type,
}

const UNIT_RETURN: &str = "a `#[scheduled]` function returns `Result<(), E>` with \
    `E: std::fmt::Display` (the error text goes into the run ledger); e.g. \
    `-> Result<(), std::io::Error>` or `-> anyhow::Result<()>`";

impl<'a> Handler<'a> {
    /// Reads `item`, reporting every shape problem; `None` if there was one.
    pub(crate) fn read(item: &'a ItemFn, errors: &mut Errors) -> Option<Self> {
        let sig = &item.sig;
        let mut ok = true;
        let mut fail = |error: syn::Error| {
            errors.push_error(error);
            ok = false;
        };
        if sig.asyncness.is_none() {
            fail(syn::Error::new(
                sig.fn_token.span,
                "`#[scheduled]` needs an `async fn`; add `async`",
            ));
        }
        if let Some(unsafety) = &sig.unsafety {
            fail(syn::Error::new(
                unsafety.span,
                "a `#[scheduled]` function cannot be `unsafe`: the scheduler calls it with no \
                 one to uphold its contract; remove `unsafe` (use `unsafe` blocks inside)",
            ));
        }
        if let Some(abi) = &sig.abi {
            fail(syn::Error::new(
                abi.span(),
                "a `#[scheduled]` function cannot have an `extern` ABI; remove it",
            ));
        }
        if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
            let span = match sig.generics.params.first() {
                Some(param) => param.span(),
                None => sig.generics.where_clause.span(),
            };
            fail(syn::Error::new(
                span,
                "a `#[scheduled]` function cannot be generic: the scheduler calls it with a \
                 `JobContext` only, so nothing would choose the type or lifetime parameters; \
                 remove them (call a generic function from the job's body instead)",
            ));
        }
        if let Some(variadic) = &sig.variadic {
            fail(syn::Error::new(
                variadic.span(),
                "a `#[scheduled]` function takes a `JobContext` or nothing",
            ));
        }
        let mut context = None;
        let mut typed = 0;
        for input in &sig.inputs {
            match input {
                FnArg::Receiver(receiver) => fail(syn::Error::new(
                    receiver.self_token.span,
                    "methods cannot be `#[scheduled]`: the scheduler has no `self` to call them \
                     on; put the attribute on a free `async fn` that builds or reaches the value \
                     (e.g. a `static`) and calls the method",
                )),
                FnArg::Typed(param) if typed == 0 => {
                    typed += 1;
                    if let Type::Reference(reference) = &*param.ty {
                        // The scheduler hands each run its own context: nothing outlives the
                        // call for a reference to point at. Spanned on the whole parameter.
                        let owned = &reference.elem;
                        fail(syn::Error::new_spanned(
                            param,
                            format!(
                                "a `#[scheduled]` function takes its `JobContext` by value: write \
                                 `{}: {}` (each run gets its own context; clone it to keep a \
                                 copy)",
                                param.pat.to_token_stream(),
                                owned.to_token_stream(),
                            ),
                        ));
                    }
                    context = Some(&*param.ty);
                }
                FnArg::Typed(typed) => fail(syn::Error::new(
                    typed.span(),
                    "a `#[scheduled]` function takes one parameter, the `JobContext` (or none); \
                     it has nothing to pass for this one: reach other values from the body (a \
                     `static`, a `OnceLock`)",
                )),
            }
        }
        let output = match &sig.output {
            ReturnType::Default => {
                fail(syn::Error::new(sig.paren_token.span.close(), UNIT_RETURN));
                None
            }
            ReturnType::Type(_, ty) if matches!(&**ty, Type::Tuple(t) if t.elems.is_empty()) => {
                fail(syn::Error::new(ty.span(), UNIT_RETURN));
                None
            }
            ReturnType::Type(_, ty) => Some(&**ty),
        };
        match output {
            Some(output) if ok => Some(Handler {
                item,
                context,
                output,
            }),
            _ => None,
        }
    }

    /// Whether the function is a method (`self`): no sibling type can be emitted next to it (it
    /// sits in an `impl` block).
    pub(crate) fn is_method(item: &ItemFn) -> bool {
        matches!(item.sig.inputs.first(), Some(FnArg::Receiver(_)))
    }
}
