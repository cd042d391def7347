//! What the expansion does before it talks to Redis, so no server is needed: a rendered key
//! that dlock-core rejects and a missing default client come back through the return type, and
//! the body does not run. (Locking itself is tested against real Redis in the workspace's
//! `tests/locks/macro_lock.rs`.)

// A panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicBool, Ordering};

use dlock_core::{Client, Error, ErrorKind, distributed_lock};

/// A client that is never reached: connections are opened by the first request.
fn unreachable_client() -> Client {
    Client::open("redis://127.0.0.1:1/").unwrap()
}

#[distributed_lock(key = "doc:{name}", client = client)]
async fn edit(client: &Client, name: &str, ran: &AtomicBool) -> Result<(), Error> {
    ran.store(true, Ordering::SeqCst);
    Ok(())
}

#[distributed_lock(key = "doc:{name}", client = client, on_busy = "skip")]
async fn edit_or_skip_result(
    client: &Client,
    name: &str,
    ran: &AtomicBool,
) -> Result<Option<()>, Error> {
    ran.store(true, Ordering::SeqCst);
    Ok(Some(()))
}

#[tokio::test]
async fn a_rendered_key_that_dlock_rejects_is_an_error_and_the_body_never_runs() {
    let client = unreachable_client();
    let ran = AtomicBool::new(false);
    // Braces are reserved for the hash tag: a value that contains one cannot be a lock name.
    let err = edit(&client, "{x}", &ran).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("doc:{x}"), "{err}");
    let long = "x".repeat(dlock_core::MAX_NAME_LEN);
    let err = edit(&client, &long, &ran).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    // Skipping is for a busy lock only: anything else is reported.
    let err = edit_or_skip_result(&client, "a\nb", &ran)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(!ran.load(Ordering::SeqCst));
}

#[distributed_lock(key = "nightly")]
async fn uses_the_default_client() -> Result<(), Error> {
    Ok(())
}

// This test binary never sets a default client.
#[tokio::test]
async fn without_a_default_client_the_error_says_how_to_set_one() {
    let err = uses_the_default_client().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    let message = err.to_string();
    assert!(message.contains("set_default_client"), "{message}");
    assert!(message.contains("client = <expr>"), "{message}");
}

/// A message with a field named with a keyword.
struct Message {
    r#type: &'static str,
}

#[distributed_lock(key = "msg:{msg.type}:{msg.r#type}", client = client)]
async fn route(client: &Client, msg: &Message, ran: &AtomicBool) -> Result<(), Error> {
    ran.store(true, Ordering::SeqCst);
    Ok(())
}

#[tokio::test]
async fn a_keyword_field_is_read_in_either_spelling() {
    let client = unreachable_client();
    let ran = AtomicBool::new(false);
    // The rendered key shows up in the error for a value with braces: both placeholders read
    // the field `r#type`.
    let msg = Message { r#type: "{order}" };
    let err = route(&client, &msg, &ran).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("msg:{order}:{order}"), "{err}");
    assert!(!ran.load(Ordering::SeqCst));
}
