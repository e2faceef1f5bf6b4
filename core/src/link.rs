//! Port states in a live switch: each port's link (carrier), its administrative state and its
//! MTU, written by whoever follows them and read by the workers once per loop.
//!
//! Who writes what: the link watcher (`raceway::live`) sets `carrier` from each device (DPDK's
//! link status; for net_af_packet, the kernel interface's carrier over netlink); the control
//! plane's FIB thread sets `admin_up` and `mtu` from the port's host interface (`ip link set
//! PORT down`, `ip link set PORT mtu N` in the control namespace). The control thread mirrors
//! `carrier` onto that interface. A writer that changes anything bumps `generation`; a worker
//! compares it with the one it last applied (one atomic load per loop) and only then reads the
//! ports again, so following links costs the packet path nothing while they are steady.
//!
//! Invariant: `generation` is bumped after the change it announces (release), so a worker that
//! sees the new generation (acquire) reads at least that change; `mtu` never leaves
//! 68..=`max_mtu`.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// One port's state as a worker applies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortState {
    /// The link is up (carrier).
    pub carrier: bool,
    /// Not shut down by the operator.
    pub admin_up: bool,
    /// Largest IP packet the port sends.
    pub mtu: u32,
}

impl PortState {
    /// Whether frames may leave through the port.
    pub fn usable(self) -> bool {
        self.carrier && self.admin_up
    }
}

/// The smallest MTU IPv4 allows (RFC 791); IPv6 needs 1280, which the kernel enforces for the
/// interface's IPv6 side.
pub const MIN_MTU: u32 = 68;

struct Slot {
    carrier: AtomicBool,
    admin_up: AtomicBool,
    mtu: AtomicU32,
    /// The largest MTU the port can take: `switch.mtu` (what buffers, headroom and jumbo mbufs
    /// were sized for) or the device's maximum, whichever is smaller.
    max_mtu: u32,
}

/// Every port's state, shared by the threads of a live switch.
pub struct PortStates {
    slots: Vec<Slot>,
    generation: AtomicU64,
}

impl PortStates {
    /// Ports starting with these MTUs (each clamped to its maximum), links down until a watcher
    /// says otherwise, administratively up.
    pub fn new(ports: impl IntoIterator<Item = (u32, u32)>) -> Self {
        let slots = ports
            .into_iter()
            .map(|(mtu, max_mtu)| {
                let max_mtu = max_mtu.max(MIN_MTU);
                Slot {
                    carrier: AtomicBool::new(false),
                    admin_up: AtomicBool::new(true),
                    mtu: AtomicU32::new(mtu.clamp(MIN_MTU, max_mtu)),
                    max_mtu,
                }
            })
            .collect();
        Self { slots, generation: AtomicU64::new(1) }
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Bumped after every change.
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Port `port`'s state now.
    pub fn get(&self, port: usize) -> PortState {
        let slot = &self.slots[port];
        PortState {
            carrier: slot.carrier.load(Ordering::Relaxed),
            admin_up: slot.admin_up.load(Ordering::Relaxed),
            mtu: slot.mtu.load(Ordering::Relaxed),
        }
    }

    /// The largest MTU `port` takes.
    pub fn max_mtu(&self, port: usize) -> u32 {
        self.slots[port].max_mtu
    }

    /// Sets the port's carrier; true when that changed it.
    pub fn set_carrier(&self, port: usize, up: bool) -> bool {
        self.changed(self.slots[port].carrier.swap(up, Ordering::Relaxed) != up)
    }

    /// Sets the port's administrative state; true when that changed it.
    pub fn set_admin_up(&self, port: usize, up: bool) -> bool {
        self.changed(self.slots[port].admin_up.swap(up, Ordering::Relaxed) != up)
    }

    /// Sets the port's MTU, clamped to what it takes; returns the MTU set.
    pub fn set_mtu(&self, port: usize, mtu: u32) -> u32 {
        let slot = &self.slots[port];
        let mtu = mtu.clamp(MIN_MTU, slot.max_mtu);
        self.changed(slot.mtu.swap(mtu, Ordering::Relaxed) != mtu);
        mtu
    }

    fn changed(&self, changed: bool) -> bool {
        if changed {
            self.generation.fetch_add(1, Ordering::Release);
        }
        changed
    }
}

/// A worker's view: applies what changed since it last looked.
pub struct Follower {
    seen: u64,
}

impl Follower {
    /// A follower that has applied nothing yet (its first `changes` reports every port).
    pub fn new() -> Self {
        Self { seen: 0 }
    }

    /// When `states` changed since the last call, calls `apply` with each port's state.
    #[inline]
    pub fn follow(&mut self, states: &PortStates, mut apply: impl FnMut(usize, PortState)) {
        let generation = states.generation();
        if generation == self.seen {
            return;
        }
        self.seen = generation;
        for port in 0..states.len() {
            apply(port, states.get(port));
        }
    }
}

impl Default for Follower {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_follower_sees_each_change_once_and_nothing_while_steady() {
        let states = PortStates::new([(1500, 9000), (9000, 4000)]);
        assert_eq!(states.get(1).mtu, 4000, "clamped to the port's maximum");
        assert_eq!((states.max_mtu(0), states.max_mtu(1)), (9000, 4000));
        assert_eq!((states.len(), states.is_empty()), (2, false));
        assert!(PortStates::new([]).is_empty());
        let mut follower = Follower::new();
        let mut seen = Vec::new();
        follower.follow(&states, |port, state| seen.push((port, state)));
        assert_eq!(seen.len(), 2, "the first look reports every port");
        assert!(!seen[0].1.usable(), "down until a watcher says the link is up");
        seen.clear();
        follower.follow(&states, |port, state| seen.push((port, state)));
        assert!(seen.is_empty(), "nothing changed");

        assert!(states.set_carrier(0, true));
        assert!(!states.set_carrier(0, true), "already up");
        follower.follow(&states, |port, state| seen.push((port, state)));
        assert_eq!(seen[0], (0, PortState { carrier: true, admin_up: true, mtu: 1500 }));
        assert!(seen[0].1.usable());
        seen.clear();

        assert_eq!(states.set_mtu(0, 1400), 1400);
        assert_eq!(states.set_mtu(0, 20), MIN_MTU);
        assert_eq!(states.set_mtu(1, 9000), 4000);
        assert!(states.set_admin_up(0, false));
        follower.follow(&states, |port, state| seen.push((port, state)));
        assert_eq!(seen[0].1, PortState { carrier: true, admin_up: false, mtu: MIN_MTU });
        assert!(!seen[0].1.usable(), "shut down");
        let generation = states.generation();
        assert_eq!(states.set_mtu(1, 4000), 4000);
        assert_eq!(states.generation(), generation, "setting the same MTU changes nothing");
    }
}
