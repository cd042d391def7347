//! A refused log-in is `ErrorKind::Authentication`, with a hint about the user name and
//! password (it was `Permission` — "grant the rights listed in the README" — or `Connection`):
//! a wrong password, an unknown ACL user, and no password where the server requires one; on a
//! standalone server and on the seeds of a cluster.

use std::time::Duration;

use dlock_core::{Client, ClientBuilder, ErrorKind};
use dlock_testkit::{RedisCluster, RedisServer, ServerOptions};

const PASSWORD: &str = "right-Pa55";

fn builder(url: &str) -> ClientBuilder {
    Client::builder(url)
        .command_timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_secs(1))
}

fn assert_authentication(err: &dlock_core::Error) {
    assert_eq!(err.kind(), ErrorKind::Authentication, "{err}");
    let text = err.to_string();
    assert!(text.contains("user name or password"), "{text}");
    assert!(!text.contains("grant the rights"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_log_in_is_an_authentication_error() {
    let server = RedisServer::start_with(ServerOptions::new().arg("requirepass", PASSWORD))
        .unwrap_or_else(|e| panic!("redis-server: {e}"));
    let port = server.port();

    // A wrong password (WRONGPASS).
    let wrong = format!("redis://:wrong-Pa55@127.0.0.1:{port}/");
    let err = builder(&wrong).connect().await.unwrap_err();
    assert_authentication(&err);
    assert!(!err.to_string().contains("wrong-Pa55"), "{err}");

    // A user the server does not know (WRONGPASS too).
    let unknown = format!("redis://nobody:{PASSWORD}@127.0.0.1:{port}/");
    assert_authentication(&builder(&unknown).connect().await.unwrap_err());

    // No password where one is required (NOAUTH): the first request is refused.
    let none = format!("redis://127.0.0.1:{port}/");
    let client = builder(&none).build().unwrap();
    let err = client.mutex("m").unwrap().try_acquire().await.unwrap_err();
    assert_authentication(&err);

    // The right one works.
    let client = builder(&server.url()).connect().await.unwrap();
    client.ping().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_seeds_that_refuse_the_password_are_an_authentication_error() {
    let options = ServerOptions::new().arg("requirepass", PASSWORD);
    let cluster = tokio::task::block_in_place(|| RedisCluster::start_with(3, options))
        .unwrap_or_else(|e| panic!("cluster: {e}"));
    let seeds: Vec<String> = cluster
        .urls()
        .iter()
        .map(|url| url.replace(PASSWORD, "wrong-Pa55"))
        .collect();
    assert!(seeds[0].contains("wrong-Pa55"), "{seeds:?}");
    let err = Client::cluster_builder(seeds.iter().map(String::as_str))
        .command_timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_secs(1))
        .connect()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Authentication, "{err}");
}
