//! [`KeyPart`]: what may be interpolated into a lock-name template such as
//! `#[distributed_lock(key = "order:{order_id}")]`.

use std::fmt::{self, Write};

/// A value that can be written into a lock name.
///
/// Every [`fmt::Display`] type is a key part (integers, strings, UUIDs …), written as it
/// displays. Implement it yourself for a type without `Display`, or to choose its key form.
/// The rendered name is checked at run time like any lock name (no braces, no control
/// characters, at most [`crate::MAX_NAME_LEN`] bytes).
///
/// ```
/// use dlock_core::KeyPart;
///
/// struct Region { code: &'static str }
/// impl KeyPart for Region {
///     fn write_key_part(&self, key: &mut String) {
///         key.push_str(self.code);
///     }
/// }
///
/// let mut key = String::from("stock:");
/// Region { code: "eu-west" }.write_key_part(&mut key);
/// 42u64.write_key_part(&mut key);
/// assert_eq!(key, "stock:eu-west42");
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be interpolated into a lock key",
    label = "used in a lock key template",
    note = "implement `std::fmt::Display` for `{Self}`, or `dlock_core::KeyPart` to choose its key form"
)]
pub trait KeyPart {
    /// Appends this value's form in a lock name to `key`.
    fn write_key_part(&self, key: &mut String);
}

impl<T: fmt::Display + ?Sized> KeyPart for T {
    fn write_key_part(&self, key: &mut String) {
        // Writing into a String cannot fail.
        let _ = write!(key, "{self}");
    }
}
