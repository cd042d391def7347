//! Introspection: who holds a lock (host, pid, label, fence, TTL, waiters), and nothing when it
//! is free.

use std::time::Duration;

use dlock_core::MutexOptions;

use crate::support::{Backend, backend_tests, eventually};

backend_tests!(
    async fn inspect_reports_the_holder(backend: Backend) {
        let c = backend.client();
        assert_eq!(c.inspect("ins").await.unwrap(), None);
        let lock = c
            .mutex_with(
                "ins",
                MutexOptions::new()
                    .ttl(Duration::from_secs(20))
                    .label("pay handler"),
            )
            .unwrap();
        let guard = lock.try_acquire().await.unwrap().expect("free");
        // Issued on demand, the fence is kept with the hold: inspect shows it.
        let fence = guard.fencing_token().await.unwrap();

        let waiting = backend.client().mutex("ins").unwrap();
        let waiter = tokio::spawn(async move { waiting.acquire().await?.fencing_token().await });
        let mut con = backend.raw().await;
        eventually(Duration::from_secs(5), "one waiter queued", || {
            let mut con = con.clone();
            async move {
                let n: usize = redis::AsyncCommands::llen(&mut con, "dlock:{ins}:queue")
                    .await
                    .ok()?;
                (n == 1).then_some(())
            }
        })
        .await;

        let info = c.inspect("ins").await.unwrap().expect("held");
        assert_eq!(info.pid, std::process::id());
        assert!(!info.host.is_empty());
        assert_eq!(info.label.as_deref(), Some("pay handler"));
        assert_eq!(info.fencing_token, Some(fence));
        assert!(
            info.remaining <= Duration::from_secs(20) && info.remaining > Duration::from_secs(10)
        );
        assert_eq!(info.waiters, 1);
        guard.release().await.unwrap();
        let next_fence = waiter.await.unwrap().unwrap();
        assert!(Some(next_fence) > info.fencing_token);
        let _ = &mut con;
    }
);

backend_tests!(
    async fn a_fence_shows_once_the_holder_asked_for_it(backend: Backend) {
        let c = backend.client();
        let guard = c
            .mutex("lazy")
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .expect("free");
        let info = c.inspect("lazy").await.unwrap().expect("held");
        assert_eq!(info.fencing_token, None, "no fence issued yet");
        assert_eq!(guard.issued_fencing_token(), None);
        let fence = guard.fencing_token().await.unwrap();
        let info = c.inspect("lazy").await.unwrap().expect("held");
        assert_eq!(info.fencing_token, Some(fence));
        // Asking again costs nothing and gives the same token.
        assert_eq!(guard.issued_fencing_token(), Some(fence));
        assert_eq!(guard.fencing_token().await.unwrap(), fence);
    }
);
