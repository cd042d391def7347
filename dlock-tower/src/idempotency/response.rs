//! The response side: a handler's body collected within the storage limit (the rest streamed
//! on), and a stored response replayed.

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode};
use futures_util::StreamExt;
use http_body_util::BodyExt;

use super::config::IDEMPOTENT_REPLAYED;
use super::record::Stored;

/// The header of a replay whose body was over the limit: the original body's length.
pub(crate) const BODY_OMITTED: HeaderName = HeaderName::from_static("idempotency-body-omitted");

/// A handler's body, read up to the limit.
pub(crate) enum Collected {
    /// The whole body, within the limit.
    Whole(Bytes),
    /// Over the limit: the body to send on (what was read, then the rest, streamed), and the
    /// length read so far (the record notes it).
    Over { body: Body, read: u64 },
    /// Reading failed: the handler's body ended with an error.
    Failed(axum::Error),
}

/// Reads `body` until its end or until more than `limit` bytes came.
pub(crate) async fn collect(mut body: Body, limit: usize) -> Collected {
    let mut chunks: Vec<Bytes> = Vec::new();
    let mut read = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = match frame {
            Ok(frame) => frame,
            Err(e) => return Collected::Failed(e),
        };
        // Trailers are not stored (a replay has none); data frames are.
        if let Ok(data) = frame.into_data() {
            read = read.saturating_add(data.len());
            chunks.push(data);
            if read > limit {
                let head = futures_util::stream::iter(chunks.into_iter().map(Ok::<_, axum::Error>));
                let rest = body.into_data_stream();
                return Collected::Over {
                    body: Body::from_stream(head.chain(rest)),
                    read: read as u64,
                };
            }
        }
    }
    let mut whole = Vec::with_capacity(read);
    for chunk in chunks {
        whole.extend_from_slice(&chunk);
    }
    Collected::Whole(Bytes::from(whole))
}

/// The headers among `names` that a record keeps: visible ASCII values only.
pub(crate) fn kept_headers(headers: &HeaderMap, names: &[HeaderName]) -> Vec<(String, String)> {
    let mut kept = Vec::new();
    for name in names {
        for value in headers.get_all(name) {
            if let Ok(text) = value.to_str() {
                kept.push((name.as_str().to_owned(), text.to_owned()));
            }
        }
    }
    kept
}

/// The replay of `stored`: its status, headers and body, marked `Idempotent-Replayed: true`.
pub(crate) fn replay(stored: &Stored) -> Response<Body> {
    let body = stored.body.clone().unwrap_or_default();
    let mut response = Response::new(Body::from(body));
    *response.status_mut() =
        StatusCode::from_u16(stored.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    for (name, value) in &stored.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::try_from(name.as_str()),
            HeaderValue::try_from(value.as_str()),
        ) {
            headers.append(name, value);
        }
    }
    if stored.body.is_none() {
        headers.insert(BODY_OMITTED, HeaderValue::from(stored.omitted_len));
    }
    headers.insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn bytes_of(body: Body) -> Vec<u8> {
        body.collect().await.unwrap().to_bytes().to_vec()
    }

    #[tokio::test]
    async fn a_body_within_the_limit_is_kept_whole() {
        match collect(Body::from("hello"), 5).await {
            Collected::Whole(b) => assert_eq!(&b[..], b"hello"),
            _ => panic!("not whole"),
        }
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_passed_on_entire() {
        let chunks = ["ab", "cd", "ef", "gh"].map(|s| Ok::<_, std::io::Error>(Bytes::from(s)));
        let body = Body::from_stream(futures_util::stream::iter(chunks));
        match collect(body, 3).await {
            Collected::Over { body, read } => {
                assert_eq!(read, 4);
                assert_eq!(bytes_of(body).await, b"abcdefgh");
            }
            _ => panic!("not over"),
        }
    }

    #[tokio::test]
    async fn a_replay_has_the_status_headers_body_and_the_mark() {
        let stored = Stored {
            fingerprint: String::new(),
            status: 201,
            headers: vec![("location".into(), "/orders/1".into())],
            body: Some(Bytes::from_static(b"{}")),
            omitted_len: 0,
        };
        let r = replay(&stored);
        assert_eq!(r.status(), StatusCode::CREATED);
        assert_eq!(r.headers()["location"], "/orders/1");
        assert_eq!(r.headers()[IDEMPOTENT_REPLAYED], "true");
        assert!(r.headers().get(BODY_OMITTED).is_none());
        assert_eq!(bytes_of(r.into_body()).await, b"{}");
    }
}
