//! Run with: `cargo run -p web -- --store postgres --postgres-url 'host=… user=… dbname=…'`;
//! the orders in PostgreSQL.
//!
//! Two tables (created at start-up if missing, see [`SCHEMA`]): `orders`, one row per order
//! with the largest fencing token that claimed or paid it (`last_fence`), and `payments`, one
//! row per recorded payment. The fence check is in the SQL itself: each fenced write is one
//! `UPDATE … WHERE status = 'unpaid' AND (last_fence IS NULL OR last_fence <= $fence)`, so the
//! database refuses a stale holder whatever that holder believes. Recording a payment is that
//! `UPDATE` and the `INSERT` of its record in one transaction.
//!
//! Fencing tokens, order ids and amounts are u64: they are kept as `numeric(20,0)` and passed
//! as text (`$1::text::numeric`), exact for every u64 (a `bigint` stops at 2^63 - 1).
//!
//! Connections: a few tokio-postgres clients, each behind an async mutex (a transaction needs
//! its client to itself), checked out by the first free one, reconnected when found closed;
//! statements prepared once per connection. A statement that does not answer within 5 s drops
//! its connection, which rolls back whatever it had begun.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use dlock_core::FencingToken;
use tokio::sync::{Mutex, MutexGuard};
use tokio::time::timeout;
use tokio_postgres::{Client, Config, NoTls, Row, Statement};

use super::types::{
    Claimed, Order, Receipt, Recorded, StoreError, describe_postgres as describe, parse_fence,
};
use crate::log::log;

/// Connections per replica: enough for a few payments in flight at once on a small machine.
const POOL_SIZE: usize = 4;
/// Time limit of one store operation, and of a connection attempt when the connection string
/// sets none.
const TIME_LIMIT: Duration = Duration::from_secs(5);

/// The tables, created if missing. Run once per start-up, under an advisory lock: replicas
/// starting together would otherwise race in `CREATE TABLE IF NOT EXISTS` (which is not safe
/// against itself).
const SCHEMA: &str = "
    SELECT pg_advisory_xact_lock(7236828386937972069); -- 'dlockweb', any constant
    CREATE TABLE IF NOT EXISTS orders (
        order_id   numeric(20,0) PRIMARY KEY CHECK (order_id >= 0),
        amount     numeric(20,0) NOT NULL CHECK (amount > 0),
        status     text NOT NULL DEFAULT 'unpaid' CHECK (status IN ('unpaid', 'paid')),
        last_fence numeric(20,0) CHECK (last_fence >= 0), -- largest token that claimed or paid
        paid_by    text,
        charge_id  text
    );
    CREATE TABLE IF NOT EXISTS payments (
        order_id      numeric(20,0) NOT NULL REFERENCES orders (order_id),
        fencing_token numeric(20,0) NOT NULL,
        amount        numeric(20,0) NOT NULL,
        charge_id     text NOT NULL,
        paid_by       text NOT NULL,
        recorded_at   timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX IF NOT EXISTS payments_order_id ON payments (order_id);
";

/// Whether both tables exist (then the schema is not touched: `CREATE` is not needed).
const HAS_SCHEMA: &str = "SELECT to_regclass('orders') IS NOT NULL AND \
                          to_regclass('payments') IS NOT NULL";

/// The claim: the holder's token goes into an unpaid order unless a larger one is there.
const CLAIM: &str = "
    UPDATE orders SET last_fence = $2::text::numeric
     WHERE order_id = $1::text::numeric
       AND status = 'unpaid'
       AND (last_fence IS NULL OR last_fence <= $2::text::numeric)
    RETURNING amount::text";

/// The payment: same condition; in one transaction with [`INSERT_PAYMENT`].
const RECORD: &str = "
    UPDATE orders SET status = 'paid', last_fence = $2::text::numeric, paid_by = $3,
                      charge_id = $4
     WHERE order_id = $1::text::numeric
       AND status = 'unpaid'
       AND (last_fence IS NULL OR last_fence <= $2::text::numeric)";

const INSERT_PAYMENT: &str = "
    INSERT INTO payments (order_id, fencing_token, amount, charge_id, paid_by)
    VALUES ($1::text::numeric, $2::text::numeric, $3::text::numeric, $4, $5)";

/// An order and its number of payment records.
const GET: &str = "
    SELECT o.amount::text, o.status, o.last_fence::text, o.paid_by, o.charge_id,
           (SELECT count(*) FROM payments p WHERE p.order_id = o.order_id)
      FROM orders o
     WHERE o.order_id = $1::text::numeric";

const CREATE: &str = "
    INSERT INTO orders (order_id, amount) VALUES ($1::text::numeric, $2::text::numeric)
    ON CONFLICT (order_id) DO NOTHING";

/// The orders in PostgreSQL: a few connections.
#[derive(Clone, Debug)]
pub(super) struct PostgresStore {
    pool: std::sync::Arc<Pool>,
}

#[derive(Debug)]
struct Pool {
    config: Config,
    slots: Box<[Mutex<Option<Connection>>]>,
    /// Where the next checkout starts looking, so that the connections take turns.
    next: AtomicUsize,
}

/// One client and its prepared statements.
#[derive(Debug)]
struct Connection {
    client: Client,
    claim: Statement,
    record: Statement,
    insert_payment: Statement,
    get: Statement,
    create: Statement,
}

impl Connection {
    async fn open(config: &Config) -> Result<Self, StoreError> {
        let (client, connection) = config.connect(NoTls).await?;
        // The connection object does the I/O; it ends when the client is dropped or the server
        // goes away (the client then reports itself closed, and the pool reconnects).
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                log(format_args!("postgres connection closed: {}", describe(&e)));
            }
        });
        if !client
            .query_one(HAS_SCHEMA, &[])
            .await?
            .try_get::<_, bool>(0)?
        {
            client
                .batch_execute(&format!("BEGIN; {SCHEMA} COMMIT;"))
                .await?;
        }
        Ok(Self {
            claim: client.prepare(CLAIM).await?,
            record: client.prepare(RECORD).await?,
            insert_payment: client.prepare(INSERT_PAYMENT).await?,
            get: client.prepare(GET).await?,
            create: client.prepare(CREATE).await?,
            client,
        })
    }
}

impl PostgresStore {
    pub(super) async fn connect(url: &str) -> Result<Self, StoreError> {
        let mut config: Config = url.parse()?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(TIME_LIMIT);
        }
        // Every connection now, so that a wrong URL or missing rights show at start-up.
        let mut slots = Vec::with_capacity(POOL_SIZE);
        for _ in 0..POOL_SIZE {
            let connection = timeout(TIME_LIMIT, Connection::open(&config))
                .await
                .map_err(|_| StoreError::Timeout("connecting and creating the tables"))??;
            slots.push(Mutex::new(Some(connection)));
        }
        Ok(Self {
            pool: std::sync::Arc::new(Pool {
                config,
                slots: slots.into_boxed_slice(),
                next: AtomicUsize::new(0),
            }),
        })
    }

    pub(super) async fn create(&self, id: u64, amount: u64) -> Result<bool, StoreError> {
        let mut slot = self.pool.checkout().await?;
        let c = slot.connection()?;
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] =
            [&id.to_string(), &amount.to_string()];
        let result = timeout(TIME_LIMIT, c.client.execute(&c.create, &params)).await;
        Ok(slot.finish(result, "creating an order")? == 1)
    }

    pub(super) async fn get(&self, id: u64) -> Result<Option<Order>, StoreError> {
        let mut slot = self.pool.checkout().await?;
        let c = slot.connection()?;
        let result = timeout(TIME_LIMIT, c.client.query_opt(&c.get, &[&id.to_string()])).await;
        let Some(row) = slot.finish(result, "reading an order")? else {
            return Ok(None);
        };
        let state = OrderRow::read(id, &row)?;
        let payments = row.try_get::<_, i64>(5)?;
        Ok(Some(Order {
            order_id: id,
            amount: state.amount,
            receipt: state.receipt()?,
            status: state.status,
            paid_by: state.paid_by,
            payments: u64::try_from(payments).unwrap_or_default(),
        }))
    }

    pub(super) async fn claim(&self, id: u64, fence: FencingToken) -> Result<Claimed, StoreError> {
        let mut slot = self.pool.checkout().await?;
        let c = slot.connection()?;
        let (id_text, fence_text) = (id.to_string(), fence.get().to_string());
        let work = async {
            if let Some(row) = c
                .client
                .query_opt(&c.claim, &[&id_text, &fence_text])
                .await?
            {
                let amount = parse_u64(id, "amount", &row.try_get::<_, String>(0)?)?;
                return Ok(Claimed::Unpaid { amount });
            }
            // Nothing written: say why, from the row as it is now (read after the `UPDATE`
            // waited for any writer of the row, so it shows what refused this one).
            let row = c.client.query_opt(&c.get, &[&id_text]).await?;
            Ok(match refusal(id, fence, row.as_ref())? {
                Refusal::Missing => Claimed::Missing,
                Refusal::Stale(last) => Claimed::Stale { last },
                Refusal::Paid(receipt) => Claimed::AlreadyPaid(receipt),
            })
        };
        let result = timeout(TIME_LIMIT, work).await;
        slot.finish_store(result, "claiming an order")
    }

    pub(super) async fn record_payment(&self, receipt: &Receipt) -> Result<Recorded, StoreError> {
        let mut slot = self.pool.checkout().await?;
        let c = slot.connection()?;
        let id = receipt.order_id;
        let fence = FencingToken::new(receipt.fencing_token);
        let (id_text, fence_text) = (id.to_string(), receipt.fencing_token.to_string());
        let amount_text = receipt.amount.to_string();
        let work = async {
            let tx = c.client.transaction().await?;
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
                [&id_text, &fence_text, &receipt.paid_by, &receipt.charge_id];
            if tx.execute(&c.record, &params).await? == 1 {
                let params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] = [
                    &id_text,
                    &fence_text,
                    &amount_text,
                    &receipt.charge_id,
                    &receipt.paid_by,
                ];
                tx.execute(&c.insert_payment, &params).await?;
                tx.commit().await?;
                return Ok(Recorded::Done);
            }
            let row = tx.query_opt(&c.get, &[&id_text]).await?;
            // Dropping `tx` rolls it back; it wrote nothing.
            Ok(match refusal(id, fence, row.as_ref())? {
                Refusal::Missing => Recorded::Missing,
                Refusal::Stale(last) => Recorded::Stale { last },
                Refusal::Paid(receipt) => Recorded::AlreadyPaid(receipt),
            })
        };
        let result = timeout(TIME_LIMIT, work).await;
        slot.finish_store(result, "recording a payment")
    }
}

impl Pool {
    /// The first free connection (else waits for one), reconnected if it was closed.
    async fn checkout(&self) -> Result<Slot<'_>, StoreError> {
        let n = self.slots.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed) % n;
        let free = (0..n).find_map(|i| self.slots[(start + i) % n].try_lock().ok());
        let mut guard = match free {
            Some(guard) => guard,
            None => self.slots[start].lock().await,
        };
        if guard.as_ref().is_none_or(|c| c.client.is_closed()) {
            *guard = None;
            let connection = timeout(TIME_LIMIT, Connection::open(&self.config))
                .await
                .map_err(|_| StoreError::Timeout("reconnecting"))??;
            *guard = Some(connection);
        }
        Ok(Slot { guard })
    }
}

/// A checked-out connection (its slot stays locked until this drops).
struct Slot<'a> {
    guard: MutexGuard<'a, Option<Connection>>,
}

impl Slot<'_> {
    /// The connection `checkout` put in the slot (only `finish` takes it out, after use).
    fn connection(&mut self) -> Result<&mut Connection, StoreError> {
        self.guard
            .as_mut()
            .ok_or(StoreError::Timeout("reconnecting"))
    }

    /// The result of one operation on this connection; a connection that timed out or closed
    /// is dropped (a new one is made at the next checkout).
    fn finish<T>(
        &mut self,
        result: Result<Result<T, tokio_postgres::Error>, tokio::time::error::Elapsed>,
        what: &'static str,
    ) -> Result<T, StoreError> {
        self.finish_store(result.map(|r| r.map_err(StoreError::from)), what)
    }

    fn finish_store<T>(
        &mut self,
        result: Result<Result<T, StoreError>, tokio::time::error::Elapsed>,
        what: &'static str,
    ) -> Result<T, StoreError> {
        match result {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => {
                if matches!(&e, StoreError::Postgres(pg) if pg.is_closed()) {
                    *self.guard = None;
                }
                Err(e)
            }
            Err(_) => {
                *self.guard = None;
                Err(StoreError::Timeout(what))
            }
        }
    }
}

/// Why a fenced write matched no row, checked in the order of the Redis scripts.
enum Refusal {
    Missing,
    Stale(FencingToken),
    Paid(Receipt),
}

fn refusal(id: u64, fence: FencingToken, row: Option<&Row>) -> Result<Refusal, StoreError> {
    let Some(row) = row else {
        return Ok(Refusal::Missing);
    };
    let state = OrderRow::read(id, row)?;
    if let Some(last) = state.last_fence.filter(|last| fence < *last) {
        return Ok(Refusal::Stale(last));
    }
    match state.receipt()? {
        Some(receipt) => Ok(Refusal::Paid(receipt)),
        None => Err(StoreError::Corrupt(format!(
            "order {id}: a write under fencing token {fence} matched no row, yet the order is \
             unpaid and holds no larger token (does another program write the table?)"
        ))),
    }
}

/// The columns of [`GET`] that describe the order.
struct OrderRow {
    id: u64,
    amount: u64,
    status: String,
    last_fence: Option<FencingToken>,
    paid_by: Option<String>,
    charge_id: Option<String>,
}

impl OrderRow {
    fn read(id: u64, row: &Row) -> Result<Self, StoreError> {
        let last_fence = match row.try_get::<_, Option<String>>(2)? {
            Some(text) => Some(parse_fence(&text)?),
            None => None,
        };
        Ok(Self {
            id,
            amount: parse_u64(id, "amount", &row.try_get::<_, String>(0)?)?,
            status: row.try_get(1)?,
            last_fence,
            paid_by: row.try_get(3)?,
            charge_id: row.try_get(4)?,
        })
    }

    /// The receipt of a paid order (its columns are those of the payment), `None` if unpaid.
    fn receipt(&self) -> Result<Option<Receipt>, StoreError> {
        if self.status != "paid" {
            return Ok(None);
        }
        match (&self.last_fence, &self.paid_by, &self.charge_id) {
            (Some(fence), Some(paid_by), Some(charge_id)) => Ok(Some(Receipt {
                order_id: self.id,
                amount: self.amount,
                charge_id: charge_id.clone(),
                fencing_token: fence.get(),
                paid_by: paid_by.clone(),
            })),
            _ => Err(StoreError::Corrupt(format!(
                "order {}: paid without fence, payer or charge",
                self.id
            ))),
        }
    }
}

fn parse_u64(id: u64, what: &str, text: &str) -> Result<u64, StoreError> {
    text.parse()
        .map_err(|_| StoreError::Corrupt(format!("order {id}: {what} {text:?}")))
}
