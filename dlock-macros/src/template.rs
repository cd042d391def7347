//! Lock-name templates: `key = "order:{order_id}"`, `"stock:{item.sku}"`, `"user:{self.id}"`.
//!
//! ```text
//! template    := (text | placeholder)+
//! placeholder := "{" root ("." member)* "}"
//! root        := identifier                 a parameter, or `self` in a method
//! member      := identifier | digits        a field, or a tuple index
//! identifier  := ["r#"] name                `{msg.type}` and `{msg.r#type}` both name `r#type`
//! ```
//! Field paths only: no calls, indexing or `.await` (`{fut.await}` is an error, not an await:
//! the key is built before the lock is taken, and a placeholder must not run code). A keyword
//! used as a name is a raw identifier (`r#type`); `self`, `Self`, `super` and `crate` cannot be
//! one, so they are not field names. This module only reads the string; `validate.rs` checks the roots against the function's
//! parameters. The text parts obey the rules of a lock name in dlock-core (no control
//! characters; braces cannot appear there since they delimit placeholders), so a template that
//! compiles can only be rejected at run time for the *values* interpolated into it.

use crate::limits::MAX_NAME_LEN;

/// One piece of a template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Segment {
    /// Text copied into the lock name as written.
    Text(String),
    /// A value written with `KeyPart`.
    Placeholder(Placeholder),
}

/// `{root.member.member}`, names without their `r#`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Placeholder {
    /// A parameter name, or `self`.
    pub(crate) root: String,
    /// Field names or tuple indices, outermost first.
    pub(crate) members: Vec<String>,
}

/// The names that are no identifiers even as `r#name`: never a parameter or a field.
const NOT_RAW: [&str; 5] = ["self", "Self", "super", "crate", "_"];

/// Why a template was rejected; rendered with [`TemplateError::message`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TemplateError {
    Empty,
    /// A `{` without its `}`.
    Unclosed,
    /// A `}` without its `{`.
    Unmatched,
    /// `{` inside a placeholder.
    Nested,
    /// `{}`.
    EmptyPlaceholder,
    /// A placeholder that is not `name(.member)*`.
    BadPlaceholder(String),
    /// `.await` in a placeholder (the whole placeholder).
    Await(String),
    /// `self`, `Self`, `super` or `crate` as a field, or `r#` before one of them: (placeholder,
    /// name).
    NotAField(String, String),
    /// A control character in the text.
    Control(char),
    /// The text alone is longer than a lock name may be.
    TooLong(usize),
}

impl TemplateError {
    /// The compile error for `key = "template"`, naming the fix.
    pub(crate) fn message(&self, template: &str) -> String {
        let at = format!("`key = {template:?}`");
        match self {
            Self::Empty => {
                "empty `key`; name the lock, e.g. `key = \"order:{order_id}\"`".to_owned()
            }
            Self::Unclosed => format!("unclosed `{{` in {at}; close the placeholder with `}}`"),
            Self::Unmatched => format!(
                "unmatched `}}` in {at}; lock names cannot contain braces, use another \
                 character such as `:`"
            ),
            Self::Nested => format!("`{{` inside a placeholder in {at}; placeholders do not nest"),
            Self::EmptyPlaceholder => {
                format!("empty placeholder `{{}}` in {at}; name a parameter, e.g. `{{order_id}}`")
            }
            Self::BadPlaceholder(inner) => format!(
                "invalid placeholder `{{{inner}}}` in {at}; write a parameter name with optional \
                 fields, e.g. `{{order_id}}`, `{{order.id}}` or `{{self.id}}` (no spaces, calls \
                 or indexing)"
            ),
            Self::Await(inner) => format!(
                "`.await` in the placeholder `{{{inner}}}` of {at}: a placeholder names a \
                 parameter and its fields, it cannot await (or call) anything, since the key is \
                 built before the lock is taken; await the value before the call and pass the \
                 result as a parameter (a field named `await` is written `r#await`)"
            ),
            Self::NotAField(inner, name) => format!(
                "`{name}` in the placeholder `{{{inner}}}` of {at} cannot be a field name; write \
                 a parameter name with optional fields, e.g. `{{order.id}}` or `{{self.id}}`"
            ),
            Self::Control(c) => format!(
                "the control character {c:?} in {at} cannot be part of a lock name; use \
                 printable characters"
            ),
            Self::TooLong(len) => format!(
                "the text of {at} is {len} bytes long; lock names are limited to \
                 {MAX_NAME_LEN} bytes (dlock_core::MAX_NAME_LEN)"
            ),
        }
    }
}

/// Parses a template into its segments.
pub(crate) fn parse(template: &str) -> Result<Vec<Segment>, TemplateError> {
    if template.is_empty() {
        return Err(TemplateError::Empty);
    }
    let mut segments = Vec::new();
    let mut text = String::new();
    let mut chars = template.chars();
    while let Some(c) = chars.next() {
        match c {
            '{' => {
                let mut inner = String::new();
                loop {
                    match chars.next() {
                        None => return Err(TemplateError::Unclosed),
                        Some('}') => break,
                        Some('{') => return Err(TemplateError::Nested),
                        Some(c) => inner.push(c),
                    }
                }
                if !text.is_empty() {
                    segments.push(Segment::Text(std::mem::take(&mut text)));
                }
                segments.push(Segment::Placeholder(placeholder(&inner)?));
            }
            '}' => return Err(TemplateError::Unmatched),
            c if c.is_control() => return Err(TemplateError::Control(c)),
            c => text.push(c),
        }
    }
    if !text.is_empty() {
        segments.push(Segment::Text(text));
    }
    let fixed: usize = segments
        .iter()
        .map(|s| match s {
            Segment::Text(t) => t.len(),
            Segment::Placeholder(_) => 0,
        })
        .sum();
    if fixed > MAX_NAME_LEN {
        return Err(TemplateError::TooLong(fixed));
    }
    Ok(segments)
}

fn placeholder(inner: &str) -> Result<Placeholder, TemplateError> {
    if inner.is_empty() {
        return Err(TemplateError::EmptyPlaceholder);
    }
    let bad = || TemplateError::BadPlaceholder(inner.to_owned());
    let mut parts = inner.split('.');
    let first = parts.next().unwrap_or_default();
    let root = match name(first) {
        // `{self}` is the receiver, `{r#self}` nothing; `{super}` and the like are reported as
        // unknown parameters, with the list of the function's.
        Some(root) if root == "_" || (first.starts_with("r#") && NOT_RAW.contains(&root)) => {
            return Err(bad());
        }
        Some(root) => root,
        None => return Err(bad()),
    };
    let members = parts
        .map(|m| match name(m) {
            Some("await") if !m.starts_with("r#") => Err(TemplateError::Await(inner.to_owned())),
            Some(field) if NOT_RAW.contains(&field) => {
                Err(TemplateError::NotAField(inner.to_owned(), m.to_owned()))
            }
            Some(field) => Ok(field.to_owned()),
            None if is_index(m) => Ok(m.to_owned()),
            None => Err(bad()),
        })
        .collect::<Result<_, _>>()?;
    Ok(Placeholder {
        root: root.to_owned(),
        members,
    })
}

/// An identifier, `r#` or not, without its `r#`; `None` if `s` is not one. (`r#self` and the
/// other [`NOT_RAW`] names are returned too, for the caller to reject.)
fn name(s: &str) -> Option<&str> {
    let bare = s.strip_prefix("r#").unwrap_or(s);
    is_ident(bare).then_some(bare)
}

/// A plain Rust identifier or keyword (ASCII; `_` included, for the callers to reject).
fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether `name` must be written `r#name` to be an identifier: a keyword of some edition.
/// (`syn` knows the keywords up to edition 2021; `gen` is reserved since 2024.)
pub(crate) fn needs_raw(name: &str) -> bool {
    name == "gen" || syn::parse_str::<syn::Ident>(name).is_err()
}

/// A tuple index: digits without a leading zero, within `u32` (the expansion emits it as a
/// `syn::Index`; a larger number would reach `Ident::new` and panic the macro).
fn is_index(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_digit())
        && (s == "0" || !s.starts_with('0'))
        && s.parse::<u32>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn text(s: &str) -> Segment {
        Segment::Text(s.to_owned())
    }

    fn ph(root: &str, members: &[&str]) -> Segment {
        Segment::Placeholder(Placeholder {
            root: root.to_owned(),
            members: members.iter().map(|m| (*m).to_owned()).collect(),
        })
    }

    /// Writes segments back as a template.
    fn render(segments: &[Segment]) -> String {
        segments
            .iter()
            .map(|s| match s {
                Segment::Text(t) => t.clone(),
                Segment::Placeholder(p) => {
                    let mut path = vec![p.root.clone()];
                    path.extend(p.members.iter().cloned());
                    format!("{{{}}}", path.join("."))
                }
            })
            .collect()
    }

    #[test]
    fn splits_text_and_placeholders() {
        assert_eq!(parse("fixed"), Ok(vec![text("fixed")]));
        assert_eq!(
            parse("order:{order_id}"),
            Ok(vec![text("order:"), ph("order_id", &[])])
        );
        assert_eq!(
            parse("{self.shop.id}:{pair.0}{x}"),
            Ok(vec![
                ph("self", &["shop", "id"]),
                text(":"),
                ph("pair", &["0"]),
                ph("x", &[])
            ])
        );
    }

    #[test]
    fn rejects_malformed_templates() {
        use TemplateError::*;
        assert_eq!(parse(""), Err(Empty));
        assert_eq!(parse("a{b"), Err(Unclosed));
        assert_eq!(parse("a}b"), Err(Unmatched));
        assert_eq!(parse("{a{b}}"), Err(Nested));
        assert_eq!(parse("a{}"), Err(EmptyPlaceholder));
        assert_eq!(parse("{ a }"), Err(BadPlaceholder(" a ".into())));
        assert_eq!(parse("{a.}"), Err(BadPlaceholder("a.".into())));
        assert_eq!(parse("{a.b()}"), Err(BadPlaceholder("a.b()".into())));
        assert_eq!(parse("{0}"), Err(BadPlaceholder("0".into())));
        assert_eq!(parse("{_}"), Err(BadPlaceholder("_".into())));
        assert_eq!(parse("{a.01}"), Err(BadPlaceholder("a.01".into())));
        assert_eq!(
            parse("{a.4294967296}"),
            Err(BadPlaceholder("a.4294967296".into()))
        );
        assert_eq!(parse("{a.4294967295}"), Ok(vec![ph("a", &["4294967295"])]));
        assert_eq!(parse("{r#self}"), Err(BadPlaceholder("r#self".into())));
        assert_eq!(parse("{r#_.a}"), Err(BadPlaceholder("r#_.a".into())));
        assert_eq!(parse("{a.r#0}"), Err(BadPlaceholder("a.r#0".into())));
        assert_eq!(parse("{a.r#}"), Err(BadPlaceholder("a.r#".into())));
        assert_eq!(parse("a\tb"), Err(Control('\t')));
        let long = "x".repeat(MAX_NAME_LEN + 1);
        assert_eq!(parse(&long), Err(TooLong(MAX_NAME_LEN + 1)));
        assert!(parse(&format!("{}{{id}}", "x".repeat(MAX_NAME_LEN))).is_ok());
    }

    #[test]
    fn field_paths_only() {
        use TemplateError::*;
        assert_eq!(parse("k:{fut.await}"), Err(Await("fut.await".into())));
        assert_eq!(parse("{a.b.await.c}"), Err(Await("a.b.await.c".into())));
        assert_eq!(
            parse("{a.self}"),
            Err(NotAField("a.self".into(), "self".into()))
        );
        assert_eq!(
            parse("{a.r#super}"),
            Err(NotAField("a.r#super".into(), "r#super".into()))
        );
        assert_eq!(parse("{a._}"), Err(NotAField("a._".into(), "_".into())));
        let message = Await("fut.await".into()).message("k:{fut.await}");
        assert!(
            message.starts_with("`.await` in the placeholder `{fut.await}`"),
            "{message}"
        );
    }

    #[test]
    fn keywords_are_raw_identifiers() {
        // A field named `r#type`, written either way; `r#await` is a field, not an await.
        assert_eq!(parse("{msg.type}"), Ok(vec![ph("msg", &["type"])]));
        assert_eq!(parse("{msg.r#type}"), Ok(vec![ph("msg", &["type"])]));
        assert_eq!(parse("{r#fn.r#await}"), Ok(vec![ph("fn", &["await"])]));
        assert_eq!(parse("{r#id.0}"), Ok(vec![ph("id", &["0"])]));
        for keyword in [
            "type", "match", "async", "await", "dyn", "try", "gen", "r#x",
        ] {
            let name = keyword.trim_start_matches("r#");
            assert_eq!(needs_raw(name), keyword != "r#x", "{keyword}");
        }
        assert!(!needs_raw("id") && !needs_raw("types"));
    }

    #[test]
    fn messages_say_what_to_write() {
        let msg = TemplateError::EmptyPlaceholder.message("order:{}");
        assert_eq!(
            msg,
            "empty placeholder `{}` in `key = \"order:{}\"`; name a parameter, e.g. `{order_id}`"
        );
    }

    fn valid_segment() -> impl Strategy<Value = Segment> {
        prop_oneof![
            "[a-z:/_#-]{1,8}".prop_map(Segment::Text),
            (
                "[a-z][a-z0-9_]{0,6}",
                proptest::collection::vec(
                    // Any name but the few that are no field (`self`) or an `.await`.
                    "[a-z][a-z_]{0,4}|[1-9]"
                        .prop_filter("a field name", |m| m != "await" && !NOT_RAW.contains(&&**m)),
                    0..3
                )
            )
                .prop_map(|(root, members)| Segment::Placeholder(Placeholder { root, members })),
        ]
    }

    /// Joins adjacent text segments, as the parser does.
    fn normalise(segments: Vec<Segment>) -> Vec<Segment> {
        let mut out: Vec<Segment> = Vec::new();
        for s in segments {
            match (out.last_mut(), s) {
                (Some(Segment::Text(prev)), Segment::Text(t)) => prev.push_str(&t),
                (_, s) => out.push(s),
            }
        }
        out
    }

    proptest! {
        #[test]
        fn valid_templates_round_trip(segments in proptest::collection::vec(valid_segment(), 1..6)) {
            let segments = normalise(segments);
            prop_assert_eq!(parse(&render(&segments)), Ok(segments));
        }

        #[test]
        fn arbitrary_strings_never_panic(template in "\\PC*") {
            if let Err(e) = parse(&template) {
                prop_assert!(!e.message(&template).is_empty());
            }
        }

        #[test]
        fn brace_soup_never_panics(template in "[{}a.0 ]{0,12}") {
            let _ = parse(&template);
        }
    }
}
