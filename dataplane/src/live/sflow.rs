//! sFlow export, live: each worker hands its switch's flow samples (`pipeline::sample`) to a
//! lock-free queue of its own once per loop when there are any (`live::sample_ring`); the
//! exporter thread takes
//! them, adds every port's counters each `polling_interval_s`, and sends the datagrams
//! (`observe::sflow`) to the collector over a UDP socket of the kernel, in the namespace
//! raceway runs in (the management network). It reads the config in force, so a reload
//! that changes `[sflow]` (collector, agent, rates, interval) acts at its next round.
//!
//! Invariant: no worker sends, blocks or allocates for sFlow; a sample that finds its queue
//! full is counted in the drops the next flow sample reports, never lost silently. A send that
//! fails (no route to the collector) is logged once per run of failures and counted.

use super::shared::Shared;
use crate::observe::sflow::{Encoder, InterfaceCounters};
use std::net::UdpSocket;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the exporter takes the workers' samples.
const ROUND: Duration = Duration::from_millis(20);

/// The exporter thread: runs until the switch stops.
pub(super) fn spawn(shared: Arc<Shared>) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new().name("raceway-sflow".into()).spawn(move || export(&shared))
}

fn export(shared: &Shared) {
    let queues = &shared.samples;
    // `namespace = "control"`: the socket lives in the control plane's namespace, so the
    // datagrams follow its routes out of the switch's own ports (to the kernel's interfaces,
    // read by the control thread and injected, as any frame the kernel sends).
    let home = crate::linux::current_netns();
    let mut in_control = false;
    // Said once, not every round.
    let mut stuck = false;
    let started = Instant::now();
    let mut encoder: Option<Encoder> = None;
    let mut socket: Option<(std::net::SocketAddr, UdpSocket)> = None;
    let mut next_poll = Instant::now();
    let mut failing = false;
    while !shared.stop.load(Ordering::Relaxed) {
        std::thread::sleep(ROUND);
        let config = shared.config.running();
        let Some(sflow) = &config.sflow else {
            // Off (or turned off by a reload): what the workers sampled before goes.
            queues.discard_all();
            encoder = None;
            continue;
        };
        if sflow.through_ports != in_control {
            let entered = match (&config.control, &home) {
                (Some(control), _) if sflow.through_ports => crate::linux::enter_netns(&control.netns),
                (_, Ok(home)) => crate::linux::enter_netns_of(home),
                (_, Err(err)) => Err(std::io::Error::new(err.kind(), err.to_string())),
            };
            match entered {
                Ok(()) => {
                    in_control = sflow.through_ports;
                    // A socket opened in the other namespace sends from there.
                    socket = None;
                }
                Err(err) => {
                    if !stuck {
                        tracing::warn!("sflow: cannot change namespace: {err}; nothing is exported");
                        stuck = true;
                    }
                    continue;
                }
            }
        }
        let encoder = encoder.get_or_insert_with(|| Encoder::new(sflow.agent, config.ports.len()));
        encoder.set_agent(sflow.agent);
        if socket.as_ref().is_none_or(|(collector, _)| *collector != sflow.collector) {
            let unspecified: std::net::SocketAddr =
                if sflow.collector.is_ipv4() { ([0, 0, 0, 0], 0).into() } else { ([0u16; 8], 0).into() };
            socket = match UdpSocket::bind(unspecified) {
                Ok(bound) => Some((sflow.collector, bound)),
                Err(err) => {
                    tracing::warn!("sflow: cannot open a UDP socket: {err}");
                    continue;
                }
            };
        }
        let Some((collector, udp)) = &socket else { continue };
        let uptime_ms = started.elapsed().as_millis() as u32;
        let mut send = |datagram: Vec<u8>| match udp.send_to(&datagram, collector) {
            Ok(_) => {
                queues.sent.fetch_add(1, Ordering::Relaxed);
                failing = false;
            }
            Err(err) => {
                queues.failed.fetch_add(1, Ordering::Relaxed);
                if !failing {
                    tracing::warn!("sflow: cannot send to {collector}: {err}");
                    failing = true;
                }
            }
        };
        queues.take(|sample, lost| {
            encoder.flow(sample, lost);
            if encoder.full() {
                send(encoder.finish(uptime_ms).expect("samples"));
            }
        });
        if sflow.polling_interval_s > 0 && Instant::now() >= next_poll {
            next_poll = Instant::now() + Duration::from_secs(u64::from(sflow.polling_interval_s));
            let stats = shared.counters.snapshot();
            for (port, (counts, port_config)) in stats.ports.iter().zip(&config.ports).enumerate() {
                let state = shared.port_states.get(port);
                let out_discards = counts.queues.iter().map(|queue| queue.dropped).sum();
                encoder.counters(&InterfaceCounters {
                    port,
                    speed_bps: port_config.speed_mbps * 1_000_000,
                    admin_up: state.admin_up && port_config.enabled,
                    oper_up: state.usable() && port_config.enabled,
                    in_octets: counts.rx_bytes,
                    in_packets: counts.rx_packets,
                    in_discards: counts.dropped(),
                    out_octets: counts.tx_bytes,
                    out_packets: counts.tx_packets,
                    out_discards,
                });
                if encoder.full() {
                    send(encoder.finish(uptime_ms).expect("samples"));
                }
            }
        }
        if let Some(datagram) = encoder.finish(uptime_ms) {
            send(datagram);
        }
    }
}
