//! [`RedisNodes`]: N independent standalone servers, as the Redlock algorithm expects.
//!
//! Unlike [`RedisCluster`](crate::RedisCluster) the servers know nothing of each other: Redlock
//! gets its safety from a majority of independent nodes, so tests kill, pause and restart
//! individual nodes through [`RedisNodes::nodes_mut`].

use std::fmt;

use crate::{HarnessError, RedisServer, ServerOptions};

/// N independent standalone [`RedisServer`]s (for Redlock), each on its own port.
///
/// # Example
///
/// ```no_run
/// use dlock_testkit::RedisNodes;
///
/// let mut nodes = RedisNodes::start(3)?;
/// let urls = nodes.urls(); // hand these to the Redlock client
/// nodes.nodes_mut()[0].kill(); // a minority failure: locking must still work
/// # Ok::<(), dlock_testkit::HarnessError>(())
/// ```
pub struct RedisNodes {
    nodes: Vec<RedisServer>,
}

impl RedisNodes {
    /// Starts `n` standalone servers with default options.
    ///
    /// # Errors
    ///
    /// As [`start_with`](Self::start_with).
    ///
    /// # Example
    ///
    /// ```no_run
    /// let nodes = dlock_testkit::RedisNodes::start(5)?;
    /// assert_eq!(nodes.nodes().len(), 5);
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn start(n: usize) -> Result<RedisNodes, HarnessError> {
        Self::start_with(n, ServerOptions::new())
    }

    /// Starts `n` standalone servers configured with `options`.
    ///
    /// # Errors
    ///
    /// When `n` is 0 or any server fails to start (see [`RedisServer::start_with`]); servers
    /// already started are stopped again.
    ///
    /// # Example
    ///
    /// ```no_run
    /// use dlock_testkit::{RedisNodes, ServerOptions};
    ///
    /// let nodes = RedisNodes::start_with(3, ServerOptions::new().arg("maxmemory", "10mb"))?;
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn start_with(n: usize, options: ServerOptions) -> Result<RedisNodes, HarnessError> {
        if n == 0 {
            return Err(HarnessError::new(
                "RedisNodes needs at least one node, 0 requested",
            ));
        }
        let nodes = (0..n)
            .map(|_| RedisServer::start_with(options.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(RedisNodes { nodes })
    }

    /// The nodes' URLs, in [`nodes`](Self::nodes) order.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let nodes = dlock_testkit::RedisNodes::start(3)?;
    /// for url in nodes.urls() {
    ///     let client = redis::Client::open(url)?;
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The nodes.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let nodes = dlock_testkit::RedisNodes::start(3)?;
    /// let mut con = nodes.nodes()[2].connection()?;
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// The nodes, for fault injection (kill, pause, restart).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # let mut nodes = dlock_testkit::RedisNodes::start(3)?;
    /// nodes.nodes_mut()[1].restart()?; // lost its data: lock keys on it are gone
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn nodes_mut(&mut self) -> &mut [RedisServer] {
        &mut self.nodes
    }
}

impl fmt::Debug for RedisNodes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self { nodes } = self;
        f.debug_struct("RedisNodes").field("nodes", nodes).finish()
    }
}
