//! What the tests share: a server, replicas (a client each), and reading responses.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, Response};
use dlock_core::Client;
use http_body_util::BodyExt;
use tower::ServiceExt;

/// A replica's own client on `url` (its own connection, as another process would have).
pub(crate) async fn replica(url: &str) -> Client {
    Client::builder(url)
        .command_timeout(Duration::from_millis(500))
        .connect()
        .await
        .unwrap()
}

/// A response's status, headers and body, read whole.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) headers: axum::http::HeaderMap,
    pub(crate) body: Vec<u8>,
}

impl Answer {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }

    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

pub(crate) async fn read(response: Response<Body>) -> Answer {
    let (parts, body) = response.into_parts();
    Answer {
        status: parts.status.as_u16(),
        headers: parts.headers,
        body: body.collect().await.unwrap().to_bytes().to_vec(),
    }
}

/// Sends `request` into `app` in process (no socket).
pub(crate) async fn send(app: &Router, request: Request<Body>) -> Answer {
    read(app.clone().oneshot(request).await.unwrap()).await
}
