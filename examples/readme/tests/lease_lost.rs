//! Run with: `cargo test -p readme --test lease_lost` (starts its own redis-server: Redis 7
//! installed, see dlock-testkit's requirements)
use std::error::Error;
use std::time::Duration;

use dlock_core::{Client, Fenced, FencingToken, Lease, LostReason, MutexOptions};
use dlock_testkit::RedisServer;

type BoxError = Box<dyn Error + Send + Sync>;

/// The code under test: writes the invoice page by page under the lock, each write carrying
/// the lock's fencing token, and stops when the lease is lost. Returns the pages it wrote.
async fn render(client: Client, lease: Lease, fence: FencingToken) -> Result<u32, BoxError> {
    let mut pages = 0;
    loop {
        tokio::select! {
            _ = lease.lost() => return Ok(pages),
            () = tokio::time::sleep(Duration::from_millis(20)) => {
                let page = format!("page {}", pages + 1);
                match client.fenced_set("invoice:7:pdf", fence, page).await? {
                    Fenced::Written => pages += 1,
                    // A newer holder wrote: this lease ran out unnoticed. Stop.
                    stale => return Err(stale.to_string().into()),
                }
            }
        }
    }
}

#[tokio::test]
async fn the_handler_stops_when_its_lease_is_lost() -> Result<(), BoxError> {
    let server = RedisServer::start()?; // a real redis-server on a free port, killed on drop
    let client = Client::open(server.url())?;
    // A renewed lease of 1 s: the watchdog renews it every third, so a loss is heard quickly.
    let options = MutexOptions::new().ttl(Duration::from_secs(1)).watchdog();
    let guard = client.mutex_with("invoice:7", options)?.acquire().await?;
    let lease = guard.lease();
    let fence = lease.fencing_token().await?;
    let handler = tokio::spawn(render(client.clone(), lease.clone(), fence));

    // The fault: the lock's keys vanish from Redis, as when a lease runs out unnoticed.
    assert_eq!(server.expire_lock("invoice:7")?, 1);
    // The handler stops at the watchdog's next renewal, which finds the lock gone.
    let stopped = tokio::time::timeout(Duration::from_secs(5), handler).await?;
    let pages = stopped??;
    let reason = lease.lost().await.reason(); // at once: the lease is already lost
    // (`Expired` instead of `Removed` if that renewal's answer came too late to tell.)
    assert!(
        matches!(reason, LostReason::Removed | LostReason::Expired),
        "{reason}"
    );
    assert!(lease.cancellation_token().is_cancelled());

    // Another replica takes the lock; its fence is newer, and its write lands.
    let successor = Client::open(server.url())?;
    let next = successor.mutex("invoice:7")?.acquire().await?;
    let newer = next.fencing_token().await?;
    assert!(newer > fence);
    let written = successor
        .fenced_set("invoice:7:pdf", newer, "final")
        .await?;
    assert_eq!(written, Fenced::Written);

    // The stale holder's late write is refused, and its release leaves the new holder alone.
    let late = format!("page {}", pages + 1);
    let refused = client.fenced_set("invoice:7:pdf", fence, late).await?;
    assert_eq!(refused, Fenced::Stale { stored: newer });
    assert!(!guard.release().await?.was_held());
    assert!(next.release().await?.was_held());
    Ok(())
}
