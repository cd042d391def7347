//! The lagging copy a restart may come back with (the model's `Op::Replicate` and
//! `Op::Restart { from_replica: true }`), made and loaded by the real server: `SAVE` writes a
//! snapshot of the whole dataset, kept here; a restart from the copy kills the server (a crash:
//! nothing is saved at exit) and starts it from that snapshot — what a replica that stopped
//! receiving at that point, or an AOF that lost its tail, comes back with. The snapshot keeps
//! every key's expiry as an absolute time, which the server reads on its (moved) clock when it
//! loads it, as a promoted replica does.
//!
//! Why a snapshot and not a live replica: the model's copy is taken at one atomic point and
//! nothing reaches it until the next `Replicate`, which a replica's stream cannot be held to
//! without pausing and resuming a second server around every step; the snapshot is that point,
//! written and loaded by Redis itself.

use std::path::PathBuf;

use dlock_testkit::RedisServer;

use super::{Real, io};

/// The snapshot file redis-server writes and loads in its directory.
const DUMP: &str = "dump.rdb";

/// The last snapshot taken in this case, if any.
pub(super) struct Snapshot {
    rdb: Option<Vec<u8>>,
}

impl Snapshot {
    pub(super) fn new() -> Self {
        Self { rdb: None }
    }

    /// A new case: no copy yet (a restart from it comes back empty).
    pub(super) fn clear(&mut self) {
        self.rdb = None;
    }

    fn path(server: &RedisServer) -> PathBuf {
        server.dir().join(DUMP)
    }

    /// Restarts `server` from the copy (empty without one).
    pub(super) fn restore(&self, server: &mut RedisServer) -> Result<(), String> {
        server.kill();
        let path = Self::path(server);
        match &self.rdb {
            Some(rdb) => std::fs::write(&path, rdb).map_err(|e| format!("{DUMP}: {e}"))?,
            None => {
                if path.exists() {
                    std::fs::remove_file(&path).map_err(|e| format!("{DUMP}: {e}"))?;
                }
            }
        }
        server
            .crash_and_recover()
            .map_err(|e| format!("restart from the copy: {e}"))
    }
}

impl Real {
    /// The replica catches up: a snapshot of the data now.
    pub(super) fn snapshot(&mut self) -> Result<(), String> {
        redis::cmd("SAVE").exec(&mut self.con).map_err(io("SAVE"))?;
        let rdb =
            std::fs::read(Snapshot::path(&self.server)).map_err(|e| format!("{DUMP}: {e}"))?;
        self.copy.rdb = Some(rdb);
        Ok(())
    }
}
