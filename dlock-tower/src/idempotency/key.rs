//! The `Idempotency-Key` header's value: a Structured Field String (`"8e03978e-…"`, the
//! draft's form, RFC 8941 §3.3.3) or, for clients written against earlier conventions
//! (Stripe's and others'), the bare token without quotes. Parameters after a String (`;a=1`)
//! are allowed by RFC 8941 and ignored.

/// The longest key accepted, in bytes: a UUID is 36; 255 leaves room for any client's scheme
/// and keeps the record's scope digest the only place the key's length matters.
pub(crate) const MAX_KEY_LEN: usize = 255;

/// Why a header value is not a key: the 400 response's detail.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct BadKey(pub(crate) String);

/// The key in `value`, unquoted and unescaped.
pub(crate) fn parse(value: &[u8]) -> Result<String, BadKey> {
    let value = trim(value);
    let key = if value.first() == Some(&b'"') {
        sf_string(value)?
    } else {
        bare(value)?
    };
    if key.is_empty() {
        return Err(BadKey("the Idempotency-Key is empty".into()));
    }
    if key.len() > MAX_KEY_LEN {
        return Err(BadKey(format!(
            "the Idempotency-Key is {} bytes long; the limit is {MAX_KEY_LEN}",
            key.len()
        )));
    }
    Ok(key)
}

fn trim(value: &[u8]) -> &[u8] {
    let start = value
        .iter()
        .position(|b| *b != b' ' && *b != b'\t')
        .unwrap_or(value.len());
    let end = value
        .iter()
        .rposition(|b| *b != b' ' && *b != b'\t')
        .map_or(start, |i| i + 1);
    &value[start..end.max(start)]
}

/// An RFC 8941 String: `"`, printable ASCII with `\"` and `\\` escaped, `"`, then nothing or
/// parameters.
fn sf_string(value: &[u8]) -> Result<String, BadKey> {
    let mut out = String::new();
    let mut i = 1;
    loop {
        match value.get(i) {
            None => {
                return Err(BadKey(
                    "the Idempotency-Key's string has no closing quote".into(),
                ));
            }
            Some(b'"') => break,
            Some(b'\\') => match value.get(i + 1) {
                Some(c @ (b'"' | b'\\')) => {
                    out.push(char::from(*c));
                    i += 2;
                }
                _ => {
                    return Err(BadKey(
                        "the Idempotency-Key's string escapes something other than `\"` or `\\`"
                            .into(),
                    ));
                }
            },
            Some(c @ 0x20..=0x7e) => {
                out.push(char::from(*c));
                i += 1;
            }
            Some(_) => {
                return Err(BadKey(
                    "the Idempotency-Key's string has a character outside printable ASCII".into(),
                ));
            }
        }
    }
    match value.get(i + 1) {
        None | Some(b';') => Ok(out),
        Some(_) => Err(BadKey(
            "the Idempotency-Key has text after its closing quote (one key per request)".into(),
        )),
    }
}

/// A bare key: printable ASCII without spaces, quotes, backslashes, commas or semicolons (a
/// comma would be a list of keys, which the draft does not allow).
fn bare(value: &[u8]) -> Result<String, BadKey> {
    match value
        .iter()
        .find(|c| !matches!(c, 0x21..=0x7e) || matches!(c, b'"' | b'\\' | b',' | b';'))
    {
        Some(c) => Err(BadKey(format!(
            "the Idempotency-Key has the character {:?}; send it as a quoted string \
             (\"...\") or use letters, digits and `-_.:~+/=`",
            char::from(*c)
        ))),
        None => Ok(String::from_utf8_lossy(value).into_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drafts_string_form_and_the_bare_form_give_the_same_key() {
        let uuid = "8e03978e-40d5-43e8-bc93-6894a57f9324";
        assert_eq!(parse(format!("\"{uuid}\"").as_bytes()).unwrap(), uuid);
        assert_eq!(parse(uuid.as_bytes()).unwrap(), uuid);
        assert_eq!(parse(format!("  \"{uuid}\" ").as_bytes()).unwrap(), uuid);
    }

    #[test]
    fn escapes_are_undone_and_parameters_ignored() {
        assert_eq!(parse(br#""a\"b\\c""#).unwrap(), r#"a"b\c"#);
        assert_eq!(parse(br#""k-1";v=2"#).unwrap(), "k-1");
        assert_eq!(parse(br#""with space""#).unwrap(), "with space");
    }

    #[test]
    fn malformed_keys_are_refused_with_a_reason() {
        for bad in [
            &b""[..],
            b"\"\"",
            b"\"open",
            b"\"a\\nb\"",
            b"\"a\" \"b\"",
            b"a b",
            b"a,b",
            b"caf\xc3\xa9",
            b"\"caf\xc3\xa9\"",
        ] {
            assert!(
                parse(bad).is_err(),
                "{:?} was accepted",
                String::from_utf8_lossy(bad)
            );
        }
        assert!(parse("k".repeat(MAX_KEY_LEN).as_bytes()).is_ok());
        assert!(parse("k".repeat(MAX_KEY_LEN + 1).as_bytes()).is_err());
    }
}
