//! Load balancing over a group's members (uplinks): per flow (`ecmp`), per packet round robin
//! (`spray`), per packet at random (`random`), per packet towards the shortest queue
//! (`adaptive`, DRILL-style), and per flowlet (`flowlet`).
//!
//! - ecmp: the flow hash (5-tuple plus the RoCEv2 destination QP) scaled onto the usable
//!   members; one flow stays on one member while the set of usable members is unchanged.
//! - spray: a round-robin cursor per group; per worker, members differ by at most one packet,
//!   so several workers sharing a group stay balanced within one packet each.
//! - random: a uniform draw from the seeded PRNG.
//! - adaptive: compare two random members and the last choice, take the one whose queue for
//!   the packet's traffic class drains soonest: what is still to leave the link (the frame on
//!   the wire, and live, the frames the shaper already handed to the NIC), then the queued
//!   frame bytes / link speed (so a slower link counts as longer). Equal costs are broken at
//!   random (keeping the last choice on ties piled frames on it: 18/18/4 over three idle
//!   uplinks). A member whose class is paused by received PFC is skipped while any other
//!   candidate is not paused.
//! - flowlet: as Broadcom's DLB, a flow's hash picks one of `FLOWSETS` flowsets, allocated up
//!   front. A flowset keeps its member while its packets come less than `flowlet_gap_us`
//!   apart; after a longer gap the next packet moves it to the member that drains soonest (as
//!   adaptive, over all members; among equals, starting from a random one). Flows whose
//!   hashes share a flowset share its member and its gap, so every flow keeps its order
//!   however many are active: more flows than flowsets only makes flowlets coarser. Frames
//!   placed by a flowset another flow opened are counted (`flowlet_collisions`).
//!
//! A weighted group (the kernel's multipath weights) gives each member as many slots as its
//! weight asks, dealt in smooth weighted round robin order, and every mode picks among slots:
//! ecmp and random in proportion to the weights, spray in that order.
//!
//! Members that are down (`enabled = false`, or link down when live) are never chosen; when
//! none is usable the caller drops the packet as `no_route`.
//!
//! Invariant: selection never allocates (the flowset table is allocated whole when its group
//! is made) and depends only on its inputs and the seeded PRNG, so replays are deterministic;
//! a flow maps to one flowset for the group's life, so a flowset's member changes only after
//! a gap in which none of its flows sent.

use crate::config::GroupMode;
use crate::pipeline::fib;
use crate::rng::Rng;

/// Flowsets per flowlet group (Broadcom's DLB gives a group a flowset table of this order).
pub const FLOWSETS: usize = 16_384;

/// One flowset: the member its flows take while they keep sending within the gap.
#[derive(Debug, Clone, Copy, Default)]
struct Flowset {
    /// The flow hash that opened the current flowlet.
    flow: u32,
    slot: u16,
    /// Whether any flow has used it (a fresh one has no member to keep).
    used: bool,
    last_seen_ps: u64,
}

struct Group {
    mode: GroupMode,
    /// The port of each slot: a member takes as many slots as its weight asks
    /// (`fib::weighted_slots`), one each in an unweighted group.
    members: Vec<u16>,
    /// The member (index in the FIB's group) of each slot.
    member_of: Vec<u16>,
    cursor: usize,
    last_choice: usize,
    gap_ps: u64,
    /// `FLOWSETS` flowsets in flowlet mode, none otherwise.
    flowsets: Vec<Flowset>,
}

impl Group {
    fn new(group: &fib::Group) -> Self {
        let member_of = if group.weights.iter().all(|&weight| weight == group.weights[0]) {
            (0..group.members.len() as u16).collect()
        } else {
            fib::weighted_slots(&group.weights)
        };
        Self {
            mode: group.mode,
            members: member_of.iter().map(|&member| group.members[usize::from(member)].port).collect(),
            member_of,
            cursor: 0,
            last_choice: 0,
            gap_ps: u64::from(group.flowlet_gap_us) * 1_000_000,
            flowsets: if group.mode == GroupMode::Flowlet { vec![Flowset::default(); FLOWSETS] } else { Vec::new() },
        }
    }

    fn same_as(&self, other: &Group) -> bool {
        self.mode == other.mode
            && self.members == other.members
            && self.member_of == other.member_of
            && self.gap_ps == other.gap_ps
    }
}

/// What the selector needs to know about ports at decision time.
pub trait PortView {
    /// Whether the port may carry traffic (enabled and link up).
    fn usable(&self, port: usize) -> bool;
    /// Time to drain the port's queue of class `tc`, in ps; `u64::MAX` when that class is
    /// paused by PFC.
    fn drain_cost(&self, port: usize, tc: usize) -> u64;
}

pub struct Selector {
    groups: Vec<Group>,
    /// Frames a flowlet group placed by a flowset another flow had opened (all groups).
    collisions: u64,
}

impl Selector {
    /// A selector for the FIB's groups, slot for slot.
    pub fn new(groups: &[fib::Group]) -> Self {
        Self { groups: groups.iter().map(Group::new).collect(), collisions: 0 }
    }

    /// Follows a new FIB generation: a group whose mode and members did not change keeps its
    /// state (cursor, last choice, flowlet table); a changed or new one starts afresh. Runs
    /// only when the FIB changes, never per packet.
    pub fn sync(&mut self, groups: &[fib::Group]) {
        self.groups.truncate(groups.len());
        for (index, group) in groups.iter().enumerate() {
            let fresh = Group::new(group);
            match self.groups.get_mut(index) {
                Some(state) if state.same_as(&fresh) => {}
                Some(state) => *state = fresh,
                None => self.groups.push(fresh),
            }
        }
    }

    /// Frames placed by a flowset that another flow had opened, so far (every flowlet group):
    /// how often more flows are active than the flowsets tell apart.
    pub fn flowlet_collisions(&self) -> u64 {
        self.collisions
    }

    /// Picks a member of `group` for a packet: (member index, port), or `None` when no member is
    /// usable (or the group is gone: a frame classified under an older FIB generation).
    #[inline]
    pub fn select(
        &mut self,
        group: usize,
        flow_hash: u32,
        tc: usize,
        now: u64,
        rng: &mut Rng,
        ports: &impl PortView,
    ) -> Option<(u16, u16)> {
        let state = self.groups.get_mut(group)?;
        let usable = Usable::of(&state.members, ports, tc)?;
        let slot = match state.mode {
            GroupMode::Ecmp => ecmp(&usable, flow_hash),
            GroupMode::Spray => spray(&usable, &mut state.cursor),
            GroupMode::Random => usable.at_random(rng),
            GroupMode::Adaptive => adaptive(&usable, &mut state.last_choice, rng),
            GroupMode::Flowlet => {
                let flowlets =
                    Flowlets { sets: &mut state.flowsets, gap_ps: state.gap_ps, collisions: &mut self.collisions };
                flowlet(&usable, flowlets, flow_hash, now, rng)
            }
        };
        Some((state.member_of[slot], state.members[slot]))
    }
}

/// A group's slots as a mode sees them: which are usable now, and what each costs to drain.
/// Exists only when at least one slot is usable, so a mode always has one to pick.
struct Usable<'a, P: PortView> {
    members: &'a [u16],
    ports: &'a P,
    tc: usize,
    count: usize,
}

impl<'a, P: PortView> Usable<'a, P> {
    #[inline(always)]
    fn of(members: &'a [u16], ports: &'a P, tc: usize) -> Option<Self> {
        let count = members.iter().filter(|&&port| ports.usable(usize::from(port))).count();
        (count > 0).then_some(Self { members, ports, tc, count })
    }

    #[inline(always)]
    fn is_usable(&self, slot: usize) -> bool {
        self.ports.usable(usize::from(self.members[slot]))
    }

    /// The slot of the `n`th usable member (`n < count`).
    #[inline(always)]
    fn nth(&self, mut n: usize) -> usize {
        for slot in 0..self.members.len() {
            if self.is_usable(slot) {
                if n == 0 {
                    return slot;
                }
                n -= 1;
            }
        }
        unreachable!("n < count")
    }

    #[inline(always)]
    fn at_random(&self, rng: &mut Rng) -> usize {
        self.nth(rng.below(self.count as u64) as usize)
    }

    /// How long the slot's member's queue for the frame's class takes to drain.
    #[inline(always)]
    fn cost(&self, slot: usize) -> u64 {
        self.ports.drain_cost(usize::from(self.members[slot]), self.tc)
    }
}

/// ecmp: the flow hash scaled onto the usable members.
#[inline(always)]
fn ecmp<P: PortView>(usable: &Usable<P>, flow_hash: u32) -> usize {
    usable.nth(((u64::from(flow_hash) * usable.count as u64) >> 32) as usize)
}

/// spray: the next usable slot from the group's cursor, which moves past it.
#[inline(always)]
fn spray<P: PortView>(usable: &Usable<P>, cursor: &mut usize) -> usize {
    let len = usable.members.len();
    let mut slot = *cursor % len;
    while !usable.is_usable(slot) {
        slot = (slot + 1) % len;
    }
    *cursor = slot + 1;
    slot
}

/// adaptive (DRILL): the last choice and two random members; the cheapest wins, equals by a
/// fair draw among the distinct candidates (reservoir sampling, so the PRNG is drawn only on a
/// tie).
#[inline(always)]
fn adaptive<P: PortView>(usable: &Usable<P>, last_choice: &mut usize, rng: &mut Rng) -> usize {
    let first = usable.at_random(rng);
    let second = usable.at_random(rng);
    let mut best: Option<(usize, u64)> = None;
    let mut ties = 1;
    let candidates = [*last_choice, first, second];
    for (index, &candidate) in candidates.iter().enumerate() {
        if candidates[..index].contains(&candidate) || !usable.is_usable(candidate) {
            continue;
        }
        let candidate_cost = usable.cost(candidate);
        match best {
            Some((_, best_cost)) if candidate_cost > best_cost => {}
            Some((_, best_cost)) if candidate_cost == best_cost => {
                ties += 1;
                if rng.below(ties) == 0 {
                    best = Some((candidate, candidate_cost));
                }
            }
            _ => {
                best = Some((candidate, candidate_cost));
                ties = 1;
            }
        }
    }
    let (best, _) = best.expect("first is usable");
    *last_choice = best;
    best
}

/// What flowlet mode keeps of a group: its flowsets, its gap, and the selector's count of
/// frames placed by a flowset another flow opened.
struct Flowlets<'a> {
    sets: &'a mut [Flowset],
    gap_ps: u64,
    collisions: &'a mut u64,
}

/// flowlet: the flow's flowset keeps its member within the gap; after a longer gap the least
/// loaded member takes it, the scan starting at a random one so that ties (idle links) spread
/// flowlets instead of piling on the first.
#[inline(always)]
fn flowlet<P: PortView>(usable: &Usable<P>, flowlets: Flowlets, flow_hash: u32, now: u64, rng: &mut Rng) -> usize {
    let index = ((u64::from(flow_hash) * FLOWSETS as u64) >> 32) as usize;
    let set = &mut flowlets.sets[index];
    let keep =
        set.used && now.saturating_sub(set.last_seen_ps) < flowlets.gap_ps && usable.is_usable(usize::from(set.slot));
    let slot = if keep {
        *flowlets.collisions += u64::from(set.flow != flow_hash);
        usize::from(set.slot)
    } else {
        let len = usable.members.len();
        let start = usable.at_random(rng);
        let mut best = start;
        for offset in 1..len {
            let slot = (start + offset) % len;
            if usable.is_usable(slot) && usable.cost(slot) < usable.cost(best) {
                best = slot;
            }
        }
        *set = Flowset { flow: flow_hash, slot: best as u16, used: true, last_seen_ps: now };
        best
    };
    set.last_seen_ps = now;
    slot
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Ports {
        up: Vec<bool>,
        cost: Vec<u64>,
    }

    impl PortView for Ports {
        fn usable(&self, port: usize) -> bool {
            self.up[port]
        }
        fn drain_cost(&self, port: usize, _tc: usize) -> u64 {
            self.cost[port]
        }
    }

    fn selector(mode: &str) -> Selector {
        let text = format!(
            "[switch]\nname = \"t\"\nmac = \"02:00:00:00:00:01\"\n{}\n[[group]]\nname = \"g\"\nports = [\"p0\", \"p1\", \"p2\", \"p3\"]\nmode = \"{mode}\"\nflowlet_gap_us = 10\n",
            (0..4).map(|i| format!("[[port]]\nname = \"p{i}\"\nspeed_gbps = 100\npeer_mac = \"02:00:00:00:00:1{i}\"\n")).collect::<String>()
        );
        let config = crate::config::Config::parse(&text, "t.toml").unwrap();
        Selector::new(&crate::pipeline::fib::Fib::new(&config, &crate::pipeline::fib::Learned::default(), 1).groups)
    }

    fn ports() -> Ports {
        Ports { up: vec![true; 4], cost: vec![0; 4] }
    }

    #[test]
    fn sync_keeps_unchanged_groups_state_and_restarts_changed_ones() {
        let mut s = selector("spray");
        let mut rng = Rng::new(0);
        let view = ports();
        let group = |ports: &[u16]| fib::Group {
            mode: GroupMode::Spray,
            flowlet_gap_us: 10,
            members: ports
                .iter()
                .map(|&port| fib::Adjacency {
                    port,
                    mac: crate::wire::ethernet::MacAddress([2, 0, 0, 0, 0, 0x10 + port as u8]),
                })
                .collect(),
            weights: vec![1; ports.len()],
            via: Vec::new(),
        };
        assert_eq!(s.select(0, 7, 0, 0, &mut rng, &view).unwrap().1, 0);
        // The same group, and a new one: the cursor goes on where it was.
        s.sync(&[group(&[0, 1, 2, 3]), group(&[2, 3])]);
        assert_eq!(s.select(0, 7, 0, 0, &mut rng, &view).unwrap().1, 1);
        assert_eq!(s.select(1, 7, 0, 0, &mut rng, &view).unwrap().1, 2);
        // Changed members: it starts from its first member again.
        s.sync(&[group(&[3, 2, 1, 0])]);
        assert_eq!(s.select(0, 7, 0, 0, &mut rng, &view).unwrap().1, 3);
        // A group that no longer exists has no member (an older generation's frame).
        assert_eq!(s.select(1, 7, 0, 0, &mut rng, &view), None);
    }

    /// A weighted group (weights 1 and 3): every mode picks in proportion, and says which
    /// member (not which slot) it picked.
    #[test]
    fn weighted_members_are_picked_in_proportion() {
        let group = fib::Group {
            mode: GroupMode::Ecmp,
            flowlet_gap_us: 10,
            members: (0..2u16)
                .map(|port| fib::Adjacency {
                    port,
                    mac: crate::wire::ethernet::MacAddress([2, 0, 0, 0, 0, port as u8]),
                })
                .collect(),
            weights: vec![1, 3],
            via: Vec::new(),
        };
        let view = ports();
        let mut rng = Rng::new(3);
        for mode in [GroupMode::Ecmp, GroupMode::Spray, GroupMode::Random] {
            let mut selector = Selector::new(&[fib::Group { mode, ..group.clone() }]);
            let mut counts = [0usize; 2];
            for flow in 0..4_000u32 {
                let (member, port) = selector.select(0, flow.wrapping_mul(0x9e37_79b9), 0, 0, &mut rng, &view).unwrap();
                assert_eq!(member, port, "member index and port agree here");
                counts[usize::from(member)] += 1;
            }
            assert!((900..=1_100).contains(&counts[0]), "{mode:?}: {counts:?}");
        }
    }

    #[test]
    fn spray_round_robins_and_skips_down_members() {
        let mut s = selector("spray");
        let mut rng = Rng::new(0);
        let mut view = ports();
        let picks: Vec<u16> = (0..8).map(|_| s.select(0, 7, 0, 0, &mut rng, &view).unwrap().1).collect();
        assert_eq!(picks, [0, 1, 2, 3, 0, 1, 2, 3]);
        view.up[2] = false;
        let picks: Vec<u16> = (0..6).map(|_| s.select(0, 7, 0, 0, &mut rng, &view).unwrap().1).collect();
        assert_eq!(picks, [0, 1, 3, 0, 1, 3]);
        view.up = vec![false; 4];
        assert_eq!(s.select(0, 7, 0, 0, &mut rng, &view), None);
    }

    #[test]
    fn ecmp_is_stable_per_flow() {
        let mut s = selector("ecmp");
        let mut rng = Rng::new(0);
        let view = ports();
        let first = s.select(0, 0xdead_beef, 0, 0, &mut rng, &view);
        assert!(first.is_some(), "a member");
        assert!((0..100).all(|_| s.select(0, 0xdead_beef, 0, 0, &mut rng, &view) == first));
    }

    #[test]
    fn ecmp_scales_the_hash_onto_the_usable_members() {
        let mut s = selector("ecmp");
        let mut rng = Rng::new(0);
        let mut view = ports();
        // Hashes an eighth of the range apart land on members 0, 0, 1, 1, 2, 2, 3, 3.
        let members: Vec<u16> = (0..8u32).map(|i| s.select(0, i << 29, 0, 0, &mut rng, &view).unwrap().1).collect();
        assert_eq!(members, [0, 0, 1, 1, 2, 2, 3, 3]);
        // With member 1 down, three usable members share the range in thirds.
        view.up[1] = false;
        let members: Vec<u16> =
            (0..6u32).map(|i| s.select(0, i * 0x2aaa_aaab, 0, 0, &mut rng, &view).unwrap().1).collect();
        assert_eq!(members, [0, 0, 2, 2, 3, 3]);
    }

    #[test]
    fn adaptive_leaves_a_last_choice_that_became_costly() {
        // The last choice, member 2, is now the costliest; any cheap candidate beats it. It is
        // kept only when both draws are costly too (3/16 x 1/2 + 1/16 = 5/32 of the time).
        let mut s = selector("adaptive");
        let mut rng = Rng::new(8);
        let mut view = ports();
        view.cost = vec![0, 0, 9, 9];
        let mut stayed = 0;
        for _ in 0..4000 {
            s.groups[0].last_choice = 2;
            stayed += u32::from(s.select(0, 1, 3, 0, &mut rng, &view).unwrap().1 == 2);
        }
        let rate = f64::from(stayed) / 4000.0;
        assert!((0.12..0.20).contains(&rate), "kept the costly last choice {rate} of the time");
    }

    #[test]
    fn adaptive_never_picks_its_last_choice_once_it_is_down() {
        let mut s = selector("adaptive");
        let mut rng = Rng::new(6);
        let mut view = ports();
        let last = s.select(0, 1, 3, 0, &mut rng, &view).unwrap().1;
        view.up[usize::from(last)] = false;
        for _ in 0..1000 {
            assert_ne!(s.select(0, 1, 3, 0, &mut rng, &view).unwrap().1, last, "a down member was chosen");
        }
    }

    #[test]
    fn adaptive_avoids_long_and_paused_queues() {
        let mut s = selector("adaptive");
        let mut rng = Rng::new(3);
        let mut view = ports();
        view.cost = vec![500, 100, 900, u64::MAX];
        let mut counts = [0u32; 4];
        for _ in 0..1000 {
            counts[usize::from(s.select(0, 1, 3, 0, &mut rng, &view).unwrap().1)] += 1;
        }
        assert_eq!(counts[3], 0, "the paused member gets nothing");
        assert!(counts[1] > 900, "the shortest queue wins: {counts:?}");
    }

    #[test]
    fn adaptive_breaks_ties_at_random_instead_of_keeping_the_last_choice() {
        let mut s = selector("adaptive");
        let mut rng = Rng::new(5);
        let view = ports(); // four idle members: every candidate ties
        let mut counts = [0u32; 4];
        for _ in 0..4000 {
            counts[usize::from(s.select(0, 1, 3, 0, &mut rng, &view).unwrap().1)] += 1;
        }
        for count in counts {
            assert!((900..=1100).contains(&count), "ties must spread evenly: {counts:?}");
        }
        // Two equal candidates and a costlier one: the costlier never wins.
        let mut view = ports();
        view.cost = vec![5, 5, 9, 9];
        let mut counts = [0u32; 4];
        for _ in 0..4000 {
            counts[usize::from(s.select(0, 1, 3, 0, &mut rng, &view).unwrap().1)] += 1;
        }
        assert!(counts[0] > 1500 && counts[1] > 1500, "{counts:?}");
        // A costlier member wins only when all three candidates are costlier (both draws and
        // the last choice): rarely, as the last choice is nearly always a cheap one.
        assert!(counts[2] + counts[3] < 40, "costlier members won: {counts:?}");
        // Among equals, each distinct candidate (the last choice and two draws) has the same
        // chance: with four idle members the choice stays where it was 15/32 of the time (a
        // fair draw; 1/16 if the last one evaluated won, 0.41 if ties favoured newcomers).
        let view = ports();
        let mut previous = s.select(0, 1, 3, 0, &mut rng, &view).unwrap().1;
        let mut stayed = 0;
        for _ in 0..20_000 {
            let next = s.select(0, 1, 3, 0, &mut rng, &view).unwrap().1;
            stayed += u32::from(next == previous);
            previous = next;
        }
        let rate = f64::from(stayed) / 20_000.0;
        assert!((0.45..0.49).contains(&rate), "stayed {rate}");
    }

    #[test]
    fn flowlet_keeps_the_member_inside_a_burst_and_may_move_after_a_gap() {
        let mut s = selector("flowlet");
        let mut rng = Rng::new(0);
        let mut view = ports();
        view.cost = vec![10, 0, 10, 10];
        let first = s.select(0, 42, 0, 0, &mut rng, &view).unwrap().1;
        assert_eq!(first, 1, "a new flowlet goes to the least loaded");
        view.cost = vec![10, 50, 0, 10];
        // 9 us apart: the same flowlet.
        for step in 1..10u64 {
            assert_eq!(s.select(0, 42, 0, step * 9_000_000, &mut rng, &view).unwrap().1, 1);
        }
        // 11 us gap: a new flowlet, to the now least loaded member.
        assert_eq!(s.select(0, 42, 0, 81_000_000 + 11_000_000, &mut rng, &view).unwrap().1, 2);
    }

    #[test]
    fn a_new_flowlet_goes_to_the_least_loaded_member_wherever_the_scan_starts() {
        let mut s = selector("flowlet");
        let mut rng = Rng::new(9);
        let mut view = ports();
        view.cost = vec![30, 20, 20, 10];
        for flow in 0..200u32 {
            assert_eq!(s.select(0, flow, 0, 0, &mut rng, &view).unwrap().1, 3, "flow {flow}");
        }
    }

    #[test]
    fn a_flowlet_ends_when_the_gap_is_reached() {
        // The gap is 10 us: a packet exactly 10 us after the last one starts a new flowlet.
        let mut s = selector("flowlet");
        let mut rng = Rng::new(0);
        let mut view = ports();
        view.cost = vec![10, 0, 10, 10];
        assert_eq!(s.select(0, 42, 0, 0, &mut rng, &view).unwrap().1, 1);
        view.cost = vec![0, 10, 10, 10];
        assert_eq!(s.select(0, 42, 0, 9_999_999, &mut rng, &view).unwrap().1, 1, "within the gap");
        assert_eq!(s.select(0, 42, 0, 9_999_999 + 10_000_000, &mut rng, &view).unwrap().1, 0, "at the gap");
    }

    /// Flow hashes `n` and `n + 1` land on one flowset (each holds 2^32 / FLOWSETS hashes).
    fn same_flowset(n: u32) -> (u32, u32) {
        let n = n * (u32::MAX / FLOWSETS as u32 + 1);
        (n, n + 1)
    }

    #[test]
    fn flows_sharing_a_flowset_share_its_member_and_count_as_collisions() {
        let mut s = selector("flowlet");
        let mut rng = Rng::new(0);
        let mut view = ports();
        let (a, b) = same_flowset(77);
        view.cost = vec![10, 0, 10, 10];
        assert_eq!(s.select(0, a, 0, 0, &mut rng, &view).unwrap().1, 1, "a opens the flowset on the least loaded");
        view.cost = vec![0, 10, 10, 10];
        // b, inside a's gap, takes a's member: a collision per frame.
        for at in [1_000_000, 2_000_000] {
            assert_eq!(s.select(0, b, 0, at, &mut rng, &view).unwrap().1, 1);
        }
        assert_eq!(s.flowlet_collisions(), 2);
        // a's own frames are no collision.
        assert_eq!(s.select(0, a, 0, 3_000_000, &mut rng, &view).unwrap().1, 1);
        assert_eq!(s.flowlet_collisions(), 2);
        // After a gap in which neither sent, b opens the next flowlet, then a joins it.
        assert_eq!(s.select(0, b, 0, 13_000_000, &mut rng, &view).unwrap().1, 0);
        assert_eq!(s.select(0, a, 0, 14_000_000, &mut rng, &view).unwrap().1, 0);
        assert_eq!(s.flowlet_collisions(), 3);
    }

    #[test]
    fn flows_of_different_flowsets_are_placed_apart_and_do_not_collide() {
        let mut s = selector("flowlet");
        let mut rng = Rng::new(0);
        let mut view = ports();
        let (a, _) = same_flowset(77);
        let (c, _) = same_flowset(78);
        view.cost = vec![10, 0, 10, 10];
        assert_eq!(s.select(0, a, 0, 0, &mut rng, &view).unwrap().1, 1);
        // Inside a's gap, c (the next flowset) opens its own flowlet on what is least loaded now.
        view.cost = vec![0, 10, 10, 10];
        assert_eq!(s.select(0, c, 0, 1_000_000, &mut rng, &view).unwrap().1, 0);
        assert_eq!(s.flowlet_collisions(), 0);
        // The top and bottom of the hash space are flowsets of their own too.
        assert_eq!(s.select(0, u32::MAX, 0, 2_000_000, &mut rng, &view).unwrap().1, 0);
        view.cost = vec![10, 10, 0, 10];
        assert_eq!(s.select(0, 0, 0, 3_000_000, &mut rng, &view).unwrap().1, 2);
        assert_eq!(s.flowlet_collisions(), 0);
    }

    /// With more flows active than flowsets (20,000 over 16,384), a new flow still keeps its
    /// order: 20 back-to-back frames stay on one member while the costs move under them (a
    /// table that placed flows it could not remember per packet split them 10/10).
    #[test]
    fn more_active_flows_than_flowsets_still_keep_each_flow_on_one_member() {
        let mut s = selector("flowlet");
        let mut rng = Rng::new(0);
        let mut view = ports();
        // All 20,000 send within 8 us, inside one 10 us gap.
        for flow in 0..20_000u32 {
            s.select(0, flow.wrapping_mul(0x9e37_79b9), 0, u64::from(flow) * 400, &mut rng, &view);
        }
        assert_eq!(s.groups[0].flowsets.len(), FLOWSETS, "the table never grows");
        assert!(s.flowlet_collisions() > 1_000, "{} collisions", s.flowlet_collisions());
        let start = 9_000_000;
        let new_flow = 0xdead_beef;
        let mut members = Vec::new();
        for frame in 0..20u64 {
            view.cost = (0..4).map(|port| (port + frame) % 4 * 10).collect();
            members.push(s.select(0, new_flow, 0, start + frame * 84_000, &mut rng, &view).unwrap().1);
        }
        assert!(members.iter().all(|&member| member == members[0]), "{members:?}");
    }

    #[test]
    fn every_flow_keeps_its_member_while_its_flowset_is_busy() {
        // Flows of one flowset sending alternately every 6 us (inside the 10 us gap): the
        // flowset never idles, so neither flow moves however the costs change.
        let mut s = selector("flowlet");
        let mut rng = Rng::new(0);
        let mut view = ports();
        let (a, b) = same_flowset(5);
        let first = s.select(0, a, 0, 0, &mut rng, &view).unwrap().1;
        view.cost = (0..4).map(|port| if port == first { 100 } else { 0 }).collect();
        for step in 1..10u64 {
            let flow = if step % 2 == 0 { a } else { b };
            assert_eq!(s.select(0, flow, 0, step * 6_000_000, &mut rng, &view).unwrap().1, first, "step {step}");
        }
    }

    /// Among members that drain equally soon (idle links), a new flowlet takes the member the
    /// random draw started the scan at, not the last one the scan passes: the draw is what
    /// spreads flowlets over idle uplinks.
    #[test]
    fn a_new_flowlet_among_equally_loaded_members_takes_the_member_drawn() {
        let mut s = selector("flowlet");
        let view = ports();
        for seed in 0..16u64 {
            let drawn = Rng::new(seed).below(4) as u16;
            // A flowset of its own for each flow (flowsets are 2^32 / FLOWSETS hashes wide).
            let flow = (seed as u32 + 1) * (u32::MAX / FLOWSETS as u32 + 1);
            let (_, port) = s.select(0, flow, 0, 0, &mut Rng::new(seed), &view).unwrap();
            assert_eq!(port, drawn, "seed {seed}");
        }
    }
}
