//! Run with: `cargo run -p web` (the default store; see the crate docs); the orders in Redis.
//!
//! One hash per order, one list of payment records per order, and the two fenced writes, Lua
//! scripts that compare the lock's fencing token with the order's: `claim_order.lua` and
//! `record_payment.lua` (their contracts are at the top of each).
//!
//! Commands go through the lock client's connection (`Client::connection`), which reconnects by
//! itself and bounds every request by the client's command timeout.

use std::sync::LazyLock;

use dlock_core::FencingToken;

use super::types::{Claimed, Order, Receipt, Recorded, StoreError, parse_fence};

/// Claims an unpaid order for a holder, fenced.
static CLAIM_ORDER: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(concat!(
        include_str!("order_checks.lua"),
        include_str!("claim_order.lua")
    ))
});

/// Records a paid order, fenced.
static RECORD_PAYMENT: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(concat!(
        include_str!("order_checks.lua"),
        include_str!("record_payment.lua")
    ))
});

/// Status of an unpaid order, as stored.
const UNPAID: &str = "unpaid";

/// The hash of order `id` (the braces are a cluster hash tag shared by the order's keys).
pub fn order_key(id: u64) -> String {
    format!("order:{{{id}}}")
}

/// The list of payment records of order `id`.
pub fn payments_key(id: u64) -> String {
    format!("order:{{{id}}}:payments")
}

/// The orders in Redis.
#[derive(Clone, Debug)]
pub(super) struct RedisStore {
    con: dlock_core::Connection,
}

impl RedisStore {
    pub(super) fn new(con: dlock_core::Connection) -> Self {
        Self { con }
    }

    /// One atomic `MULTI`.
    pub(super) async fn create(&self, id: u64, amount: u64) -> Result<bool, StoreError> {
        let key = order_key(id);
        let mut con = self.con.clone();
        let (created, _): (bool, bool) = redis::pipe()
            .atomic()
            .hset_nx(&key, "amount", amount)
            .hset_nx(&key, "status", UNPAID)
            .query_async(&mut con)
            .await?;
        Ok(created)
    }

    pub(super) async fn get(&self, id: u64) -> Result<Option<Order>, StoreError> {
        let mut con = self.con.clone();
        let (fields, payments): (std::collections::HashMap<String, String>, u64) = redis::pipe()
            .hgetall(order_key(id))
            .llen(payments_key(id))
            .query_async(&mut con)
            .await?;
        if fields.is_empty() {
            return Ok(None);
        }
        let corrupt = |what: &str| StoreError::Corrupt(format!("order {id}: {what}"));
        let amount = fields
            .get("amount")
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| corrupt("no numeric amount"))?;
        let receipt = match fields.get("receipt") {
            Some(json) => Some(parse_receipt(json).map_err(|e| corrupt(&e))?),
            None => None,
        };
        Ok(Some(Order {
            order_id: id,
            amount,
            status: fields.get("status").cloned().unwrap_or_default(),
            paid_by: fields.get("paid_by").cloned(),
            payments,
            receipt,
        }))
    }

    pub(super) async fn claim(&self, id: u64, fence: FencingToken) -> Result<Claimed, StoreError> {
        let mut con = self.con.clone();
        let reply: Vec<String> = CLAIM_ORDER
            .key(order_key(id))
            .arg(fence.get())
            .invoke_async(&mut con)
            .await?;
        match reply.iter().map(String::as_str).collect::<Vec<_>>()[..] {
            ["claimed", amount] => amount
                .parse()
                .map(|amount| Claimed::Unpaid { amount })
                .map_err(|_| StoreError::Corrupt(format!("order {id}: amount {amount:?}"))),
            ["missing"] => Ok(Claimed::Missing),
            ["paid", json] => parse_receipt(json)
                .map(Claimed::AlreadyPaid)
                .map_err(StoreError::Corrupt),
            ["stale", last] => parse_fence(last).map(|last| Claimed::Stale { last }),
            _ => Err(StoreError::Corrupt(format!("script reply {reply:?}"))),
        }
    }

    pub(super) async fn record_payment(&self, receipt: &Receipt) -> Result<Recorded, StoreError> {
        let json = serde_json::to_string(receipt)
            .map_err(|e| StoreError::Corrupt(format!("receipt: {e}")))?;
        let mut con = self.con.clone();
        let reply: Vec<String> = RECORD_PAYMENT
            .key(order_key(receipt.order_id))
            .key(payments_key(receipt.order_id))
            .arg(receipt.fencing_token)
            .arg(&json)
            .arg(&receipt.paid_by)
            .invoke_async(&mut con)
            .await?;
        match reply.iter().map(String::as_str).collect::<Vec<_>>()[..] {
            ["ok"] => Ok(Recorded::Done),
            ["missing"] => Ok(Recorded::Missing),
            ["paid", json] => parse_receipt(json)
                .map(Recorded::AlreadyPaid)
                .map_err(StoreError::Corrupt),
            ["stale", last] => parse_fence(last).map(|last| Recorded::Stale { last }),
            _ => Err(StoreError::Corrupt(format!("script reply {reply:?}"))),
        }
    }
}

fn parse_receipt(json: &str) -> Result<Receipt, String> {
    serde_json::from_str(json).map_err(|e| format!("receipt {json:?}: {e}"))
}
