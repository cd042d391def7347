//! The nemeses of a [`Network`]: cuts as `ip rule … blackhole` in the router namespace.
//!
//! Faults add up (a one-way cut during a partition stays when nothing else changes);
//! [`Network::heal`] removes them all. The set of cuts in force is kept beside the rules, and
//! only the difference is applied, so a fault that repeats a cut adds no rule twice.

use std::collections::BTreeSet;

use super::cuts::{self, Cut};
use super::{CUT_PRIORITY, Network, NodeId, lock};
use crate::HarnessError;

impl Network {
    /// Partitions the network: every node of one group is cut, both ways, from every node of
    /// every other group. Nodes in no group keep every link (a client that sees both sides).
    ///
    /// # Errors
    ///
    /// When fewer than two groups are given, a group is empty, a node is in two groups or not
    /// in this network, or `ip` fails.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let mut net = dlock_testkit::Network::start()?;
    /// # let [a, b, c] = [net.add_node("a")?, net.add_node("b")?, net.add_node("c")?];
    /// net.partition(&[&[a, b], &[c]])?; // c alone
    /// net.heal()?;
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn partition(&self, groups: &[&[NodeId]]) -> Result<(), HarnessError> {
        let indices: Vec<Vec<usize>> = groups
            .iter()
            .map(|group| self.indices(group))
            .collect::<Result<_, _>>()?;
        let borrowed: Vec<&[usize]> = indices.iter().map(Vec::as_slice).collect();
        let new = cuts::partition(&borrowed).map_err(HarnessError::new)?;
        self.add_cuts(&new)
    }

    /// Cuts the packets from `from` to `to` only; the other direction still flows. A TCP
    /// connection between them stalls both ways (its acknowledgements are cut), but a
    /// connection attempt from `to` reaches `from` and times out waiting for the answer.
    ///
    /// # Errors
    ///
    /// When a node is not in this network, or `ip` fails.
    pub fn cut_one_way(&self, from: NodeId, to: NodeId) -> Result<(), HarnessError> {
        self.indices(&[from, to])?;
        self.add_cuts(&BTreeSet::from([(from.0, to.0)]))
    }

    /// Makes the link between `a` and `b` half-open: the packets between them vanish both ways,
    /// silently. Both keep their TCP connections open and see nothing wrong until a timeout of
    /// their own says so (no RST, no ICMP). Other links of `a` and `b` stay.
    ///
    /// # Errors
    ///
    /// When a node is not in this network, or `ip` fails.
    pub fn half_open(&self, a: NodeId, b: NodeId) -> Result<(), HarnessError> {
        self.indices(&[a, b])?;
        self.add_cuts(&cuts::half_open(a.0, b.0))
    }

    /// Cuts `group` from every other node of the network, both ways: a master isolated
    /// together with a minority of its replicas and sentinels, or any node alone.
    ///
    /// # Errors
    ///
    /// When `group` is empty or holds every node, a node is not in this network, or `ip`
    /// fails.
    pub fn isolate(&self, group: &[NodeId]) -> Result<(), HarnessError> {
        let indices = self.indices(group)?;
        if indices.is_empty() {
            return Err(HarnessError::new("isolate: the group is empty"));
        }
        let new = cuts::isolate(&indices, self.nodes.len()).map_err(HarnessError::new)?;
        self.add_cuts(&new)
    }

    /// Removes every cut: all links carry packets again.
    ///
    /// # Errors
    ///
    /// When `ip` fails to delete a rule (the cuts it could not remove stay recorded).
    pub fn heal(&self) -> Result<(), HarnessError> {
        let mut current = lock(&self.cuts);
        let all: Vec<Cut> = current.iter().copied().collect();
        for cut in all {
            self.rule("del", cut)?;
            current.remove(&cut);
        }
        Ok(())
    }

    /// The cuts in force: `(from, to)` for every direction whose packets are dropped.
    pub fn cuts(&self) -> Vec<(NodeId, NodeId)> {
        lock(&self.cuts)
            .iter()
            .map(|&(a, b)| (NodeId(a), NodeId(b)))
            .collect()
    }

    fn indices(&self, nodes: &[NodeId]) -> Result<Vec<usize>, HarnessError> {
        nodes
            .iter()
            .map(|&node| self.node(node).map(|_| node.0))
            .collect()
    }

    fn add_cuts(&self, new: &BTreeSet<Cut>) -> Result<(), HarnessError> {
        let mut current = lock(&self.cuts);
        for &cut in new.difference(&current.clone()) {
            self.rule("add", cut)?;
            current.insert(cut);
        }
        Ok(())
    }

    /// `ip rule add|del from <a> to <b> blackhole` in the router.
    fn rule(&self, verb: &str, (from, to): Cut) -> Result<(), HarnessError> {
        let (from, to) = (Self::ip_of(from).to_string(), Self::ip_of(to).to_string());
        self.router.ip(&[
            "rule",
            verb,
            "from",
            &from,
            "to",
            &to,
            "blackhole",
            "priority",
            CUT_PRIORITY,
        ])?;
        Ok(())
    }

    /// The router's `ip rule` list, for a test that checks what is in force.
    ///
    /// # Errors
    ///
    /// When `ip` fails.
    pub fn router_rules(&self) -> Result<String, HarnessError> {
        self.router.ip(&["rule", "list"])
    }

    /// The routes of the router and of every node (`ip route` in each), for a test that checks
    /// that nothing leads out of the network.
    ///
    /// # Errors
    ///
    /// When `ip` fails.
    pub fn routes(&self) -> Result<Vec<(String, String)>, HarnessError> {
        let mut all = vec![(self.router.name().to_owned(), self.router.ip(&["route"])?)];
        for node in &self.nodes {
            all.push((node.ns.name().to_owned(), node.ns.ip(&["route"])?));
        }
        Ok(all)
    }
}
