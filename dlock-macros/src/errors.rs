//! Collects every compile error of one attribute, so that the user sees them all at once
//! (parse, validation and shape errors alike) instead of fixing them one build at a time; and
//! the shapes of a check's findings ([`Checked`], [`Problems`]), shared by every check.

use proc_macro2::{Span, TokenStream};

/// A check's result: the value, or the error's span and message.
pub(crate) type Checked<T> = Result<T, (Span, String)>;

/// Every problem a check found, each with its span and message.
pub(crate) type Problems = Vec<(Span, String)>;

/// The errors found so far.
#[derive(Default)]
pub(crate) struct Errors {
    combined: Option<syn::Error>,
}

impl Errors {
    /// Records an error at `span`.
    pub(crate) fn push(&mut self, span: Span, message: impl std::fmt::Display) {
        self.push_error(syn::Error::new(span, message));
    }

    /// Records an error syn produced.
    pub(crate) fn push_error(&mut self, error: syn::Error) {
        match &mut self.combined {
            Some(combined) => combined.combine(error),
            None => self.combined = Some(error),
        }
    }

    /// Whether nothing was reported.
    pub(crate) fn is_empty(&self) -> bool {
        self.combined.is_none()
    }

    /// `compile_error!` invocations for every error, or `None` if there were none.
    pub(crate) fn into_compile_errors(self) -> Option<TokenStream> {
        self.combined.map(|e| e.to_compile_error())
    }
}
