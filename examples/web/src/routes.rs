//! Run with: `cargo run -p web` (see the crate docs for the HTTP contract); these are the routes.
//!
//! Thin handlers: extract, call the store or [`Payments::pay`], turn the outcome into the
//! answer of the contract. Everything that decides lives in `pay` and `store`.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use dlock_core::{Client, Quota, distributed_lock};
use dlock_tower::{IdempotencyLayer, KeyBy, RateLimitLayer, TrustedProxies};
use metrics_exporter_prometheus::PrometheusHandle;
use serde_json::json;

use crate::error::PayError;
use crate::pay::Payments;
use crate::store::{Order, Receipt, Store};

/// What every handler shares: cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct AppState {
    pub(crate) payments: Arc<Payments>,
    pub(crate) store: Store,
    /// The locks' client (the one [`Payments`] locks through), for the handlers locked
    /// themselves ([`receipt`]).
    pub(crate) locks: Client,
    /// Renders the process's metrics (dlock's among them) as Prometheus text.
    pub(crate) metrics: PrometheusHandle,
}

/// The search's budget per client address: 30 a minute, 10 at once.
fn search_quota() -> Quota {
    Quota::per_minute(30).burst(10)
}

/// The most ids one search may ask for.
const SEARCH_MAX_IDS: usize = 50;

/// The body of `POST /orders/{id}`.
#[derive(Debug, serde::Deserialize)]
struct NewOrder {
    /// In cents.
    amount: u64,
}

/// `POST /orders/{id}`, `GET /orders/{id}`, `POST /orders/{id}/pay`,
/// `GET /orders/{id}/receipt`, `GET /orders?ids=…` (rate-limited), `GET /metrics`.
///
/// `pay` sits behind dlock-tower's `IdempotencyLayer`, which wraps the order's lock rather than
/// replacing it: a request with an `Idempotency-Key` runs once per key (a duplicate in progress
/// gets 409 `in_progress` with `Retry-After: 1`, a completed one its replay), a request without
/// one runs as before, and two keys for one order still take turns on the order's lock. Both
/// 409s that say "retry" have `code: "in_progress"` and `Retry-After`, so a client sees one kind.
///
/// # Errors
/// The layer's configuration, refused (a bug of this file).
pub(crate) fn router(state: AppState) -> Result<Router, dlock_tower::Error> {
    // The example has no authentication, so every client shares one key scope; a real service
    // passes `.principal(…)` reading what its authentication left in the request.
    // The key's lease follows `--lock-ttl-ms` (the order lock's), at least the layer's 1 s: a
    // replica that dies mid-payment blocks the key's retries that long.
    let lease = state.locks.default_ttl().max(Duration::from_secs(1));
    let idempotency = IdempotencyLayer::builder(state.locks.clone(), "web-pay")
        .lease(lease)
        .build()?;
    let pay = Router::new()
        .route("/orders/{id}/pay", post(pay))
        .route_layer(idempotency);
    // The search fans out to the store: a budget per client address shared by every replica
    // (the peer's address; behind a proxy, list it in `TrustedProxies`).
    let limits = RateLimitLayer::builder(state.locks.clone(), "web-search")
        .key(KeyBy::ClientIp(TrustedProxies::none()))
        .group("search", ["/orders"], search_quota())
        .build()?;
    let search = Router::new()
        .route("/orders", get(search))
        .route_layer(limits);
    Ok(pay
        .merge(search)
        .route("/orders/{id}", post(create).get(show))
        .route("/orders/{id}/receipt", get(receipt))
        .route("/metrics", get(metrics))
        .with_state(state))
}

/// Prometheus text exposition of the process's metrics: 200.
async fn metrics(State(state): State<AppState>) -> Response {
    let headers = [("content-type", "text/plain; version=0.0.4")];
    (headers, state.metrics.render()).into_response()
}

/// Creates an unpaid order: 201, or 409 if the id is taken, or 422 for a zero amount.
async fn create(
    State(state): State<AppState>,
    Path(id): Path<u64>,
    Json(order): Json<NewOrder>,
) -> Result<Response, PayError> {
    if order.amount == 0 {
        let body = json!({ "error": "amount must be at least 1 cent", "code": "invalid_amount" });
        return Ok((StatusCode::UNPROCESSABLE_ENTITY, Json(body)).into_response());
    }
    if !state.store.create(id, order.amount).await? {
        let body = json!({ "error": format!("order {id} already exists"), "code": "exists" });
        return Ok((StatusCode::CONFLICT, Json(body)).into_response());
    }
    let created = state.store.get(id).await?.ok_or(PayError::NotFound(id))?;
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

/// The order with its payment state: 200 or 404.
async fn show(State(state): State<AppState>, Path(id): Path<u64>) -> Result<Json<Order>, PayError> {
    let order = state.store.get(id).await?.ok_or(PayError::NotFound(id))?;
    Ok(Json(order))
}

/// Pays the order under its distributed lock: 200 with the receipt, or an error of the contract.
async fn pay(
    State(state): State<AppState>,
    Path(id): Path<u64>,
) -> Result<Json<Receipt>, PayError> {
    match state.payments.pay(id).await {
        Ok(receipt) => {
            crate::log::log(format_args!(
                "order {id}: paid {} cents, charge {}, fencing token {}",
                receipt.amount, receipt.charge_id, receipt.fencing_token
            ));
            Ok(Json(receipt))
        }
        Err(e) => Err(e.for_order(id)),
    }
}

/// The receipt of a paid order: 200; 404 for no such order, 409 `unpaid` for an unpaid one.
///
/// A handler locked itself, keyed on the name its extractor binds: under the order's lock, the
/// one [`Payments::pay`] holds while it charges and records, so a payment in flight finishes
/// first (waited for up to 2 s, then 409 `in_progress`) and the answer is never "unpaid" for an
/// order being paid.
#[distributed_lock(key = "order:{order_id}", wait = "2s", client = state.locks)]
async fn receipt(
    State(state): State<AppState>,
    Path(order_id): Path<u64>,
) -> Result<Response, PayError> {
    let order = state.store.get(order_id).await?;
    let order = order.ok_or(PayError::NotFound(order_id))?;
    Ok(match order.receipt {
        Some(receipt) => Json(receipt).into_response(),
        None => {
            let body =
                json!({ "error": format!("order {order_id} is not paid"), "code": "unpaid" });
            (StatusCode::CONFLICT, Json(body)).into_response()
        }
    })
}

/// `GET /orders?ids=1,2,3`: the orders among `ids` that exist, in that order: 200 with a JSON
/// list; 400 `invalid_ids` for an id that is not a number, none, or more than 50. Behind the
/// rate limit (429 with `Retry-After` and the `RateLimit` fields once a client's budget is
/// spent).
async fn search(State(state): State<AppState>, uri: Uri) -> Result<Response, PayError> {
    let ids: Option<Vec<u64>> = uri
        .query()
        .unwrap_or_default()
        .split('&')
        .find_map(|pair| pair.strip_prefix("ids="))
        .map(|list| list.split(',').map(|id| id.trim().parse().ok()).collect())
        .and_then(|ids: Option<Vec<u64>>| ids);
    let ids = match ids {
        Some(ids) if !ids.is_empty() && ids.len() <= SEARCH_MAX_IDS => ids,
        _ => {
            let body = json!({
                "error": format!("give ?ids= with 1 to {SEARCH_MAX_IDS} order ids, comma-separated"),
                "code": "invalid_ids",
            });
            return Ok((StatusCode::BAD_REQUEST, Json(body)).into_response());
        }
    };
    let mut found = Vec::new();
    for id in ids {
        if let Some(order) = state.store.get(id).await? {
            found.push(order);
        }
    }
    Ok(Json(found).into_response())
}
