//! A rolling deploy: two versions of dlock share locks while it runs. Locks, queue entries
//! and grants written in the previous format (before format versions, "version 0") are
//! understood — never two holders — and a lock written by a *newer* format is refused by name,
//! never taken or changed.

use std::time::Duration;

use dlock_core::{ErrorKind, MutexOptions};
use redis::AsyncCommands;

use crate::support::{Backend, backend_tests};

const OLD_TOKEN: &str = "0123456789abcdef0123456789abcdef";
const OLD_CLIENT: &str = "00112233445566aa";

backend_tests!(
    async fn a_lock_in_the_previous_format_is_understood(backend: Backend) {
        let mut con = backend.raw().await;
        // Held by an older dlock.
        let () = con
            .pset_ex(
                "dlock:{rd}",
                format!("{OLD_TOKEN}- oldhost\x1f77\x1fold job"),
                400,
            )
            .await
            .unwrap();
        let c = backend.client();
        let lock = c.mutex("rd").unwrap();
        assert!(
            lock.try_acquire().await.unwrap().is_none(),
            "held by the older holder"
        );
        let holder = c.inspect("rd").await.unwrap().expect("held");
        assert_eq!((holder.host.as_str(), holder.pid), ("oldhost", 77));
        assert_eq!(holder.label.as_deref(), Some("old job"));
        let guard = lock.acquire_timeout(Duration::from_secs(5)).await.unwrap();
        guard.release().await.unwrap();
    }

    async fn a_waiter_queued_by_the_previous_version_is_handed_the_lock(backend: Backend) {
        let mut con = backend.raw().await;
        let c = backend.client();
        let lock = c
            .mutex_with("rd-q", MutexOptions::new().ttl(Duration::from_secs(30)))
            .unwrap();
        let guard = lock.try_acquire().await.unwrap().expect("free");
        // An older client waits: subscribed to its wake channel, queued in the old entry format,
        // the lock flagged as waited for (as its acquire script does).
        let mut pubsub = backend
            .subscribe(&format!("dlock:{{rd-q}}:wake:{OLD_CLIENT}"))
            .await;
        let publish = backend.publish_mode();
        let entry = format!("{OLD_TOKEN} {OLD_CLIENT} 5000 {publish} oldhost\x1f77\x1f");
        let _: usize = con.rpush("dlock:{rd-q}:queue", &entry).await.unwrap();
        let _: usize = con.setrange("dlock:{rd-q}", 32, "w").await.unwrap();

        assert!(guard.release().await.unwrap().was_held());
        let grant = tokio::time::timeout(Duration::from_secs(5), pubsub.next_message())
            .await
            .expect("the older waiter is told");
        // The older version reads the first four fields; the version comes last.
        let fields: Vec<&str> = grant.split(' ').collect();
        assert_eq!(fields.len(), 5, "{grant}");
        assert_eq!(fields[0], OLD_TOKEN);
        assert_eq!(fields[3], "5000");
        assert_eq!(fields[4], "1");
        let holder = c.inspect("rd-q").await.unwrap().expect("handed over");
        assert_eq!((holder.host.as_str(), holder.pid), ("oldhost", 77));
        // The value it now holds starts with its token, as the older version checks.
        let value: String = con.get("dlock:{rd-q}").await.unwrap();
        assert!(value.starts_with(OLD_TOKEN), "{value}");
    }

    async fn a_lock_of_a_newer_format_is_refused_by_name(backend: Backend) {
        let mut con = backend.raw().await;
        let value = format!("{OLD_TOKEN}-3 newhost\x1f5\x1f");
        let () = con.pset_ex("dlock:{rd-new}", &value, 10_000).await.unwrap();
        let c = backend.client();
        let err = c.mutex("rd-new").unwrap().try_acquire().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
        assert!(err.to_string().contains("newer dlock"), "{err}");
        assert!(err.to_string().contains("dlock:{rd-new}"), "{err}");
        let err = c.force_unlock("rd-new").await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
        let still: String = con.get("dlock:{rd-new}").await.unwrap();
        assert_eq!(still, value, "never changed");
    }
);
