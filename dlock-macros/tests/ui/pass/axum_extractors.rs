//! Axum's extractor patterns on a locked or rate-limited handler (issue 47): the key names the
//! bound names, `Path(order_id): Path<u64>` with `key = "order:{order_id}"`, through
//! tuple-struct patterns (`State(app)`, `Json(mut body)`), nested ones (`Path((shop, id))`,
//! `State(App { shop, .. })`) and `mut` bindings; the handlers are still axum handlers (the
//! router takes them: their futures are `Send`).
#![deny(warnings)]

use axum::Router;
use axum::extract::{Json, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use dlock_core::{Client, Error, distributed_lock, rate_limited};

#[derive(Clone)]
pub struct App {
    locks: Client,
    shop: String,
}

#[derive(serde::Deserialize)]
pub struct Order {
    quantity: u32,
}

/// A lock or limit error as an HTTP answer.
pub struct ApiError(Error);

impl From<Error> for ApiError {
    fn from(error: Error) -> Self {
        Self(error)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (StatusCode::CONFLICT, self.0.to_string()).into_response()
    }
}

#[distributed_lock(key = "order:{order_id}", client = app.locks, wait = "2s")]
async fn pay(
    State(app): State<App>,
    Path(order_id): Path<u64>,
    Json(mut body): Json<Order>,
) -> Result<String, ApiError> {
    body.quantity += 1;
    Ok(format!("{} paid {order_id} x{}", app.shop, body.quantity))
}

#[rate_limited(key = "lookup:{shop}:{id}", rate = "10/s", client = locks)]
async fn lookup(
    State(App { locks, shop }): State<App>,
    Path((mut id, page)): Path<(u64, u32)>,
) -> Result<String, ApiError> {
    id += u64::from(page);
    Ok(format!("{shop}:{id} {}", locks.key_prefix()))
}

fn router(app: App) -> Router {
    Router::new()
        .route("/orders/{order_id}", post(pay))
        .route("/lookup/{id}/{page}", get(lookup))
        .with_state(app)
}

fn main() {
    // Built, not served: compiling `router` is the check (every handler is an axum handler).
    let _ = router;
}
