//! Run with: `cargo run -p web -- --redis-url redis://127.0.0.1:6379/ --listen 127.0.0.1:3000`
//! (or set `DLOCK_REDIS_URL` and `LISTEN`; `--help` lists every flag), then:
//!
//! ```text
//! curl -i -X POST localhost:3000/orders/42 -H 'content-type: application/json' -d '{"amount":1250}'
//! curl -i -X POST localhost:3000/orders/42/pay      # 200 and a receipt
//! curl -i -X POST localhost:3000/orders/42/pay      # 409 already_paid, with the same receipt
//! curl -i -X POST localhost:3000/orders/43 -H 'content-type: application/json' -d '{"amount":990}'
//! curl -i -X POST localhost:3000/orders/43/pay -H 'Idempotency-Key: "a1"'   # 200, stored
//! curl -i -X POST localhost:3000/orders/43/pay -H 'Idempotency-Key: "a1"'   # the same 200, Idempotent-Replayed: true
//! curl -i -X POST localhost:3000/orders/42/pay -H 'Idempotency-Key: "a1"'   # 422 key_reused
//! curl -i 'localhost:3000/orders?ids=42,43'        # 200, RateLimit: "search";r=9;t=2
//! curl -i localhost:3000/orders/42
//! ```
//!
//! With the orders in PostgreSQL instead of Redis (the locks stay in Redis):
//! `cargo run -p web -- --store postgres --postgres-url 'host=/var/run/postgresql user=web
//! dbname=shop'` (or `STORE=postgres POSTGRES_URL=…`); the tables are created at start-up if
//! missing.
//!
//! An axum service whose payment endpoint runs under `#[distributed_lock]`. Run as many
//! replicas as you like against one Redis, send them the same order from every side (a
//! double-clicked "pay" button, a retrying client, a load balancer replaying a request): each
//! order is charged once. The handler claims the order, calls a (simulated) payment provider
//! for 50–200 ms, and records the payment; without the lock, two requests would both find it
//! unpaid during that call and both charge. Claim and record are also *fenced*: the store keeps
//! the largest fencing token that claimed the order and refuses a smaller one, so a holder
//! whose lease ran out (a long GC pause) cannot write once the holder after it has claimed the
//! order. In PostgreSQL the check is the SQL's own `WHERE … last_fence <= $fence`.
//!
//! # HTTP contract
//! Every error body is JSON `{"error": "<sentence for humans>", "code": "<stable code>", …}`.
//!
//! | request | status | body, headers | meaning |
//! |---|---|---|---|
//! | `POST /orders/{id}` `{"amount": 1250}` | 201 | the order | created, unpaid (amount in cents, > 0) |
//! | | 409 | `code: "exists"` | an order with this id exists; nothing changed |
//! | | 422 | `code: "invalid_amount"` | amount 0 (a malformed body gets axum's 400/415/422) |
//! | `GET /orders/{id}` | 200 | the order | see below |
//! | `POST /orders/{id}/pay` | 200 | the receipt | this request charged the order |
//! | | 409 | `code: "already_paid"`, `receipt` | paid before (by this or another replica): final, the receipt of *that* payment; never charged twice |
//! | | 409 | `code: "in_progress"`, `Retry-After: 1` | another request holds the order's lock for longer than the 1 s this one waits, or took it over (this one's lease ran out and the store refused its write: "fenced out" in the log): `{"error": "payment for order 42 in progress, retry"}`; retrying is safe and ends in 200 or `already_paid` |
//! | `POST /orders/{id}/pay` with `Idempotency-Key: "k1"` | as above, once per key | the answer, stored 24 h | the first request with the key (dlock-tower's `IdempotencyLayer`, draft-ietf-httpapi-idempotency-key-header-07) |
//! | | same, `Idempotent-Replayed: true` | the stored answer | the key was used before for this order (a 200 or `already_paid`; a "retry" answer is never stored) |
//! | | 409 | `code: "in_progress"`, `Retry-After: 1`, `application/problem+json` | a request with this key is running |
//! | | 422 | `code: "key_reused"` | the key was used for another order |
//! | `GET /orders?ids=1,2,3` | 200 | the orders among `ids` that exist | a search, rate-limited per client address across replicas (dlock-tower's `RateLimitLayer`: 30 a minute, 10 at once), every answer with `RateLimit-Policy` and `RateLimit` |
//! | | 429 | `code: "rate_limited"`, `Retry-After`, the `RateLimit` fields | this client's budget is spent |
//! | | 400 | `code: "invalid_ids"` | an id that is not a number, none, or more than 50 |
//! | `GET /orders/{id}/receipt` | 200 | the receipt | paid; under the order's lock (a handler taking `Path(order_id): Path<u64>`, locked with `#[distributed_lock(key = "order:{order_id}")]`), so a payment in flight finishes first; 404 `not_found`, 409 `unpaid`, 409 `in_progress` after 2 s |
//! | `GET /metrics` | 200 | Prometheus text | dlock's lock metrics (`dlock_acquire_duration_seconds`, `dlock_held`, `dlock_lease_lost`, …, listed at zero from start-up; an unlabelled lock as `lock="(none)"`; dlock-core's feature `metrics`) |
//! | any | 404 | `code: "not_found"` | no such order |
//! | any | 503 | `code: "unavailable"`, `Retry-After: 1` | Redis or PostgreSQL unreachable or too slow, or the lease was lost before the payment began; retry (the handler is idempotent) |
//! | any | 500 | `code: "internal"` | a bug or misconfiguration (e.g. another program writes these keys, or the database user lacks a right) |
//!
//! With a key, a retry is safe also across replicas and after a timeout: the client gets the
//! answer the first attempt stored. The key does not replace the lock: requests without a key,
//! or with different keys for one order, still take turns on the order's lock.
//!
//! Both "no" answers of `pay` are 409 Conflict (as payment APIs answer a concurrent request with
//! the same idempotency key), told apart by `code` and by `Retry-After`, which only the
//! retryable one carries.
//!
//! An order is `{"order_id", "amount", "status": "unpaid"|"paid", "paid_by", "payments",
//! "receipt"}`, where `payments` counts the payment records (never more than one) and `paid_by`
//! names the replica that charged it. A receipt is `{"order_id", "amount", "charge_id",
//! "fencing_token", "paid_by"}`.
//!
//! # Data in Redis (the default store)
//! | key | type | what |
//! |---|---|---|
//! | `order:{42}` | hash | `amount`, `status`, `fence` (the largest fencing token that claimed the order; once paid, the payment's), and once paid `paid_by`, `receipt` (JSON) |
//! | `order:{42}:payments` | list | one receipt (JSON) per recorded payment |
//! | `provider:charges:{42}` | list | the simulated provider's ledger: one entry per charge it made (in the locks' Redis whatever the store) |
//!
//! The braces are a cluster hash tag: the two keys of an order, which one script writes
//! together, share a slot. The lock itself is dlock's `order:42` (keys under `dlock:`).
//!
//! # Data in PostgreSQL (`--store postgres`)
//! | table | what |
//! |---|---|
//! | `orders` | `order_id`, `amount`, `status`, `last_fence` (as `fence` above), `paid_by`, `charge_id` |
//! | `payments` | one row per recorded payment: `order_id`, `fencing_token`, `amount`, `charge_id`, `paid_by`, `recorded_at` |
//!
//! Ids, amounts and tokens are `numeric(20,0)`: exact for every u64. The service's database
//! user needs `SELECT`, `INSERT` and `UPDATE` on both tables, and `CREATE` on the schema only
//! while they do not exist yet.
//!
//! # Layout
//! | module | what lives there |
//! |---|---|
//! | `cli` | configuration (flags or environment; [`Config`], [`StoreKind`]), start-up, graceful shutdown |
//! | `routes` | the axum router and handlers: HTTP in, HTTP out |
//! | `pay` | [`Payments::pay`], the function under `#[distributed_lock]`, and the simulated provider (its ledger in Redis) |
//! | [`store`] | the orders, in Redis (`store/redis_store.rs` and its two Lua scripts) or PostgreSQL (`store/postgres_store.rs`); the fenced claim and record; what both answer in (`store/types.rs`: the [`Receipt`], the outcomes, the errors) |
//! | `error` | [`PayError`] and its HTTP answers |
//! | `log` | one log line at a time on stderr |

mod cli;
mod error;
mod log;
mod pay;
mod routes;
pub mod store;

pub use cli::{Config, StoreKind, main, serve};
pub use error::PayError;
pub use pay::Payments;
pub use store::Receipt;
