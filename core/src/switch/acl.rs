//! Applying the `[[acl]]` tables on the switch's path (`pipeline::acl` matches): a routed
//! frame meets its ingress port's table once it is counted as received, and its egress port's
//! table once the port is chosen and its MTU checked, before it is queued or handed to
//! another worker. A match counts on its rule; `drop` then counts the frame under the drop
//! reason `acl` on its ingress port; `set` decides a new DSCP (the rewrite writes it, and a
//! later table already matches it) and/or moves the frame to another class.
//!
//! Invariant: a port with no table costs one load and a branch per frame; a frame is
//! counted on at most one rule per stage, and each dropped frame under `acl` once.

use super::{Received, Switch};
use crate::config::{AclAction, AclStage, Config};
use crate::drops::DropReason;
use crate::packet::PacketBuf;
use crate::pipeline::acl::{AclKey, AclMatcher};
use crate::wire::IpHeader;

/// The matchers of a config's tables, and per port the table it is bound to at each stage.
pub(super) struct AclTables {
    matchers: Vec<AclMatcher>,
    ingress: Vec<Option<u16>>,
    egress: Vec<Option<u16>>,
}

impl AclTables {
    pub(super) fn new(config: &Config) -> Self {
        let mut ingress = vec![None; config.ports.len()];
        let mut egress = vec![None; config.ports.len()];
        for (index, table) in config.acls.iter().enumerate() {
            let bound = match table.stage {
                AclStage::Ingress => &mut ingress,
                AclStage::Egress => &mut egress,
            };
            for &port in &table.ports {
                bound[port] = u16::try_from(index).ok();
            }
        }
        Self { matchers: config.acls.iter().map(AclMatcher::new).collect(), ingress, egress }
    }

    /// The table bound to `port` at `stage`.
    #[inline(always)]
    pub(super) fn bound(&self, port: usize, stage: AclStage) -> Option<u16> {
        match stage {
            AclStage::Ingress => self.ingress[port],
            AclStage::Egress => self.egress[port],
        }
    }
}

impl<P: PacketBuf> Switch<P> {
    /// Runs `table` over a routed frame (its first segment's bytes, and how many more follow)
    /// whose DSCP is `dscp` when an earlier table set one:
    /// `Some(tc)` to go on (in `tc`, which a `set` may change, as it may `dscp`), `None` when
    /// a rule dropped it (counted).
    #[inline]
    pub(super) fn filter(
        &mut self,
        table: u16,
        ingress: usize,
        (bytes, beyond): (&[u8], usize),
        ip: IpHeader,
        tc: usize,
        dscp: &mut Option<u8>,
    ) -> Option<usize> {
        let len = bytes.len() + beyond;
        let table = usize::from(table);
        let key = AclKey::read(bytes, ip, beyond).map(|key| match *dscp {
            Some(set) => key.with_dscp(set),
            None => key,
        });
        let found = key.and_then(|key| self.forwarding.acls.matchers[table].lookup_cached(&key));
        // No rule matched: permitted.
        let Some(found) = found else { return Some(tc) };
        let counts = &mut self.stats.acl[table][usize::from(found.rule)];
        counts.packets += 1;
        counts.bytes += len as u64;
        match found.action {
            AclAction::Permit => Some(tc),
            AclAction::Drop => {
                self.stats.ports[ingress].count_drop(DropReason::Acl);
                None
            }
            AclAction::Set { dscp: set, tc: new_tc } => {
                if set.is_some() {
                    *dscp = set;
                }
                Some(new_tc.map_or(tc, usize::from))
            }
        }
    }

    /// What a frame an ACL dropped became.
    #[cold]
    pub(super) fn acl_dropped() -> Received {
        Received::Dropped(DropReason::Acl)
    }
}
