//! The hot path allocates nothing: after warm-up, receiving and transmitting frames through
//! the switch (classify, group selection, ECN, PFC accounting, scheduling) makes zero heap
//! allocations. A counting global allocator counts the allocations of the thread that runs
//! the switch (other threads, such as the test harness's, allocate on their own schedule: a
//! harness thread reaching its first blocking wait during the measurement, on a loaded
//! machine, once counted 4 allocations that were not the switch's).

// A counting global allocator needs `unsafe impl GlobalAlloc`; the workspace denies unsafe elsewhere.
#![allow(unsafe_code)]

use raceway_core::config::GroupMode;
use raceway_core::packet::HeapPacket;
use raceway_core::switch::Switch;
use raceway_core::testing::{rocev2_burst, Leaf};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicU64, Ordering};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Set on the thread whose allocations are counted.
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}

fn count() {
    // `try_with`: a thread being torn down has no thread-locals left, and is not counted.
    if COUNTED.try_with(Cell::get).unwrap_or(false) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: forwards to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller upholds GlobalAlloc's contract, which System shares.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// 64 flows to the group; half of them lossless (DSCP 26), half lossy.
fn frames() -> Vec<Vec<u8>> {
    rocev2_burst(64, |flow, spec| {
        spec.destination = IpAddr::V4(Ipv4Addr::new(198, 51, 100, flow));
        spec.dscp = if flow % 2 == 0 { 26 } else { 0 };
    })
}

#[test]
fn zero_allocations_per_packet_in_every_group_mode() {
    COUNTED.with(|counted| counted.set(true));
    for mode in GroupMode::ALL.iter().map(|mode| mode.name()) {
        // ECN marks from the first byte queued, so marking runs on the measured path too.
        let qos = "dscp_to_tc = { 26 = 3, default = 0 }\nlossless = [3]\n[qos.scheduler]\ndwrr = { 0 = 50, 3 = 50 }\n\
                   [qos.ecn.3]\nkmin_bytes = 0\nkmax_bytes = 100000\npmax = 0.5";
        let config = Leaf::two_uplinks("alloc", mode).qos(qos).config();
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 1);
        let templates = frames();
        let mut packets: Vec<HeapPacket> = templates.iter().cloned().map(HeapPacket::new).collect();
        let mut spare: Vec<HeapPacket> = Vec::with_capacity(packets.len());
        let mut now = 0u64;
        let mut run = |rounds: usize, switch: &mut Switch<HeapPacket>| {
            for _ in 0..rounds {
                for (packet, template) in packets.iter_mut().zip(&templates) {
                    packet.bytes.copy_from_slice(template);
                }
                for packet in packets.drain(..) {
                    switch.receive(0, packet, now);
                }
                now += 10_000;
                switch.advance(now);
                for port in 1..3 {
                    while let Some(packet) = switch.transmit(port, now) {
                        spare.push(packet);
                    }
                }
                std::mem::swap(&mut packets, &mut spare);
            }
        };
        run(100, &mut switch); // warm-up: flowlet tables and the like settle
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        run(1000, &mut switch);
        let allocations = ALLOCATIONS.load(Ordering::Relaxed) - before;
        assert_eq!(packets.len(), 64, "{mode}: every frame came back");
        assert_eq!(allocations, 0, "{mode}: {allocations} allocations for 64,000 packets");
        assert!(switch.stats.tx_packets() >= 64_000);
        assert!(switch.stats.ports[1].queues[3].ecn_marked + switch.stats.ports[2].queues[3].ecn_marked > 0);
    }
}
