//! The switch: classify → queue (shared-buffer admission) → schedule, for any `PacketBuf`.
//! Both engines drive it: the replay engine in virtual time, the DPDK workers live. It never
//! allocates after `new`: every queue is a ring sized up front and never grown.
//!
//! Invariant: every packet handed to `receive` is queued, consumed (PFC) or dropped and
//! counted, and every queued packet leaves through `transmit` (counted) or `drain` (counted);
//! `buffer_used` is always the sum of the queued packets' lengths.

use crate::buffer::PacketBuf;
use crate::classify::{Classifier, Verdict};
use crate::config::{Config, TRAFFIC_CLASSES};
use crate::drops::DropReason;
use crate::schedule::Scheduler;
use crate::stats::SwitchStats;
use std::collections::VecDeque;

/// What became of a received frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    Queued {
        egress: usize,
        tc: usize,
    },
    /// A PAUSE/PFC frame, consumed by the switch.
    FlowControl,
    Dropped(DropReason),
}

struct EgressPort<P> {
    queues: [VecDeque<P>; TRAFFIC_CLASSES],
    queue_bytes: [u64; TRAFFIC_CLASSES],
    scheduler: Scheduler,
}

pub struct Switch<P: PacketBuf> {
    classifier: Classifier,
    ports: Vec<EgressPort<P>>,
    buffer_capacity: u64,
    buffer_used: u64,
    queue_packets: usize,
    queued_packets: u64,
    pub stats: SwitchStats,
}

impl<P: PacketBuf> Switch<P> {
    pub fn new(config: &Config) -> Self {
        let queue_packets = config.queue_packets as usize;
        let ports = config
            .ports
            .iter()
            .map(|_| EgressPort {
                queues: std::array::from_fn(|_| VecDeque::with_capacity(queue_packets)),
                queue_bytes: [0; TRAFFIC_CLASSES],
                scheduler: Scheduler::new(&config.qos),
            })
            .collect();
        Self {
            classifier: Classifier::new(config),
            ports,
            buffer_capacity: config.buffer_bytes,
            buffer_used: 0,
            queue_packets,
            queued_packets: 0,
            stats: SwitchStats::new(config),
        }
    }

    /// Takes one frame received on `ingress`.
    #[inline]
    pub fn receive(&mut self, ingress: usize, mut packet: P) -> Received {
        let len = packet.len();
        let verdict = self.classifier.classify(packet.data_mut());
        let rx = &mut self.stats.ports[ingress];
        let (egress, tc, member) = match verdict {
            Verdict::FlowControl(repr) => {
                for (priority, count) in rx.pfc_rx.iter_mut().enumerate() {
                    if repr.class_enable & (1 << priority) != 0 {
                        *count += 1;
                    }
                }
                return Received::FlowControl;
            }
            Verdict::Drop(reason) => {
                rx.rx_packets += 1;
                rx.rx_bytes += len as u64;
                rx.drops[reason.index()] += 1;
                return Received::Dropped(reason);
            }
            Verdict::Forward { egress, tc, member } => (usize::from(egress), usize::from(tc), member),
        };
        rx.rx_packets += 1;
        rx.rx_bytes += len as u64;
        let port = &mut self.ports[egress];
        if self.buffer_used + len as u64 > self.buffer_capacity || port.queues[tc].len() >= self.queue_packets {
            rx.drops[DropReason::BufferFull.index()] += 1;
            self.stats.ports[egress].queues[tc].dropped += 1;
            return Received::Dropped(DropReason::BufferFull);
        }
        port.queues[tc].push_back(packet);
        port.queue_bytes[tc] += len as u64;
        self.buffer_used += len as u64;
        self.queued_packets += 1;
        let queue = &mut self.stats.ports[egress].queues[tc];
        queue.max_depth_bytes = queue.max_depth_bytes.max(port.queue_bytes[tc]);
        if let Some((group, slot)) = member {
            self.stats.groups[usize::from(group)][usize::from(slot)] += 1;
        }
        Received::Queued { egress, tc }
    }

    /// The next frame `egress` should send, chosen by its scheduler, or `None` when it has
    /// nothing to send.
    #[inline]
    pub fn transmit(&mut self, egress: usize) -> Option<P> {
        let EgressPort { queues, queue_bytes, scheduler } = &mut self.ports[egress];
        let tc = scheduler.select(0xff, |tc| queues[tc].front().map(PacketBuf::len))?;
        let packet = queues[tc].pop_front().expect("the scheduler picked a non-empty queue");
        let len = packet.len() as u64;
        queue_bytes[tc] -= len;
        self.buffer_used -= len;
        self.queued_packets -= 1;
        let stats = &mut self.stats.ports[egress];
        stats.tx_packets += 1;
        stats.tx_bytes += len;
        stats.queues[tc].tx_packets += 1;
        stats.queues[tc].tx_bytes += len;
        Some(packet)
    }

    pub fn has_queued(&self, egress: usize) -> bool {
        self.ports[egress].queue_bytes.iter().any(|&bytes| bytes > 0)
            || self.ports[egress].queues.iter().any(|q| !q.is_empty())
    }

    /// Packets queued on all ports.
    pub fn queued_packets(&self) -> u64 {
        self.queued_packets
    }

    /// Bytes of the shared buffer in use.
    pub fn buffer_used(&self) -> u64 {
        self.buffer_used
    }

    /// Empties every queue at shutdown when ports can no longer send; the packets are counted
    /// as `buffer_full` drops on their egress queue and released.
    pub fn drain(&mut self) -> u64 {
        let mut drained = 0;
        for (egress, port) in self.ports.iter_mut().enumerate() {
            for tc in 0..TRAFFIC_CLASSES {
                let count = port.queues[tc].len() as u64;
                port.queues[tc].clear();
                port.queue_bytes[tc] = 0;
                self.stats.ports[egress].queues[tc].dropped += count;
                self.stats.ports[egress].drops[DropReason::BufferFull.index()] += count;
                drained += count;
            }
        }
        self.buffer_used = 0;
        self.queued_packets = 0;
        drained
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::HeapPacket;

    fn config(extra_switch: &str) -> Config {
        let text = format!(
            r#"
[switch]
name = "t"
mac = "02:00:00:00:00:aa"
{extra_switch}
[qos]
dscp_to_tc = {{ 26 = 3, default = 0 }}
[[port]]
name = "p0"
speed_gbps = 100
peer_mac = "02:00:00:00:10:00"
[[port]]
name = "p1"
speed_gbps = 100
peer_mac = "02:00:00:00:11:00"
[[route]]
prefix = "10.0.1.0/24"
port = "p1"
"#
        );
        Config::parse(&text, "t.toml").unwrap()
    }

    fn frame() -> HeapPacket {
        HeapPacket::new(crate::wire::parse::tests::rocev2_frame(false))
    }

    #[test]
    fn queue_then_transmit_conserves_packets_and_bytes() {
        let config = config("");
        let mut switch: Switch<HeapPacket> = Switch::new(&config);
        for _ in 0..10 {
            assert_eq!(switch.receive(0, frame()), Received::Queued { egress: 1, tc: 3 });
        }
        assert_eq!(switch.queued_packets(), 10);
        assert_eq!(switch.buffer_used(), 10 * 58);
        let mut sent = 0;
        while let Some(packet) = switch.transmit(1) {
            assert_eq!(packet.bytes[14 + 8], 63);
            sent += 1;
        }
        assert_eq!(sent, 10);
        assert_eq!(switch.buffer_used(), 0);
        assert_eq!(switch.stats.ports[0].rx_packets, 10);
        assert_eq!(switch.stats.ports[1].tx_packets, 10);
        assert_eq!(switch.stats.ports[1].queues[3].tx_bytes, 580);
        assert_eq!(switch.stats.ports[1].queues[3].max_depth_bytes, 580);
        assert!(switch.transmit(0).is_none());
    }

    #[test]
    fn shared_buffer_overflow_is_counted_on_both_sides() {
        let config = config("buffer_bytes = 200");
        let mut switch: Switch<HeapPacket> = Switch::new(&config);
        let outcomes: Vec<_> = (0..5).map(|_| switch.receive(0, frame())).collect();
        assert_eq!(outcomes.iter().filter(|o| matches!(o, Received::Queued { .. })).count(), 3);
        assert_eq!(switch.stats.ports[0].drops[DropReason::BufferFull.index()], 2);
        assert_eq!(switch.stats.ports[1].queues[3].dropped, 2);
        assert_eq!(switch.stats.rx_packets(), switch.tx_packets_plus_drops_plus_queued());
    }

    #[test]
    fn queue_packet_limit_is_enforced() {
        let config = config("queue_packets = 2");
        let mut switch: Switch<HeapPacket> = Switch::new(&config);
        for _ in 0..4 {
            switch.receive(0, frame());
        }
        assert_eq!(switch.queued_packets(), 2);
        assert_eq!(switch.drain(), 2);
        assert_eq!(switch.stats.rx_packets(), switch.tx_packets_plus_drops_plus_queued());
    }

    impl<P: PacketBuf> Switch<P> {
        fn tx_packets_plus_drops_plus_queued(&self) -> u64 {
            self.stats.tx_packets() + self.stats.dropped() + self.queued_packets()
        }
    }
}
