//! A frame's way in, up to its queue: `receive` classifies it, then the switch decides what
//! classification cannot (an administratively shut port, PFC and PAUSE frames, punting,
//! sFlow's sample, the ingress ACL, a group's member, the egress port's MTU and ACL), writes
//! the routed frame's headers once (`pipeline::rewrite`), makes its record (`tm::frame`) and
//! hands it to the queue half (`queue.rs`) or to the worker owning its egress port
//! (`shard.rs`).
//!
//! Invariant: every frame `receive` takes leaves with one `Received`, counted once as
//! received; a frame punted, dropped or sampled here is the frame as it came in, and only a
//! frame on its way to a queue is written, once.

use super::*;
use crate::pipeline::rewrite::Rewrite;
use crate::tm::frame::{Frame, Member};

/// The group selector's view of the ports: traffic management's state at `now`, and with
/// sharding the other workers' ports as published.
pub(super) struct Ports<'a, P> {
    pub(super) tm: &'a TrafficManager<P>,
    pub(super) now: u64,
    /// Sharded: the board with the other workers' ports, and this worker's index.
    pub(super) shard: Option<(&'a ShardBoard, usize)>,
}

impl<P> PortView for Ports<'_, P> {
    fn usable(&self, port: usize) -> bool {
        self.tm.egress[port].usable
    }

    fn drain_cost(&self, port: usize, tc: usize) -> u64 {
        if let Some((board, me)) = self.shard {
            if board.owner(port) != me {
                return board.drain_cost(port, tc, self.now, self.tm.egress[port].rate.speed_mbps());
            }
        }
        if self.tm.pfc[port].paused(tc, self.now, self.tm.watchdog.action) {
            return u64::MAX;
        }
        // What is still to leave the link, then the queued frame bytes at the port's speed
        // (bytes x 8e6 / Mb/s ps): a busy link with an empty queue costs more than an idle one.
        let egress = &self.tm.egress[port];
        egress.link_free_ps.saturating_sub(self.now)
            + self.tm.buffer.queue_bytes(port, tc) * 8_000_000 / egress.rate.speed_mbps()
    }
}

impl<P: PacketBuf> Switch<P> {
    /// Takes one frame received on `ingress` at `now` (ps).
    #[inline]
    pub fn receive(&mut self, ingress: usize, packet: P, now: u64) -> Received {
        self.receive_cutting(ingress, packet, now, &mut QueueAll)
    }

    /// `receive`, letting the frame cut through to `cut` when its port is idle (`cut.rs`);
    /// `Received::Queued` either way.
    #[inline(always)]
    pub fn receive_cutting(&mut self, ingress: usize, packet: P, now: u64, cut: &mut impl CutThrough<P>) -> Received {
        let len = packet.len();
        let head = packet.data();
        // A chained frame (live, longer than one mbuf) is classified from its first segment.
        let verdict = self.forwarding.classifier.classify_beyond(head, len - head.len());
        self.forward(ingress, (packet, len), verdict, now, cut)
    }

    /// A frame the engine's rx prologue could not take (a chain too long, or no buffer to
    /// copy it into): counted as received and dropped for `reason`, as any other.
    #[cold]
    pub fn receive_dropped(&mut self, ingress: usize, packet: P, reason: DropReason, now: u64) -> Received {
        let len = packet.len();
        self.forward(ingress, (packet, len), Verdict::Drop(reason), now, &mut QueueAll)
    }

    /// sFlow's sampler (`[sflow]`), for the engine to take the samples.
    #[inline(always)]
    pub fn sampler_mut(&mut self) -> Option<&mut Sampler> {
        self.forwarding.sampler.as_mut()
    }

    /// Acts on a frame's verdict: counts it, applies a PFC or PAUSE frame, punts or drops it,
    /// or forwards it to its queue.
    #[inline(always)]
    pub(super) fn forward(
        &mut self,
        ingress: usize,
        (packet, len): (P, usize),
        verdict: Verdict,
        now: u64,
        cut: &mut impl CutThrough<P>,
    ) -> Received {
        // Shut down: what still arrives (a device that cannot take its link down) is counted,
        // never forwarded or acted on.
        if !self.tm.egress[ingress].admin_up {
            return self.dropped_on_receipt(ingress, packet, DropReason::LinkDown, now);
        }
        match verdict {
            Verdict::Forward { next, tc, ip } => {
                // Below 8 always (the QoS maps hold no other class); the modulo lets the
                // per-class arrays skip their bounds checks.
                let tc = usize::from(tc) % TRAFFIC_CLASSES;
                self.route(ingress, (packet, len), (next, tc, ip), now, cut)
            }
            Verdict::FlowControl(_) | Verdict::LinkPause(_) if !self.owns(ingress) => {
                // On a queue of a port another worker owns (and transmits on).
                self.hand_off_control(ingress, packet, now)
            }
            Verdict::FlowControl(repr) => {
                self.pause_received(ingress, &repr, now);
                Received::FlowControl
            }
            Verdict::LinkPause(quanta) => {
                // MAC control, not data: counted apart, never in rx or drops.
                self.stats.ports[ingress].rx_pause += 1;
                if self.tm.egress[ingress].honour_pause {
                    let until = self.tm.pfc[ingress].receive_link_pause(quanta, now);
                    self.tm.deadline = self.tm.deadline.min(until);
                }
                Received::FlowControl
            }
            Verdict::Drop(reason) => self.dropped_on_receipt(ingress, packet, reason, now),
            Verdict::Punt(class) => self.punt(ingress, packet, class, now),
        }
    }

    /// A frame dropped as it came in, before it was forwarded: counted as received and under
    /// `reason`, notified and offered to sFlow's sampler.
    #[cold]
    fn dropped_on_receipt(&mut self, ingress: usize, packet: P, reason: DropReason, now: u64) -> Received {
        let len = packet.len();
        let rx = &mut self.stats.ports[ingress];
        rx.rx_packets += 1;
        rx.rx_bytes += len as u64;
        rx.count_drop(reason);
        self.notify_drop(ingress, NO_PORT, reason, (&packet, now));
        if let Some(sampler) = &mut self.forwarding.sampler {
            if sampler.offer(ingress) {
                sampler.take(ingress, packet.data(), len);
            }
        }
        Received::Dropped(reason)
    }

    /// A routed frame: counted as received and sampled, through the ingress ACL, to its
    /// egress port (a group's member), past the port's MTU and ACL, its headers written, into
    /// its queue or to the worker owning the port.
    #[inline(always)]
    fn route(
        &mut self,
        ingress: usize,
        (mut packet, len): (P, usize),
        (next, mut tc, ip): (Next, usize, IpHeader),
        now: u64,
        cut: &mut impl CutThrough<P>,
    ) -> Received {
        // The frame's first segment, taken once: the decisions below read it and the rewrite
        // writes it (with an mbuf, finding the bytes is a chain of loads the CPU can start
        // here, while the decisions run, rather than just before the write).
        let bytes = packet.data_mut();
        let beyond = len - bytes.len();
        let rx = &mut self.stats.ports[ingress];
        rx.rx_packets += 1;
        rx.rx_bytes += len as u64;
        // sFlow: one branch per frame without it, a countdown with it; the sample is the
        // header as it came in, which nothing has written yet.
        let sampled = match &mut self.forwarding.sampler {
            Some(sampler) => {
                if sampler.offer(ingress) {
                    sampler.take(ingress, bytes, len)
                } else {
                    None
                }
            }
            None => None,
        };
        let mut dscp = None;
        if let Some(table) = self.forwarding.acls.bound(ingress, AclStage::Ingress) {
            match self.filter(table, ingress, (bytes, beyond), ip, tc, &mut dscp) {
                Some(filtered) => tc = filtered,
                None => {
                    self.notify_drop(ingress, NO_PORT, DropReason::Acl, (&packet, now));
                    return Self::acl_dropped();
                }
            }
        }
        let (egress, next_hop, member) = match next {
            Next::Adjacency(adjacency) => (usize::from(adjacency.port), adjacency.mac, Member::NONE),
            Next::Group(group) => match self.choose_member(group as usize, (bytes, beyond), ip, tc, now) {
                Ok(chosen) => chosen,
                Err(reason) => {
                    self.stats.ports[ingress].count_drop(reason);
                    self.notify_drop(ingress, NO_PORT, reason, (&packet, now));
                    return Received::Dropped(reason);
                }
            },
        };
        // The IP packet with any Ethernet padding: padding only follows packets far below
        // any MTU (frames under 60 bytes), so this never misjudges a legal packet.
        if len - usize::from(ip.l3_offset) > self.tm.egress[egress].mtu {
            return self.too_big(ingress, packet, now);
        }
        if let Some(table) = self.forwarding.acls.bound(egress, AclStage::Egress) {
            match self.filter(table, ingress, (bytes, beyond), ip, tc, &mut dscp) {
                Some(filtered) => tc = filtered,
                None => {
                    self.notify_drop(ingress, egress as u16, DropReason::Acl, (&packet, now));
                    return Self::acl_dropped();
                }
            }
        }
        // Every decision that could punt, drop or sample the frame is made: its one rewrite.
        Rewrite { next_hop, dscp }.apply(bytes, ip, self.mac);
        if let (Some(index), Some(sampler)) = (sampled, &mut self.forwarding.sampler) {
            sampler.set_egress(index, egress);
        }
        let mut frame = Frame::new(packet, len, ingress, egress, tc, ip, now);
        frame.member = member;
        if !self.owns(egress) {
            // `relocated`: the hand-off (out of line) gets a record of its own, so that the
            // enqueue path's stays in registers.
            return self.hand_off(frame.relocated(), now);
        }
        let received = self.enqueue(frame, now, cut);
        if let Received::Queued { .. } = received {
            self.count_member(member);
        }
        received
    }

    /// The member of `group` a frame in class `tc` goes to (by its flow's hash, or the
    /// group's mode): its port, its MAC and its slot; or why none: every member down, or
    /// a group gone since classification.
    #[inline(always)]
    fn choose_member(
        &mut self,
        group: usize,
        (bytes, beyond): (&[u8], usize),
        ip: IpHeader,
        tc: usize,
        now: u64,
    ) -> Result<(usize, MacAddress, Member), DropReason> {
        let view = Ports { tm: &self.tm, now, shard: self.shard.as_ref().map(|seat| (&*seat.board, seat.me)) };
        // The flow, for ECMP and flowlets: only group routes need it (`parse::flow_hash`).
        let flow_hash = parse::flow_hash(bytes, usize::from(ip.l3_offset), ip.is_ipv6, beyond);
        let groups = &self.forwarding.classifier.fib().groups;
        let chosen = self.forwarding.selector.select(group, flow_hash, tc, now, &mut self.rng, &view).and_then(
            |(slot, port)| {
                // The selector follows the classifier's snapshot (`groups_changed`); should they
                // differ, a member the group no longer has is no route.
                let member = groups.get(group)?.members.get(usize::from(slot))?;
                Some((usize::from(port), member.mac, Member::new(group, slot)))
            },
        );
        chosen.ok_or_else(|| match groups.get(group) {
            Some(group) if !group.members.is_empty() => DropReason::LinkDown,
            _ => DropReason::NoRoute,
        })
    }

    /// A routed frame over its egress port's MTU (already counted as received): with a
    /// control plane, punted as it came in, in class `mtu`, so that the kernel sends
    /// fragmentation needed or Packet Too Big with the port's MTU (its interface has it), or
    /// fragments IPv4 without DF; without one, dropped as `oversize`.
    #[cold]
    fn too_big(&mut self, ingress: usize, packet: P, now: u64) -> Received {
        if self.punting.punt_policers.is_empty() {
            self.stats.ports[ingress].count_drop(DropReason::Oversize);
            self.notify_drop(ingress, NO_PORT, DropReason::Oversize, (&packet, now));
            return Received::Dropped(DropReason::Oversize);
        }
        self.punt_received(ingress, packet, CoppClass::Mtu, now)
    }

    /// Counts a queued frame on the group member chosen for it (for the config's groups;
    /// groups of next hops come and go with routes).
    #[inline]
    pub(super) fn count_member(&mut self, member: Member) {
        if let Some((group, slot)) = member.get().filter(|_| self.forwarding.counts_members) {
            if let Some(counts) = self.stats.groups.get_mut(group) {
                counts[usize::from(slot)] += 1;
            } else if let Some(&Some(entry)) = self.forwarding.next_hop_slots.get(group) {
                if let Some(count) = self.stats.next_hop_groups[entry as usize].sent.get_mut(usize::from(slot)) {
                    *count += 1;
                }
            }
        }
    }

    /// Gives each group of next hops in the FIB snapshot its entry in the counters: the one of
    /// the same members if the group was met before (its counters go on), else a new one. Runs
    /// when a snapshot with changed groups is taken (it may allocate then), never per frame.
    pub(super) fn count_next_hop_groups(&mut self) {
        let groups = &self.forwarding.classifier.fib().groups;
        self.forwarding.next_hop_slots.clear();
        for group in groups.iter() {
            if group.via.len() != group.members.len() || group.via.is_empty() {
                self.forwarding.next_hop_slots.push(None);
                continue;
            }
            let members: Vec<(u16, std::net::IpAddr)> =
                group.members.iter().zip(&group.via).map(|(member, &ip)| (member.port, ip)).collect();
            let counted = &mut self.stats.next_hop_groups;
            let entry = match counted.iter().position(|entry| entry.members == members) {
                Some(entry) => entry,
                None => {
                    let sent = vec![0; members.len()];
                    counted.push(crate::counters::NextHopGroupStats { members, sent });
                    counted.len() - 1
                }
            };
            self.forwarding.next_hop_slots.push(Some(entry as u32));
        }
        self.forwarding.groups_counted = std::sync::Arc::clone(groups);
    }

    /// Takes the control plane's newest FIB snapshot, if there is one (once per burst).
    #[inline]
    pub fn refresh_fib(&mut self, handle: &FibHandle) {
        if self.forwarding.classifier.refresh(handle) {
            self.groups_changed();
        }
    }

    /// After the FIB in use changed: the selector and the counters follow its groups.
    pub(super) fn groups_changed(&mut self) {
        self.forwarding.selector.sync(&self.forwarding.classifier.fib().groups);
        if !std::sync::Arc::ptr_eq(&self.forwarding.groups_counted, &self.forwarding.classifier.fib().groups) {
            self.count_next_hop_groups();
        }
        self.forwarding.counts_members = self.forwarding.classifier.fib().group_layout == self.forwarding.group_layout;
    }
}
