//! Picking a free TCP port on 127.0.0.1.
//!
//! The kernel hands out a free port for a bind to port 0; the listener is then dropped and
//! `redis-server` binds the port itself. Another process may take the port in between: that race
//! cannot be closed from outside `redis-server`, so the launcher detects the lost race ("Address
//! already in use" in the server log) and starts over with a new port.

use std::net::{Ipv4Addr, TcpListener};

use crate::HarnessError;

/// Redis Cluster's bus port is the client port plus this offset.
pub(crate) const CLUSTER_BUS_OFFSET: u16 = 10_000;

/// How many kernel-chosen ports to try before giving up on finding a free bus port as well.
const ATTEMPTS: usize = 64;

/// A port that is free on 127.0.0.1 right now; with `cluster`, its bus port (`port + 10000`) is
/// free too.
pub(crate) fn free_port(cluster: bool) -> Result<u16, HarnessError> {
    for _ in 0..ATTEMPTS {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .map_err(|error| HarnessError::new("cannot bind 127.0.0.1:0").with_source(error))?;
        let port = listener
            .local_addr()
            .map_err(|error| HarnessError::new("cannot read a local address").with_source(error))?
            .port();
        if !cluster {
            return Ok(port);
        }
        // Both are held at once, so the check cannot pass on a port that is taken in between.
        let Some(bus) = port.checked_add(CLUSTER_BUS_OFFSET) else {
            continue;
        };
        if TcpListener::bind((Ipv4Addr::LOCALHOST, bus)).is_ok() {
            return Ok(port);
        }
    }
    Err(HarnessError::new(format!(
        "no free port on 127.0.0.1 whose cluster bus port (+{CLUSTER_BUS_OFFSET}) is free too, \
         after {ATTEMPTS} attempts"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_ports_leave_room_for_the_bus_port() -> Result<(), HarnessError> {
        for _ in 0..20 {
            let port = free_port(true)?;
            assert!(port.checked_add(CLUSTER_BUS_OFFSET).is_some());
        }
        Ok(())
    }
}
