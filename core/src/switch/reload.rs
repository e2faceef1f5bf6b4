//! A live reload on the switch's side: `Reconfiguration::prepare` builds, off the packet
//! path, whatever of a new config needs memory (the ACL matchers and their counters, the
//! buffer plan); `Switch::reconfigure`, which a worker calls between bursts, then only moves
//! those in and overwrites fixed-size state (the QoS maps, the schedulers, the ECN profiles,
//! the watchdog, trimming, the CoPP rates, sFlow's rates, the groups' member counters).
//!
//! What stays: every queued frame, its charge and its class; PFC state (a pause sent or
//! received stands until its XON or its timer); the counters, but those of an ACL table
//! whose rules changed, which start again at zero as SONiC's do when a rule is replaced.
//! A scheduler starts a fresh DWRR round and a policer a full bucket.
//!
//! Invariant: `reconfigure` allocates nothing (but the selector's state for groups that
//! changed, as a FIB with new groups from the control plane does), and is given only a config that
//! `config::reload::live_changes` accepted against the running one, so the buffer's
//! accounting of queued frames (which classes are lossless, which group each is charged to)
//! is the same before and after.

use super::acl::AclTables;
use super::Switch;
use crate::config::plan::BufferPlan;
use crate::config::Config;
use crate::counters::AclRuleStats;
use crate::packet::PacketBuf;
use crate::pipeline::punt::Policer;
use crate::pipeline::sample::Sampler;
use crate::tm::ecn::EcnMarker;
use crate::tm::schedule::Scheduler;

/// A new config made ready for one worker's switch.
pub struct Reconfiguration {
    config: std::sync::Arc<Config>,
    acls: AclTables,
    /// Per new table: the running table with the same definition, whose counters it keeps.
    acl_kept: Vec<Option<usize>>,
    acl_fresh: Vec<Vec<AclRuleStats>>,
    plan: BufferPlan,
    /// When the reload adds or removes `[sflow]`: the sampler to swap in (`Some(None)`
    /// removes it). A change of rates alone is applied in place.
    sampler: Option<Option<Sampler>>,
    /// The new `[control.acl]`; once applied, the one it replaced (freed off the worker).
    control_acl: Option<std::sync::Arc<crate::config::ControlAcl>>,
    /// Without `[control]`, when the static routes, neighbours, groups or peer MACs changed:
    /// the FIB built from the new config; once applied, the one it replaced. (With `[control]`
    /// the control plane's writer takes the change and publishes it as any other.)
    fib: Option<std::sync::Arc<crate::pipeline::fib::Fib>>,
    /// When the groups changed: their member counters laid out anew, with, per new group, the
    /// running group of the same name and members whose counts it keeps; once applied, the
    /// counters replaced.
    groups_fresh: Option<Vec<Vec<u64>>>,
    groups_kept: Vec<Option<usize>>,
}

impl Reconfiguration {
    /// Builds what `new` needs, for a switch running `running`. `new` was validated
    /// (`Config::parse`), so its buffer plan exists.
    pub fn prepare(running: &Config, new: std::sync::Arc<Config>) -> Self {
        let acl_kept = new.acls.iter().map(|table| running.acls.iter().position(|old| old == table)).collect();
        Self {
            acls: AclTables::new(&new),
            acl_fresh: new.acls.iter().map(|table| vec![AclRuleStats::default(); table.rules.len()]).collect(),
            acl_kept,
            plan: BufferPlan::new(&new).expect("a validated config has a buffer plan"),
            sampler: (running.sflow.is_some() != new.sflow.is_some())
                .then(|| Sampler::new(&new, new.sflow.as_ref().map_or(0, |sflow| u64::from(sflow.collector.port())))),
            control_acl: new.control.as_ref().map(|control| std::sync::Arc::clone(&control.acl)),
            fib: (new.control.is_none() && crate::config::reload::fib_changed(running, &new)).then(|| {
                std::sync::Arc::new(crate::pipeline::fib::Fib::new(&new, &crate::pipeline::fib::Learned::default(), 1))
            }),
            groups_fresh: (running.groups != new.groups)
                .then(|| new.groups.iter().map(|group| vec![0; group.members.len()]).collect()),
            groups_kept: new
                .groups
                .iter()
                .map(|group| {
                    running.groups.iter().position(|old| (&old.name, &old.members) == (&group.name, &group.members))
                })
                .collect(),
            config: new,
        }
    }

    /// The config it applies.
    pub fn config(&self) -> &std::sync::Arc<Config> {
        &self.config
    }
}

impl<P: PacketBuf> Switch<P> {
    /// Applies a reload between bursts (see the module notes); returns what it replaced, for
    /// the caller to drop off the packet path.
    pub fn reconfigure(&mut self, mut next: Reconfiguration) -> Reconfiguration {
        let config = std::sync::Arc::clone(&next.config);
        let qos = &config.qos;
        self.forwarding.classifier.set_qos_maps(qos);
        for egress in &mut self.tm.egress {
            egress.scheduler = Scheduler::new(qos);
        }
        for (egress, port) in self.tm.egress.iter_mut().zip(&config.ports) {
            egress.trims = port.trim && qos.trim.is_some();
        }
        self.tm.trim.clone_from(&qos.trim);
        self.tm.ecn = EcnMarker::new(qos.ecn.clone(), next.plan.lossless_tcs);
        self.tm.watchdog.detection_ps = u64::from(qos.watchdog.detection_ms) * 1_000_000_000;
        self.tm.watchdog.restoration_ps = u64::from(qos.watchdog.restoration_ms) * 1_000_000_000;
        self.tm.watchdog.action = qos.watchdog.action;
        std::mem::swap(&mut self.punting.control_acl, &mut next.control_acl);
        let groups_changed = next.groups_fresh.is_some() || next.fib.is_some();
        if let Some(mut fresh) = next.groups_fresh.take() {
            for (counts, kept) in fresh.iter_mut().zip(&next.groups_kept) {
                if let Some(old) = kept.and_then(|old| self.stats.groups.get_mut(old)) {
                    std::mem::swap(counts, old);
                }
            }
            std::mem::swap(&mut self.stats.groups, &mut fresh);
            next.groups_fresh = Some(fresh);
            self.forwarding.group_layout = config.group_layout();
        }
        if let Some(fib) = next.fib.take() {
            next.fib = Some(self.forwarding.classifier.replace_fib(fib));
        }
        if groups_changed {
            self.groups_changed();
        }
        if let Some(control) = &config.control {
            for policers in &mut self.punting.punt_policers {
                for (policer, rate) in policers.iter_mut().zip(&control.copp) {
                    *policer = Policer::new(rate.pps, rate.burst);
                }
            }
        }
        self.tm.buffer.replan(&mut next.plan);
        std::mem::swap(&mut self.forwarding.acls, &mut next.acls);
        for (fresh, kept) in next.acl_fresh.iter_mut().zip(&next.acl_kept) {
            if let Some(counts) = kept.and_then(|old| self.stats.acl.get_mut(old)) {
                std::mem::swap(fresh, counts);
            }
        }
        std::mem::swap(&mut self.stats.acl, &mut next.acl_fresh);
        match (&mut next.sampler, &mut self.forwarding.sampler, &config.sflow) {
            (Some(swapped), sampler, _) => std::mem::swap(swapped, sampler),
            (None, Some(sampler), Some(sflow)) => sampler.set_rates(sflow),
            _ => {}
        }
        // Timers (the watchdog's, XON's) are looked at again from now.
        self.tm.deadline = 0;
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::HeapPacket;
    use crate::switch::Received;
    use crate::testing::Leaf;
    use crate::traffic::frames::FrameSpec;
    use std::sync::Arc;

    /// Two ports, a route out of p1, TC3 lossless; `qos` is the `[qos]` map of DSCP 10 and
    /// anything after it, `tables` any tables after the ports.
    fn leaf(qos: &str, tables: &str) -> Config {
        let mut leaf = Leaf::new("t")
            .qos(&format!("dscp_to_tc = {{ 26 = 3, {qos}"))
            .port("p0", 100.0, "")
            .port("p1", 100.0, "")
            .route("10.0.1.0/24", "p1");
        if !tables.is_empty() {
            leaf = leaf.tables(tables);
        }
        leaf.config()
    }

    fn frame(dscp: u8) -> HeapPacket {
        let spec = FrameSpec { dscp, ..FrameSpec::rocev2("10.0.0.1".parse().unwrap(), "10.0.1.2".parse().unwrap(), 1) };
        HeapPacket::new(spec.build())
    }

    /// Without a control plane, a reload's static routes take effect from the next frame: a
    /// destination with no route is forwarded once a route to it is added, and the FIB the
    /// worker read before is handed back.
    #[test]
    fn a_reload_adds_a_static_route_from_the_next_frame() {
        let maps = "10 = 1, default = 0 }\nlossless = [3]";
        let running = leaf(maps, "");
        let mut switch: Switch<HeapPacket> = Switch::new(&running, 1);
        let to = |destination: &str| {
            HeapPacket::new(FrameSpec::rocev2("10.0.0.1".parse().unwrap(), destination.parse().unwrap(), 1).build())
        };
        assert_eq!(switch.receive(0, to("10.77.0.1"), 0), Received::Dropped(crate::drops::DropReason::NoRoute));
        let new = Arc::new(leaf(maps, "[[route]]\nprefix = \"10.77.0.0/16\"\nport = \"p1\""));
        assert_eq!(crate::config::reload::live_changes(&running, &new), Ok(vec!["routes"]));
        let replaced = switch.reconfigure(Reconfiguration::prepare(&running, Arc::clone(&new)));
        assert_eq!(switch.receive(0, to("10.77.0.1"), 1), Received::Queued { egress: 1, tc: 3 });
        assert_eq!(switch.receive(0, to("10.0.1.2"), 2), Received::Queued { egress: 1, tc: 3 }, "the rest as before");
        assert!(replaced.fib.is_some_and(|old| old
            .lookup(crate::pipeline::fib::ip_destination("10.77.0.1".parse().unwrap()))
            .is_none()));
    }

    /// Without a control plane, a reload's groups and peers' MACs take effect from the next
    /// frame: a group gains a member, a port's peer MAC moves. The group whose name and
    /// members stay keeps its member counters; the changed one starts again at zero.
    #[test]
    fn a_reload_changes_groups_and_peer_macs_from_the_next_frame() {
        let leaf = |up: &[&str], u0_mac: &str| {
            Leaf::new("t")
                .port("p0", 100.0, "")
                .port_to("u0", 100.0, u0_mac, "")
                .port_to("u1", 100.0, "02:00:00:00:21:00", "")
                .port_to("u2", 100.0, "02:00:00:00:22:00", "")
                .group("steady", &["u2"], "ecmp")
                .group("up", up, "spray")
                .group_route("10.1.0.0/16", "steady")
                .group_route("10.2.0.0/16", "up")
                .config()
        };
        let running = leaf(&["u0"], "02:00:00:00:20:00");
        let mut switch: Switch<HeapPacket> = Switch::new(&running, 1);
        let to = |destination: &str| {
            HeapPacket::new(FrameSpec::rocev2("10.0.0.1".parse().unwrap(), destination.parse().unwrap(), 1).build())
        };
        let sent = |switch: &mut Switch<HeapPacket>, egress: usize| {
            let mut sent = Vec::new();
            while let Some(packet) = switch.transmit(egress, u64::MAX / 2) {
                sent.push(packet.data()[..6].to_vec());
            }
            sent
        };
        for time in 0..2 {
            assert!(matches!(switch.receive(0, to("10.1.0.1"), time), Received::Queued { egress: 3, .. }));
            assert!(matches!(switch.receive(0, to("10.2.0.1"), time), Received::Queued { egress: 1, .. }));
        }
        assert_eq!(sent(&mut switch, 1), vec![vec![0x02, 0, 0, 0, 0x20, 0]; 2]);
        assert_eq!(switch.stats.groups, [vec![2], vec![2]]);
        let new = Arc::new(leaf(&["u0", "u1"], "02:00:00:00:20:09"));
        assert_eq!(crate::config::reload::live_changes(&running, &new), Ok(vec!["groups", "port peer_mac"]));
        let replaced = switch.reconfigure(Reconfiguration::prepare(&running, Arc::clone(&new)));
        assert_eq!(
            replaced.groups_fresh,
            Some(vec![vec![0], vec![2]]),
            "handed back: up's old counters; steady's moved into the new ones"
        );
        // Spraying over both members now, to u0's new MAC.
        let mut egresses = Vec::new();
        for time in 2..6 {
            if let Received::Queued { egress, .. } = switch.receive(0, to("10.2.0.1"), time) {
                egresses.push(egress);
            }
        }
        egresses.sort_unstable();
        egresses.dedup();
        assert_eq!(egresses, [1, 2], "sprayed over u0 and u1");
        assert!(sent(&mut switch, 1).iter().all(|mac| mac[..] == [0x02, 0, 0, 0, 0x20, 9]));
        assert!(matches!(switch.receive(0, to("10.1.0.1"), 6), Received::Queued { egress: 3, .. }));
        assert_eq!(switch.stats.groups[0], [3], "steady kept its count");
        assert_eq!(switch.stats.groups[1].iter().sum::<u64>(), 4, "up started again: {:?}", switch.stats.groups);
    }

    /// With a control plane, the FIB with a reload's groups comes later, from its writer: until
    /// then members' frames are not counted (the counters are laid out for the new groups, the
    /// FIB in use for the old), and from then on they are, into the new layout.
    #[test]
    fn with_a_control_plane_members_count_again_once_the_fib_has_the_new_groups() {
        let leaf = |up: &[&str]| {
            Leaf::new("t")
                .port("p0", 100.0, "")
                .port_to("u0", 100.0, "02:00:00:00:20:00", "")
                .port_to("u1", 100.0, "02:00:00:00:21:00", "")
                .group("up", up, "ecmp")
                .group_route("10.2.0.0/16", "up")
                .tables("[control]")
                .config()
        };
        let running = leaf(&["u0"]);
        let mut switch: Switch<HeapPacket> = Switch::new(&running, 1);
        let to =
            || HeapPacket::new(FrameSpec::rocev2("10.0.0.1".parse().unwrap(), "10.2.0.1".parse().unwrap(), 1).build());
        assert!(matches!(switch.receive(0, to(), 0), Received::Queued { .. }));
        assert_eq!(switch.stats.groups, [vec![1]]);
        let new = Arc::new(leaf(&["u0", "u1"]));
        assert_ne!(running.group_layout(), new.group_layout(), "a member more is another layout");
        assert_eq!(running.group_layout(), leaf(&["u0"]).group_layout(), "the same groups, the same layout");
        switch.reconfigure(Reconfiguration::prepare(&running, Arc::clone(&new)));
        assert!(matches!(switch.receive(0, to(), 1), Received::Queued { .. }));
        assert_eq!(switch.stats.groups, [vec![0, 0]], "not counted against a member of the old FIB's group");
        let fib = crate::pipeline::fib::Fib::new(&new, &crate::pipeline::fib::Learned::default(), 2);
        switch.forwarding.classifier.replace_fib(Arc::new(fib));
        switch.groups_changed();
        assert!(matches!(switch.receive(0, to(), 2), Received::Queued { .. }));
        assert_eq!(switch.stats.groups[0].iter().sum::<u64>(), 1, "counted again");
    }

    #[test]
    fn a_reload_moves_new_frames_to_the_new_class_and_keeps_what_is_queued() {
        let running = leaf("10 = 1, default = 0 }\nlossless = [3]", "");
        let mut switch: Switch<HeapPacket> = Switch::new(&running, 1);
        assert_eq!(switch.receive(0, frame(10), 0), Received::Queued { egress: 1, tc: 1 });
        let new = Arc::new(leaf("10 = 2, default = 0 }\nlossless = [3]", ""));
        assert_eq!(crate::config::reload::live_changes(&running, &new), Ok(vec!["qos maps"]));
        switch.reconfigure(Reconfiguration::prepare(&running, Arc::clone(&new)));
        assert_eq!(switch.receive(0, frame(10), 1), Received::Queued { egress: 1, tc: 2 });
        assert_eq!(
            (switch.tm.buffer.queue_len(1, 1), switch.tm.buffer.queue_len(1, 2)),
            (1, 1),
            "the first frame stayed"
        );
    }

    #[test]
    fn a_new_ecn_threshold_marks_from_the_next_frame() {
        // TC 1 marks above 1 MB, then (reloaded) above nothing: every frame behind another.
        let ecn = |kmin: u32| {
            format!("10 = 1, default = 0 }}\nlossless = [3]\n[qos.ecn.1]\nkmin_bytes = {kmin}\nkmax_bytes = {kmin}\npmax = 1.0")
        };
        let running = leaf(&ecn(1_000_000), "");
        let mut switch: Switch<HeapPacket> = Switch::new(&running, 1);
        for time in 0..3 {
            switch.receive(0, frame(10), time);
        }
        let new = Arc::new(leaf(&ecn(0), ""));
        assert_eq!(crate::config::reload::live_changes(&running, &new), Ok(vec!["qos.ecn"]));
        switch.reconfigure(Reconfiguration::prepare(&running, new));
        for time in 3..5 {
            switch.receive(0, frame(10), time);
        }
        let mut marked = Vec::new();
        while let Some(mut packet) = switch.transmit(1, u64::MAX / 2) {
            let crate::wire::parse::Payload::Ip(ip) = crate::wire::parse::parse(packet.data_mut()).unwrap().payload
            else {
                panic!("not IP")
            };
            marked.push(ip.ecn == 0b11);
        }
        assert_eq!(marked, [false, false, false, true, true], "queued before the reload: unmarked");
        assert_eq!(switch.stats.ports[1].queues[1].ecn_marked, 2);
    }

    #[test]
    fn acl_counters_stay_with_an_unchanged_table_and_restart_with_a_changed_one() {
        let table = |name: &str, dscp: u8| {
            format!("[[acl]]\nname = \"{name}\"\nports = [\"p0\"]\n[[acl.rule]]\npriority = 1\ndscp = {dscp}\naction = {{ tc = 2 }}\n")
        };
        let maps = "10 = 1, default = 0 }\nlossless = [3]";
        let running = leaf(maps, &(table("edge", 10) + &table("spare", 11).replace("p0", "p1")));
        let mut switch: Switch<HeapPacket> = Switch::new(&running, 1);
        assert_eq!(switch.receive(0, frame(10), 0), Received::Queued { egress: 1, tc: 2 });
        assert_eq!(switch.stats.acl[0][0].packets, 1);
        // "spare" changes; "edge" stays, now second.
        let new = Arc::new(leaf(maps, &(table("spare", 12).replace("p0", "p1") + &table("edge", 10))));
        assert_eq!(crate::config::reload::live_changes(&running, &new), Ok(vec!["acl"]));
        switch.reconfigure(Reconfiguration::prepare(&running, new));
        assert_eq!(switch.receive(0, frame(10), 1), Received::Queued { egress: 1, tc: 2 });
        assert_eq!((switch.stats.acl[0][0].packets, switch.stats.acl[1][0].packets), (0, 2));
    }
}
