//! The annotated function: which of the two accepted shapes it has, what it returns, and which
//! parameters a key template may name.
//!
//! A key may name a plain parameter (`order_id: u64`) or a name bound by a parameter's pattern
//! (`Path(order_id): Path<u64>`, `State(app): State<App>`, `Json(mut body): Json<Order>`,
//! `(a, b): (u32, u32)`, nested, with `mut`, `ref` or `@`): an `async fn` keeps its signature, so
//! every such name is a local of the function when the key is built. Two bindings cannot be
//! keyed on, and say why: the rest of a slice pattern (`rest @ ..`, a slice, never a key part),
//! and any name of a pattern in an `#[async_trait]` method, which async-trait moves into its
//! body (it renames the parameter `__argN`) after the point where the key is built.
//!
//! * An `async fn` (free function, method, generic, in a trait impl with native async fns).
//! * The output of `#[async_trait]`, which runs first (it sits on the impl block) and leaves a
//!   plain `fn` returning `Pin<Box<dyn Future<Output = R> + Send + 'async_trait>>` whose body ends
//!   in `Box::pin(async move { … })`. As in tracing-attributes, the lock then wraps that inner
//!   async block, and `R` is read from the `Output = R` binding.

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{
    Expr, ExprAsync, ExprCall, FnArg, GenericArgument, Ident, ItemFn, Pat, PathArguments,
    ReturnType, Stmt, Type, TypeParamBound,
};

use crate::errors::Errors;

/// Where the code to run under the lock is.
pub(crate) enum Body<'a> {
    /// `async fn`: the function's block.
    AsyncFn,
    /// `#[async_trait]` output: the async block passed to `Box::pin` in the statement at `stmt`.
    AsyncTrait {
        stmt: usize,
        call: &'a ExprCall,
        block: &'a ExprAsync,
    },
}

/// A parameter that a key template may name: a plain `name: Type` binding, or a name that a
/// parameter's pattern binds.
pub(crate) struct Param {
    pub(crate) ident: Ident,
    /// The parameter is a reference (`&T`, `&mut T`): it is interpolated as `&*name`.
    pub(crate) is_ref: bool,
}

/// What an attribute says about the functions it goes on, in the messages of [`Function::read`].
pub(crate) struct Wording {
    /// `#[distributed_lock]`.
    pub(crate) attribute: &'static str,
    /// Why the function cannot return `()`, and what to return.
    pub(crate) unit_return: &'static str,
}

/// `#[distributed_lock]`'s wording.
pub(crate) const LOCK: Wording = Wording {
    attribute: "#[distributed_lock]",
    unit_return: "a `#[distributed_lock]` function reports a busy or lost lock through \
    its return type; return `Result<T, E>` with `E: From<dlock_core::Error>` (e.g. \
    `-> Result<(), dlock_core::Error>`), or `Result<Option<T>, E>` with `on_busy = \"skip\"`",
};

/// What the macro needs to know about the function.
pub(crate) struct Function<'a> {
    pub(crate) item: &'a ItemFn,
    pub(crate) body: Body<'a>,
    /// The type the caller receives (`R`); `None` when it is `()` (already reported).
    pub(crate) output: Option<&'a Type>,
    pub(crate) params: Vec<Param>,
    /// The `self` token of a method.
    pub(crate) receiver: Option<Span>,
    /// Names bound where a key cannot read them, each with the reason (see the module docs).
    pub(crate) unkeyable: Vec<Unkeyable>,
}

/// A name a parameter's pattern binds that a key cannot name.
pub(crate) struct Unkeyable {
    pub(crate) ident: Ident,
    pub(crate) why: Why,
}

/// Why a bound name cannot be part of a key.
#[derive(Clone, Copy)]
pub(crate) enum Why {
    /// `rest @ ..` in a slice pattern.
    SliceRest,
    /// A pattern of an `#[async_trait]` method (async-trait binds it inside its body).
    AsyncTrait,
}

impl<'a> Function<'a> {
    /// Reads `item`; `None` (with an error) when it has neither accepted shape.
    pub(crate) fn read(item: &'a ItemFn, wording: &Wording, errors: &mut Errors) -> Option<Self> {
        let sig = &item.sig;
        let (body, output) = if sig.asyncness.is_some() {
            (Body::AsyncFn, async_fn_output(item, wording, errors))
        } else if let Some((body, output)) = async_trait_shape(item) {
            (
                body,
                unit_checked(output, sig.ident.span(), wording, errors),
            )
        } else {
            errors.push(
                sig.fn_token.span,
                format!(
                    "`{}` needs an `async fn`; add `async` (for a trait method, use native \
                     `async fn` in traits or put `#[async_trait]` on the impl block)",
                    wording.attribute
                ),
            );
            return None;
        };
        let mut function = Function {
            item,
            body,
            output,
            params: Vec::new(),
            receiver: None,
            unkeyable: Vec::new(),
        };
        function.read_params();
        Some(function)
    }

    fn read_params(&mut self) {
        let from_async_trait = matches!(self.body, Body::AsyncTrait { .. });
        for input in &self.item.sig.inputs {
            match input {
                FnArg::Receiver(receiver) => self.receiver = Some(receiver.self_token.span),
                FnArg::Typed(typed) => match &*typed.pat {
                    Pat::Ident(pat) if pat.subpat.is_none() => {
                        // async_trait renames destructured parameters to `__argN`.
                        let renamed =
                            from_async_trait && pat.ident.to_string().starts_with("__arg");
                        if !renamed {
                            self.params.push(Param {
                                ident: pat.ident.clone(),
                                is_ref: matches!(&*typed.ty, Type::Reference(_)),
                            });
                        }
                    }
                    pat => self.read_pattern(pat),
                },
            }
        }
        if let Body::AsyncTrait { block, .. } = &self.body {
            let mut names = Names::default();
            for stmt in &block.block.stmts {
                if let Stmt::Local(local) = stmt
                    && local
                        .init
                        .as_ref()
                        .is_some_and(|init| is_renamed_arg(&init.expr))
                {
                    names.read(&local.pat);
                }
            }
            self.unkeyable.extend(names.all().map(|ident| Unkeyable {
                ident,
                why: Why::AsyncTrait,
            }));
        }
    }

    /// The names an `async fn` parameter's pattern binds: keyable, but for a slice's rest.
    fn read_pattern(&mut self, pat: &Pat) {
        let mut names = Names::default();
        names.read(pat);
        self.params
            .extend(names.bound.into_iter().map(|ident| Param {
                ident,
                is_ref: false,
            }));
        self.unkeyable
            .extend(names.slice_rests.into_iter().map(|ident| Unkeyable {
                ident,
                why: Why::SliceRest,
            }));
    }
}

/// `__argN`, the name async-trait gives a destructured parameter, or the block it binds the
/// pattern from (`let (a, b) = { let __arg1 = __arg1; __arg1 };`).
fn is_renamed_arg(expr: &Expr) -> bool {
    match expr {
        Expr::Path(path) => path
            .path
            .get_ident()
            .is_some_and(|ident| ident.to_string().starts_with("__arg")),
        Expr::Block(block) => match block.block.stmts.last() {
            Some(Stmt::Expr(expr, None)) => is_renamed_arg(expr),
            _ => false,
        },
        _ => false,
    }
}

/// The return type of an `async fn`, or `None` with an error when it is `()`.
fn async_fn_output<'a>(
    item: &'a ItemFn,
    wording: &Wording,
    errors: &mut Errors,
) -> Option<&'a Type> {
    match &item.sig.output {
        ReturnType::Default => {
            errors.push(item.sig.paren_token.span.close(), wording.unit_return);
            None
        }
        ReturnType::Type(_, ty) => unit_checked(ty, ty.span(), wording, errors),
    }
}

fn unit_checked<'a>(
    ty: &'a Type,
    span: Span,
    wording: &Wording,
    errors: &mut Errors,
) -> Option<&'a Type> {
    if matches!(ty, Type::Tuple(tuple) if tuple.elems.is_empty()) {
        errors.push(span, wording.unit_return);
        return None;
    }
    Some(ty)
}

/// Recognises `fn …(…) -> Pin<Box<dyn Future<Output = R> …>> { …; Box::pin(async move { … }) }`.
fn async_trait_shape(item: &ItemFn) -> Option<(Body<'_>, &Type)> {
    let ReturnType::Type(_, ty) = &item.sig.output else {
        return None;
    };
    let output = future_output(ty)?;
    let (stmt, expr) =
        item.block
            .stmts
            .iter()
            .enumerate()
            .rev()
            .find_map(|(i, stmt)| match stmt {
                Stmt::Expr(expr, None) => Some((i, expr)),
                _ => None,
            })?;
    let Expr::Call(call) = expr else {
        return None;
    };
    let Expr::Path(func) = &*call.func else {
        return None;
    };
    let segments: Vec<String> = func
        .path
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    if !segments.ends_with(&["Box".to_owned(), "pin".to_owned()]) || call.args.len() != 1 {
        return None;
    }
    let Some(Expr::Async(block)) = call.args.first() else {
        return None;
    };
    Some((Body::AsyncTrait { stmt, call, block }, output))
}

/// `R` in `Pin<Box<dyn Future<Output = R> + …>>`.
fn future_output(ty: &Type) -> Option<&Type> {
    let boxed = single_generic(ty, "Pin")?;
    let Type::TraitObject(object) = single_generic(boxed, "Box")? else {
        return None;
    };
    object.bounds.iter().find_map(|bound| {
        let TypeParamBound::Trait(bound) = bound else {
            return None;
        };
        let last = bound.path.segments.last()?;
        let PathArguments::AngleBracketed(args) = &last.arguments else {
            return None;
        };
        if last.ident != "Future" {
            return None;
        }
        args.args.iter().find_map(|arg| match arg {
            GenericArgument::AssocType(assoc) if assoc.ident == "Output" => Some(&assoc.ty),
            _ => None,
        })
    })
}

/// `T` in `Name<T>` (any path ending in `Name`).
fn single_generic<'a>(ty: &'a Type, name: &str) -> Option<&'a Type> {
    let Type::Path(path) = ty else {
        return None;
    };
    let last = path.path.segments.last()?;
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    match (last.ident == name, args.args.first()) {
        (true, Some(GenericArgument::Type(inner))) if args.args.len() == 1 => Some(inner),
        _ => None,
    }
}

/// The names a parameter's pattern binds.
#[derive(Default)]
struct Names {
    /// Bound to a value of the parameter (or a reference into it).
    bound: Vec<Ident>,
    /// Bound to the rest of a slice pattern (`rest @ ..`).
    slice_rests: Vec<Ident>,
}

impl Names {
    fn read(&mut self, pat: &Pat) {
        match pat {
            Pat::Ident(p) => match p.subpat.as_ref().map(|(_, sub)| &**sub) {
                Some(Pat::Rest(_)) => self.slice_rests.push(p.ident.clone()),
                Some(sub) => {
                    self.bound.push(p.ident.clone());
                    self.read(sub);
                }
                None => self.bound.push(p.ident.clone()),
            },
            Pat::Tuple(p) => p.elems.iter().for_each(|p| self.read(p)),
            Pat::TupleStruct(p) => p.elems.iter().for_each(|p| self.read(p)),
            Pat::Struct(p) => p.fields.iter().for_each(|f| self.read(&f.pat)),
            Pat::Slice(p) => p.elems.iter().for_each(|p| self.read(p)),
            Pat::Reference(p) => self.read(&p.pat),
            Pat::Paren(p) => self.read(&p.pat),
            Pat::Type(p) => self.read(&p.pat),
            // Literals, ranges, paths, `_` and `..` bind nothing; an or-pattern is refutable
            // (rustc refuses it in a parameter), and a macro's bindings cannot be seen here.
            _ => {}
        }
    }

    fn all(self) -> impl Iterator<Item = Ident> {
        self.bound.into_iter().chain(self.slice_rests)
    }
}
