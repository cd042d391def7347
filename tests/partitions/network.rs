//! The `Network` fixture itself: each nemesis cuts the links it names and no other, a heal
//! restores them, replication runs over the network's links, nothing in the network reaches
//! the host, the namespaces of a test that died are removed, and the TCP relay delays both
//! directions without reordering.

use std::process::{Command, Stdio};

use dlock_testkit::{Network, NodeId, SERVER_PORT, ServerOptions};

use super::network;

/// How long a probe waits for `PONG`: a cut drops the SYN or its answer silently, so a probe
/// across it hangs until then. Long against a loaded machine's scheduling; probes run at once.
const PROBE_LIMIT: &str = "2";

/// Whether a new connection from `from` to the server in `to` answers `PING` within
/// [`PROBE_LIMIT`] seconds.
fn reaches(net: &Network, from: NodeId, to: NodeId) -> bool {
    let mut cmd = net.command(from, "timeout");
    cmd.args([PROBE_LIMIT, "redis-cli", "-h", &net.address(to).to_string()])
        .args(["-p", &SERVER_PORT.to_string(), "PING"]);
    let out = cmd.stderr(Stdio::null()).output().expect("run redis-cli");
    out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "PONG"
}

/// Which of the ordered pairs of `nodes` reach each other, as a list of `(from, to)` indices
/// (probed all at once).
fn reachable(net: &Network, nodes: &[NodeId]) -> Vec<(usize, usize)> {
    let pairs: Vec<(NodeId, NodeId)> = nodes
        .iter()
        .flat_map(|&a| nodes.iter().filter(move |&&b| b != a).map(move |&b| (a, b)))
        .collect();
    let reached: Vec<bool> = std::thread::scope(|scope| {
        let probes: Vec<_> = pairs
            .iter()
            .map(|&(a, b)| scope.spawn(move || reaches(net, a, b)))
            .collect();
        probes
            .into_iter()
            .map(|p| p.join().expect("probe"))
            .collect()
    });
    pairs
        .iter()
        .zip(reached)
        .filter(|(_, ok)| *ok)
        .map(|((a, b), _)| (a.index(), b.index()))
        .collect()
}

fn blackhole_rules(net: &Network) -> usize {
    let rules = net.router_rules().expect("ip rule list");
    rules.lines().filter(|l| l.contains("blackhole")).count()
}

#[test]
fn each_nemesis_cuts_what_it_names_and_heal_restores_it() {
    let Some(mut net) =
        network("partitions::network::each_nemesis_cuts_what_it_names_and_heal_restores_it")
    else {
        return;
    };
    let nodes: Vec<NodeId> = ["a", "b", "c"]
        .iter()
        .map(|label| net.add_node(label).expect("node"))
        .collect();
    for &node in &nodes {
        net.start_server(node, ServerOptions::new())
            .expect("server");
    }
    let [a, b, c] = [nodes[0], nodes[1], nodes[2]];
    let all = vec![(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)];
    assert_eq!(reachable(&net, &nodes), all, "before any fault");

    net.partition(&[&[a], &[b]]).expect("partition");
    assert_eq!(
        reachable(&net, &nodes),
        vec![(0, 2), (1, 2), (2, 0), (2, 1)]
    );
    assert_eq!(blackhole_rules(&net), 2);
    net.heal().expect("heal");
    assert_eq!(reachable(&net, &nodes), all, "after the heal");
    assert_eq!(blackhole_rules(&net), 0);

    net.isolate(&[a, c]).expect("isolate");
    assert_eq!(reachable(&net, &nodes), vec![(0, 2), (2, 0)]);
    net.heal().expect("heal");

    // One direction only: TCP fails both ways (its answers are cut), the rule is one.
    net.cut_one_way(a, b).expect("one-way");
    assert_eq!(net.cuts(), vec![(a, b)]);
    assert_eq!(blackhole_rules(&net), 1);
    assert!(!reaches(&net, a, b));
    assert!(reaches(&net, a, c) && reaches(&net, c, b));
    // Faults add up: the half-open link of b and c joins the one-way cut.
    net.half_open(b, c).expect("half-open");
    assert_eq!(net.cuts(), vec![(a, b), (b, c), (c, b)]);
    assert_eq!(reachable(&net, &nodes), vec![(0, 2), (2, 0)]);
    net.heal().expect("heal");
    assert_eq!(reachable(&net, &nodes), all, "after the last heal");
}

#[test]
fn replication_runs_over_the_network_and_a_partition_stops_it() {
    let Some(mut net) =
        network("partitions::network::replication_runs_over_the_network_and_a_partition_stops_it")
    else {
        return;
    };
    let master = net.add_node("master").expect("node");
    let replica = net.add_node("replica").expect("node");
    net.start_server(master, ServerOptions::new())
        .expect("master");
    net.start_replica(replica, master, ServerOptions::new())
        .expect("replica");
    let mut con = net
        .server(master)
        .expect("master")
        .connection()
        .expect("socket");
    redis::cmd("SET")
        .arg("k")
        .arg("1")
        .exec(&mut con)
        .expect("SET");
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(5_000)
        .query(&mut con)
        .expect("WAIT");
    assert_eq!(acked, 1, "the replica acknowledged over the network");

    net.partition(&[&[master], &[replica]]).expect("partition");
    redis::cmd("SET")
        .arg("k")
        .arg("2")
        .exec(&mut con)
        .expect("SET");
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(300)
        .query(&mut con)
        .expect("WAIT");
    assert_eq!(acked, 0, "a partitioned replica acknowledges nothing");
    // The harness's own connection goes through the socket: the partition does not touch it.
    let v: String = redis::cmd("GET")
        .arg("k")
        .query(
            &mut net
                .server(replica)
                .expect("replica")
                .connection()
                .expect("socket"),
        )
        .expect("GET");
    assert_eq!(
        v, "1",
        "the write made during the partition did not reach the replica"
    );
}

/// The host's IPv4 addresses other than loopback (`ip -4 -o addr` in the host namespace).
fn host_addresses() -> Vec<String> {
    let out = Command::new("ip")
        .args(["-4", "-o", "addr"])
        .output()
        .expect("ip addr");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(3))
        .filter_map(|cidr| cidr.split('/').next())
        .filter(|ip| !ip.starts_with("127."))
        .map(str::to_owned)
        .collect()
}

#[test]
fn nothing_in_the_network_reaches_the_host() {
    let Some(mut net) = network("partitions::network::nothing_in_the_network_reaches_the_host")
    else {
        return;
    };
    let node = net.add_node("client").expect("node");
    net.add_node("other").expect("node");
    // Every route is a node link or the default route through the router.
    for (ns, routes) in net.routes().expect("routes") {
        for route in routes.lines() {
            let inside = route.starts_with("10.77.") || route.starts_with("default via 10.77.");
            assert!(inside, "{ns} has a route out of the network: {route}");
        }
    }
    // And a connection to each host address fails (the router answers "unreachable").
    let listener = std::net::TcpListener::bind("0.0.0.0:0").expect("listener");
    let port = listener.local_addr().expect("addr").port().to_string();
    listener.set_nonblocking(true).expect("nonblocking");
    for host in host_addresses() {
        let mut cmd = net.command(node, "timeout");
        cmd.args([PROBE_LIMIT, "redis-cli", "-h", &host, "-p", &port, "PING"]);
        let out = cmd.output().expect("redis-cli");
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains("PONG") && !out.status.success(),
            "node reached the host at {host}:{port}"
        );
    }
    assert!(
        listener.accept().is_err(),
        "a connection from the network reached the host"
    );
}

#[test]
fn namespaces_go_with_the_network_and_those_of_dead_tests_are_swept() {
    let Some(mut net) = network(
        "partitions::network::namespaces_go_with_the_network_and_those_of_dead_tests_are_swept",
    ) else {
        return;
    };
    let node = net.add_node("a").expect("node");
    net.start_server(node, ServerOptions::new())
        .expect("server");
    let name = net.namespace(node).expect("ns").to_owned();
    let mut sleeper = net.command(node, "sleep");
    sleeper.arg("600");
    // Left running on purpose: dropping the network must kill it. Dropped once it is inside
    // the namespace (`ip netns exec` has entered it), which is when the network can see it.
    let mut sleeper = dlock_testkit::ChildGuard::spawn(sleeper).expect("sleep");
    let pid = sleeper.pid().to_string();
    let inside = || {
        let out = Command::new("ip").args(["netns", "pids", &name]).output();
        out.is_ok_and(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .any(|p| p == pid)
        })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !inside() {
        assert!(
            std::time::Instant::now() < deadline,
            "sleep never entered {name}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    drop(net);
    let list = || {
        String::from_utf8_lossy(
            &Command::new("ip")
                .args(["netns", "list"])
                .output()
                .expect("ip")
                .stdout,
        )
        .into_owned()
    };
    assert!(!list().contains(&name), "{name} outlived its network");
    let status = sleeper
        .wait_timeout(std::time::Duration::from_secs(5))
        .expect("wait");
    assert!(
        status.is_some(),
        "a process started in the network outlived it"
    );

    // A namespace named for a pid that no longer runs, as a SIGKILLed test leaves behind.
    let mut gone = Command::new("true").spawn().expect("true");
    gone.wait().expect("wait");
    let stale = format!("dlock-net-{}-0-n0", gone.id());
    let added = Command::new("ip")
        .args(["netns", "add", &stale])
        .status()
        .expect("ip");
    assert!(added.success());
    let _next = network("partitions::network::namespaces_go…").expect("network");
    assert!(!list().contains(&stale), "{stale} was not swept");
}

#[test]
fn a_master_isolated_with_a_minority_is_failed_over_by_the_majority() {
    let Some(mut net) = network(
        "partitions::network::a_master_isolated_with_a_minority_is_failed_over_by_the_majority",
    ) else {
        return;
    };
    let nodes: Vec<NodeId> = ["master", "r1", "r2"]
        .iter()
        .map(|label| net.add_node(label).expect("node"))
        .collect();
    let master = nodes[0];
    net.start_server(master, ServerOptions::new())
        .expect("master");
    for &replica in &nodes[1..] {
        net.start_replica(replica, master, ServerOptions::new())
            .expect("replica");
    }
    for &node in &nodes {
        net.start_sentinel(node, master, 2).expect("sentinel");
    }
    net.wait_sentinels(2).expect("the sentinels see each other");
    assert_eq!(net.sentinel_master(nodes[1]).expect("asked"), master);

    // The master with its own sentinel: a minority. The other two vote a replica in.
    net.isolate(&[master]).expect("isolate");
    let new = net.wait_failover(master).expect("failover");
    assert!(nodes[1..].contains(&new), "promoted node {new:?}");
    assert_eq!(
        net.sentinel_master(master).expect("asked"),
        master,
        "the isolated sentinel heard nothing"
    );
    // Healed, the old master is told to follow the new one.
    net.heal().expect("heal");
    let old = net.server(master).expect("old master");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        // Turning into a replica, the server closes its clients: a reset is "not yet".
        let role: Option<Vec<redis::Value>> = old
            .connection()
            .ok()
            .and_then(|mut con| redis::cmd("ROLE").query(&mut con).ok());
        if role.as_ref().is_some_and(
            |role| matches!(role.first(), Some(redis::Value::BulkString(r)) if r == b"slave"),
        ) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the old master never rejoined: {role:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn a_test_that_panics_leaves_no_namespace() {
    let test = "partitions::network::a_test_that_panics_leaves_no_namespace";
    if network(test).is_none() {
        return;
    }
    let names = std::sync::Mutex::new(Vec::new());
    let panicked = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let mut net = network(test).expect("network");
                let node = net.add_node("a").expect("node");
                net.start_server(node, ServerOptions::new())
                    .expect("server");
                names
                    .lock()
                    .expect("names")
                    .push(net.namespace(node).expect("ns").to_owned());
                panic!("the test fails with its network up");
            })
            .join()
            .is_err()
    });
    assert!(panicked);
    let list = String::from_utf8_lossy(
        &Command::new("ip")
            .args(["netns", "list"])
            .output()
            .expect("ip")
            .stdout,
    )
    .into_owned();
    let names = names.into_inner().expect("names");
    assert_eq!(names.len(), 1, "the network came up before the panic");
    for name in names {
        assert!(!list.contains(&name), "{name} outlived a panic");
    }
}

/// The relay (latency and jitter in user space): a round trip through it takes at least twice
/// its delay (each direction is held), and with jitter one connection's bytes keep their
/// order (a pipelined batch of appends lands in the order sent).
#[test]
fn a_relay_delays_both_directions_and_keeps_the_order() {
    let Some(mut net) =
        network("partitions::network::a_relay_delays_both_directions_and_keeps_the_order")
    else {
        return;
    };
    let master = net.add_node("master").expect("node");
    let client = net.add_node("client").expect("node");
    net.start_server(master, ServerOptions::new())
        .expect("server");
    let upstream = std::net::SocketAddrV4::new(net.address(master), SERVER_PORT);
    let latency = dlock_testkit::Latency {
        delay: std::time::Duration::from_millis(100),
        jitter: std::time::Duration::from_millis(30),
    };
    let relay = net.relay(master, 6380, upstream, latency).expect("relay");
    let host = relay.address().ip().to_string();
    let port = relay.address().port().to_string();

    let started = std::time::Instant::now();
    let mut ping = net.command(client, "timeout");
    ping.args(["5", "redis-cli", "-h", &host, "-p", &port, "PING"]);
    let out = ping.output().expect("redis-cli");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "PONG");
    // A lower bound only: the relay holds the request and the reply 100 ms each at least.
    assert!(
        started.elapsed() >= 2 * latency.delay,
        "a round trip through the relay took {:?}",
        started.elapsed()
    );

    // 300 appends sent at once (RESP, `redis-cli --pipe`), in several chunks of jitter.
    let mut batch = String::new();
    for i in 0..300 {
        let n = i.to_string();
        batch.push_str(&format!(
            "*3\r\n$5\r\nRPUSH\r\n$1\r\nl\r\n${}\r\n{n}\r\n",
            n.len()
        ));
    }
    let mut pipe = net.command(client, "timeout");
    pipe.args(["10", "redis-cli", "-h", &host, "-p", &port, "--pipe"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null());
    let mut child = pipe.spawn().expect("redis-cli --pipe");
    std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), batch.as_bytes())
        .expect("send the batch");
    assert!(
        child.wait().expect("wait").success(),
        "redis-cli --pipe failed"
    );
    let list: Vec<u32> = redis::cmd("LRANGE")
        .arg("l")
        .arg(0)
        .arg(-1)
        .query(
            &mut net
                .server(master)
                .expect("master")
                .connection()
                .expect("socket"),
        )
        .expect("LRANGE");
    assert_eq!(
        list,
        (0..300).collect::<Vec<u32>>(),
        "the relay reordered bytes"
    );
    drop(relay);
    // Stopped: nothing listens there any more.
    let mut after = net.command(client, "timeout");
    after.args(["2", "redis-cli", "-h", &host, "-p", &port, "PING"]);
    let out = after.output().expect("redis-cli");
    assert_ne!(String::from_utf8_lossy(&out.stdout).trim(), "PONG");
}
