//! The buffer plan: the shared buffer's pools (SONiC's buffer model on Broadcom), and the PFC
//! thresholds of each lossless (ingress port, priority group): headroom, XOFF and XON.
//!
//! It is part of the configuration, not of `tm/`: it is derived from the ports' speeds and
//! cables and the `[qos]` sections alone, as SONiC's buffer manager derives the buffer
//! profiles in its config database from the same inputs, and a config whose headroom or pools
//! do not fit in the buffer is refused when it is read (`Config::parse`), with the field at
//! fault. `tm/` applies the plan; it never derives one.
//!
//! Buffer is accounted in cells of `CELL_BYTES`, as switch ASICs do: a frame occupies
//! ceil(len / CELL_BYTES) cells. Every threshold here is in cell bytes.
//!
//! `switch.buffer_bytes` is carved into three parts that never lend to each other:
//! - the headroom reserved for every (enabled port, lossless priority group);
//! - the ingress lossless pool (`qos.buffer.lossless_pool_bytes`), which lossless groups share
//!   up to their XOFF points;
//! - the egress lossy pool (`qos.buffer.lossy_pool_bytes`), where each lossy (egress port,
//!   class) queue may hold up to `lossy_alpha` x the free lossy pool (SONiC's dynamic_th: 3
//!   is alpha 8), so one congested queue stops at 8/9 of the pool and leaves room for others.
//!
//! By default the two pools split what headroom leaves evenly (all of it lossy without
//! lossless priorities). So a lossy incast fills only the lossy pool and never moves a
//! lossless group's XOFF point: PFC acts only on congestion of lossless traffic.
//!
//! Headroom ("auto") is what can still arrive after the switch decides to send XOFF, the
//! delays of 802.1Qbb Annex N (`HeadroomParts`):
//! - the switch may be sending a maximum frame when it decides (the XOFF waits for it);
//! - where the port has one tx queue, the XOFF also waits on the wire behind the data the
//!   shaper handed the NIC ahead of its wire time: up to `LOOKAHEAD_FRAMES` maximum standard
//!   frames (1518 bytes), 32 x 1542 = 49,344 wire bytes (3.95 us at 100 Gb/s). Where PFC
//!   frames leave on a tx queue of their own (`[[port]] pfc_tx_queue`: PCI NICs by default),
//!   the NIC sends them after the frame in progress, and this part is 0;
//! - the XOFF frame itself takes 84 bytes of wire time;
//! - the XOFF travels the cable, and data the peer already sent travels back: 2 x cable_m x
//!   5 ns/m (light in fibre);
//! - the peer answers within its response time, whichever is longer of a NIC's and raceway's:
//!   - the port's `peer_response_quanta`, by default IEEE 802.3 31B.3.7's allowance for its
//!     speed (`nic_response_quanta`: 394 quanta at 100 Gb/s, 2.017 us, 25,216 wire bytes; 905
//!     at 400 and 800 Gb/s, 57,920 wire bytes), a quantum being 64 wire bytes at any speed;
//!   - raceway's own: the same lookahead, 49,344 wire bytes, handed to its NIC before the
//!     pause arrived, which it cannot recall. So two raceways face each other losslessly. A
//!     shorter lookahead starves the link whenever one poll loop takes longer than it
//!     (perf/RESULTS.md, "Figures once in code comments", has the measurement);
//! - the peer may have just started a maximum frame, which it finishes;
//! - where a port's rx queues are spread over several workers (`[[port]] rx_queues`), its
//!   owner decides XOFF on the other workers' shares of its groups as they published them at
//!   the start of their last loop: each other queue's last rx burst may be unseen, at most a
//!   lookahead of wire bytes each (`rx_burst_size`), so (rx_queues - 1) x 49,344.
//!
//! In wire bytes: W = 2 x (mtu + 18 + 24) + local lookahead + 84 + (2 x cable_m x 5 ns) x
//! speed / 8 + 49,344 (+ the shared rx part). Converted to cells at the worst case, minimum-size frames (84 wire
//! bytes each, one cell each): headroom = ceil(W / 84) x CELL_BYTES. A 100 Gb/s port with 3 m
//! of cable and a 9216 MTU needs 814 cells, 208,384 bytes, with a PFC tx queue, and 1,401
//! cells, 358,656 bytes, with one tx queue (docs/CONFIG.md works it by hand).
//! Not counted: the time between a PFC frame reaching raceway's port and the poll loop reading
//! it (one loop iteration, a few us on a busy core), and frames a NIC slower than the port's
//! configured speed holds beyond the lookahead (the shaper assumes the configured speed).
//!
//! XOFF ("auto") is SONiC's dynamic threshold: alpha x the free lossless pool. XON ("auto")
//! is XOFF - 2 x mtu.
//!
//! Invariant: headroom and both pools fit in the buffer (`BufferPlan::new` refuses
//! otherwise), and the pools are whole cells.

use super::{BufferConfig, Config, PortConfig, Threshold};

/// Bytes per buffer cell.
pub const CELL_BYTES: u64 = 256;
/// A NIC peer's PFC response time by link speed, in pause quanta (512 bit times, 64 wire
/// bytes) at that speed: IEEE 802.3 31B.3.7, as SONiC's headroom calculation tabulates it.
/// (Mb/s, quanta), ascending.
const NIC_RESPONSE_QUANTA: [(u64, u16); 10] = [
    (100, 1),
    (1_000, 2),
    (10_000, 67),
    (25_000, 80),
    (40_000, 118),
    (50_000, 147),
    (100_000, 394),
    (200_000, 453),
    (400_000, 905),
    (800_000, 905),
];
/// Wire bytes per pause quantum: 512 bit times.
pub const QUANTUM_WIRE_BYTES: u64 = 64;
/// Maximum standard frames raceway's live shaper may hand a port's NIC ahead of their wire
/// time: one tx burst.
pub const LOOKAHEAD_FRAMES: u64 = 32;
/// The frame size the lookahead is counted in.
const LOOKAHEAD_FRAME_BYTES: usize = 1518;
/// The lookahead in wire bytes, the same at every speed: 32 x 1,542 = 49,344.
pub const LOOKAHEAD_WIRE_BYTES: u64 = LOOKAHEAD_FRAMES * crate::units::wire_bytes(LOOKAHEAD_FRAME_BYTES);
/// Propagation delay of light in fibre, per metre.
pub const PROPAGATION_PS_PER_M: f64 = 5_000.0;
/// Pause time sent in XOFF frames, in quanta.
pub const XOFF_QUANTA: u16 = 0xffff;
/// Wire bytes of a minimum frame (60 + FCS 4 + preamble/SFD 8 + IFG 12).
const MIN_WIRE_BYTES: u64 = 84;

/// Cells a frame of `len` bytes occupies, in bytes.
#[inline]
pub fn charge(len: usize) -> u64 {
    (len as u64).div_ceil(CELL_BYTES) * CELL_BYTES
}

/// One pause quantum (512 bit times) at `speed_mbps`, in ps, rounded up.
pub fn quanta_ps(quanta: u16, speed_mbps: u64) -> u64 {
    (u64::from(quanta) * 512_000_000).div_ceil(speed_mbps)
}

/// How far ahead of their wire time raceway's live shaper hands a port's frames to its NIC,
/// in ps: `LOOKAHEAD_FRAMES` maximum standard frames at the port's speed.
pub fn lookahead_ps(port: &PortConfig) -> u64 {
    port.wire_time_ps(LOOKAHEAD_FRAME_BYTES) * LOOKAHEAD_FRAMES
}

/// The response 802.3 31B.3.7 allows a NIC at `speed_mbps`, in pause quanta. A speed between
/// the standard's takes the next faster one's allowance (more wire bytes: the safe side),
/// one above them all the fastest's.
pub fn nic_response_quanta(speed_mbps: u64) -> u16 {
    NIC_RESPONSE_QUANTA
        .iter()
        .find(|&&(speed, _)| speed >= speed_mbps)
        .unwrap_or(&NIC_RESPONSE_QUANTA[NIC_RESPONSE_QUANTA.len() - 1])
        .1
}

/// The port's peer's response in wire bytes: the longer of its NIC allowance
/// (`peer_response_quanta`) and raceway's lookahead.
pub fn peer_response_wire_bytes(port: &PortConfig) -> u64 {
    (u64::from(port.peer_response_quanta) * QUANTUM_WIRE_BYTES).max(LOOKAHEAD_WIRE_BYTES)
}

/// Propagation delay of a port's cable, one way, in ps.
pub fn propagation_ps(port: &PortConfig) -> u64 {
    cable_delay_ps(port.cable_m)
}

/// Propagation delay of `cable_m` metres of cable, one way, in ps.
pub fn cable_delay_ps(cable_m: f64) -> u64 {
    (cable_m * PROPAGATION_PS_PER_M).round() as u64
}

/// What the "auto" headroom of a port is made of, in wire bytes: 802.1Qbb Annex N's delays,
/// from the moment the switch decides XOFF to the last frame the peer sent before it paused.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeadroomParts {
    /// The maximum frame the port may be sending when it decides; the PFC frame follows it.
    pub frame_in_progress: u64,
    /// Data ahead of the PFC frame in the port's one tx queue: the shaper's lookahead (0 when
    /// PFC frames have a tx queue of their own).
    pub local_lookahead: u64,
    /// The PFC frame itself.
    pub pfc_frame: u64,
    /// The cable twice: the PFC frame going out, the peer's data coming back.
    pub cable_round_trip: f64,
    /// The peer's response: the longer of its NIC allowance and raceway's lookahead.
    pub peer_response: u64,
    /// The maximum frame the peer may have just started, which it finishes.
    pub peer_frame: u64,
    /// A port whose rx queues are polled by several workers: the port's owner decides XOFF on
    /// the others' shares of its groups as they published them once per loop, so it may see
    /// each other queue's last rx burst late (at most a lookahead of wire bytes each,
    /// `rx_burst_size`). 0 with one rx queue.
    pub shared_rx: u64,
}

impl HeadroomParts {
    pub fn of(port: &PortConfig, mtu: u32) -> Self {
        let max_frame_wire = u64::from(mtu) + 18 + 24;
        let lookahead = LOOKAHEAD_WIRE_BYTES;
        Self {
            frame_in_progress: max_frame_wire,
            local_lookahead: if port.pfc_tx_queue { 0 } else { lookahead },
            pfc_frame: MIN_WIRE_BYTES,
            cable_round_trip: 2.0 * port.cable_m * PROPAGATION_PS_PER_M * port.speed_mbps as f64 / 8e6,
            peer_response: peer_response_wire_bytes(port),
            peer_frame: max_frame_wire,
            shared_rx: u64::from(port.rx_queues.saturating_sub(1)) * lookahead,
        }
    }

    /// Every part, in wire bytes.
    pub fn wire_bytes(&self) -> f64 {
        (self.frame_in_progress
            + self.local_lookahead
            + self.pfc_frame
            + self.peer_response
            + self.peer_frame
            + self.shared_rx) as f64
            + self.cable_round_trip
    }

    /// The headroom in cell bytes: the wire bytes as minimum-size frames, one cell each.
    pub fn cell_bytes(&self) -> u64 {
        (self.wire_bytes() / MIN_WIRE_BYTES as f64).ceil() as u64 * CELL_BYTES
    }
}

/// The "auto" headroom of a port, in cell bytes (see the module notes).
pub fn auto_headroom(port: &PortConfig, mtu: u32) -> u64 {
    HeadroomParts::of(port, mtu).cell_bytes()
}

/// XOFF of a group, static or dynamic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Xoff {
    Static(u64),
    /// alpha x free shared buffer, alpha in 16.16 fixed point
    Dynamic(u64),
}

/// The pools and the thresholds of every port's lossless groups and lossy queues.
#[derive(Debug, Clone, PartialEq)]
pub struct BufferPlan {
    pub headroom: Vec<u64>,
    pub xoff: Xoff,
    pub xon: Threshold,
    pub mtu: u64,
    /// Bit n set: TC n is lossless (its frames are charged to their ingress group).
    pub lossless_tcs: u8,
    /// Bit n set: priority group n is lossless.
    pub lossless_pgs: u8,
    /// The ingress priority group each TC is charged to.
    pub tc_to_pg: [u8; 8],
    /// Headroom reserved for every (enabled port, lossless priority group).
    pub reserved_headroom: u64,
    /// The ingress pool lossless groups share below their XOFF points.
    pub lossless_pool: u64,
    /// The egress pool lossy queues share.
    pub lossy_pool: u64,
    /// A lossy queue's limit: this x the free lossy pool, 16.16 fixed point.
    pub lossy_alpha: u64,
}

/// Rounds down to whole cells.
fn cells_floor(bytes: u64) -> u64 {
    bytes / CELL_BYTES * CELL_BYTES
}

impl BufferPlan {
    /// Derives pools and thresholds; the error names the field and the problem.
    pub fn new(config: &Config) -> Result<Self, (&'static str, String)> {
        let qos = &config.qos;
        let headroom: Vec<u64> = config
            .ports
            .iter()
            .map(|port| match qos.pfc.headroom_bytes {
                Threshold::Auto => auto_headroom(port, config.mtu),
                Threshold::Bytes(bytes) => charge(bytes as usize),
            })
            .collect();
        let groups = u64::from(qos.lossless_pgs.count_ones());
        let reserved_headroom: u64 =
            config.ports.iter().zip(&headroom).filter(|(port, _)| port.enabled).map(|(_, h)| h * groups).sum();
        if groups > 0 && reserved_headroom >= config.buffer_bytes {
            return Err((
                "qos.pfc.headroom_bytes",
                format!(
                    "headroom for {} lossless groups needs {reserved_headroom} bytes, more than switch.buffer_bytes {}",
                    groups * config.ports.iter().filter(|p| p.enabled).count() as u64,
                    config.buffer_bytes
                ),
            ));
        }
        let (lossless_pool, lossy_pool) =
            Self::pools(&qos.buffer, groups > 0, config.buffer_bytes - reserved_headroom)?;
        let xoff = match qos.pfc.xoff_bytes {
            Threshold::Auto => Xoff::Dynamic((qos.pfc.alpha * 65536.0).round() as u64),
            Threshold::Bytes(bytes) => Xoff::Static(bytes),
        };
        Ok(Self {
            headroom,
            xoff,
            xon: qos.pfc.xon_bytes,
            mtu: u64::from(config.mtu),
            lossless_tcs: qos.lossless_tcs,
            lossless_pgs: qos.lossless_pgs,
            tc_to_pg: qos.tc_to_pg,
            reserved_headroom,
            lossless_pool,
            lossy_pool,
            lossy_alpha: (qos.buffer.lossy_alpha * 65536.0).round() as u64,
        })
    }

    /// The two pools' sizes out of `available` (the buffer less headroom): as configured, or
    /// the rest of the buffer for the one not given, or an even split.
    fn pools(buffer: &BufferConfig, lossless: bool, available: u64) -> Result<(u64, u64), (&'static str, String)> {
        let too_big = |field: &'static str, bytes: u64| {
            Err((
                field,
                format!("{bytes} bytes do not fit in the {available} bytes that headroom leaves of the buffer"),
            ))
        };
        let (lossless_pool, lossy_pool) = match (buffer.lossless_pool_bytes, buffer.lossy_pool_bytes) {
            (Some(bytes), _) if bytes > available => return too_big("qos.buffer.lossless_pool_bytes", bytes),
            (_, Some(bytes)) if bytes > available => return too_big("qos.buffer.lossy_pool_bytes", bytes),
            (Some(lossless), Some(lossy)) if lossless + lossy > available => {
                return too_big("qos.buffer.lossy_pool_bytes", lossless + lossy)
            }
            (Some(lossless), Some(lossy)) => (lossless, lossy),
            (Some(lossless), None) => (lossless, available - lossless),
            (None, Some(lossy)) => (available - lossy, lossy),
            (None, None) if lossless => (available / 2, available - available / 2),
            (None, None) => (0, available),
        };
        let (lossless_pool, lossy_pool) = (cells_floor(lossless_pool), cells_floor(lossy_pool));
        if lossless && lossless_pool == 0 {
            return Err(("qos.buffer.lossless_pool_bytes", "is empty, but qos.lossless names priorities".into()));
        }
        Ok((lossless_pool, lossy_pool))
    }

    /// The XOFF point given the free lossless pool.
    #[inline]
    pub fn xoff(&self, lossless_free: u64) -> u64 {
        match self.xoff {
            Xoff::Static(bytes) => bytes,
            // alpha in 16.16 fixed point: an integer multiply per frame, not two float
            // conversions.
            Xoff::Dynamic(alpha) => ((u128::from(lossless_free) * u128::from(alpha)) >> 16) as u64,
        }
    }

    /// What one lossy queue may hold given the free lossy pool: alpha x free.
    #[inline]
    pub fn lossy_limit(&self, lossy_free: u64) -> u64 {
        ((u128::from(lossy_free) * u128::from(self.lossy_alpha)) >> 16) as u64
    }

    /// The XON point for a given XOFF point.
    #[inline]
    pub fn xon(&self, xoff: u64) -> u64 {
        match self.xon {
            Threshold::Bytes(bytes) => bytes.min(xoff),
            Threshold::Auto => xoff.saturating_sub(2 * self.mtu),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_text(pfc: &str, extra_switch: &str) -> String {
        format!(
            "[switch]\nname = \"t\"\nmac = \"02:00:00:00:00:01\"\n{extra_switch}\n[qos]\nlossless = [3, 4]\n{pfc}\n\
             [[port]]\nname = \"a\"\nspeed_gbps = 100\ncable_m = 3\npeer_mac = \"02:00:00:00:00:02\"\n\
             [[port]]\nname = \"b\"\nspeed_gbps = 10\ncable_m = 100\npeer_mac = \"02:00:00:00:00:03\"\n"
        )
    }

    fn config(pfc: &str, extra_switch: &str) -> Config {
        Config::parse(&config_text(pfc, extra_switch), "t.toml").unwrap()
    }

    #[test]
    fn auto_headroom_follows_the_documented_formula() {
        let config = config("", "");
        // The response at 100G: raceway's lookahead, 32 x 1542 wire bytes, longer than a NIC's
        // 394 quanta of 64 bytes (25,216).
        assert_eq!(config.ports[0].peer_response_quanta, 394);
        assert_eq!(peer_response_wire_bytes(&config.ports[0]), 49_344);
        // 100G, 3 m, MTU 9216: W = 2 x 9258 + 84 + 30 ns x 12.5 B/ns + 49344 = 68319 -> 814 cells.
        assert_eq!(auto_headroom(&config.ports[0], 9216), 814 * CELL_BYTES);
        // MTU 1500: W = 2 x 1542 + 84 + 375 + 49344 = 52887 -> 630 cells.
        assert_eq!(auto_headroom(&config.ports[0], 1500), 630 * CELL_BYTES);
        // 10G, 100 m: W = 18516 + 84 + 1000 ns x 1.25 B/ns + 49344 = 69194 -> 824 cells.
        assert_eq!(auto_headroom(&config.ports[1], 9216), 824 * CELL_BYTES);
        // Longer cables and faster links need more.
        assert!(auto_headroom(&config.ports[0], 1500) < auto_headroom(&config.ports[0], 9216));
    }

    #[test]
    fn one_tx_queue_adds_the_lookahead_the_pfc_frame_waits_behind() {
        // The hand calculation: 100G, 3 m, MTU 9216 on a port whose PFC frames share
        // the data's tx queue: W = 68319 + 49344 = 117663 -> 1401 cells, 358,656 bytes.
        let text = config_text("", "").replacen("cable_m = 3\n", "cable_m = 3\npfc_tx_queue = false\n", 1);
        let config = Config::parse(&text, "t.toml").unwrap();
        let parts = HeadroomParts::of(&config.ports[0], 9216);
        assert_eq!(
            (parts.frame_in_progress, parts.local_lookahead, parts.pfc_frame, parts.peer_response, parts.peer_frame),
            (9258, 49_344, 84, 49_344, 9258)
        );
        assert_eq!(parts.cable_round_trip, 375.0);
        assert_eq!(parts.wire_bytes(), 117_663.0);
        assert_eq!(auto_headroom(&config.ports[0], 9216), 358_656);
        // With a queue of its own the PFC frame waits for the frame in progress only.
        assert_eq!(HeadroomParts::of(&config.ports[1], 9216).local_lookahead, 0);
        assert_eq!(parts.shared_rx, 0, "one rx queue");
        let plan = BufferPlan::new(&config).unwrap();
        assert_eq!(plan.headroom, vec![358_656, 824 * CELL_BYTES], "the plan takes each port's own");
    }

    #[test]
    fn a_port_spread_over_rx_queues_adds_one_lookahead_per_other_queue() {
        // 100G, 3 m, MTU 9216, PFC tx queue (814 cells, 68,319 wire bytes) with 3 rx queues:
        // + 2 x 49,344 = 167,007 wire bytes -> 1,989 cells.
        let text = config_text("", "").replacen("cable_m = 3\n", "cable_m = 3\nrx_queues = 3\n", 1);
        let config = Config::parse(&text, "t.toml").unwrap();
        let parts = HeadroomParts::of(&config.ports[0], 9216);
        assert_eq!(parts.shared_rx, 2 * 49_344);
        assert_eq!(parts.wire_bytes(), 167_007.0);
        assert_eq!(auto_headroom(&config.ports[0], 9216), 1_989 * CELL_BYTES);
        assert_eq!(HeadroomParts::of(&config.ports[1], 9216).shared_rx, 0);
        for bad in ["0", "65"] {
            let text = config_text("", "").replacen("cable_m = 3\n", &format!("cable_m = 3\nrx_queues = {bad}\n"), 1);
            let err = Config::parse(&text, "t.toml").unwrap_err();
            assert_eq!(
                (err.field.as_str(), err.problem.as_str()),
                ("port[0].rx_queues", &*format!("{bad} is not between 1 and 64"))
            );
        }
    }

    #[test]
    fn the_peer_s_response_follows_802_3_31b_3_7_by_speed() {
        assert_eq!(
            [100, 1_000, 10_000, 25_000, 40_000, 50_000, 100_000, 200_000, 400_000, 800_000].map(nic_response_quanta),
            [1, 2, 67, 80, 118, 147, 394, 453, 905, 905]
        );
        // Between the standard's speeds: the next faster one's (more wire bytes); above them,
        // the fastest's; below, the slowest's.
        assert_eq!((nic_response_quanta(2_500), nic_response_quanta(1_600_000), nic_response_quanta(10)), (67, 905, 1));
        // At 400G a NIC takes 905 quanta, 57,920 wire bytes, longer than raceway's lookahead:
        // 3 m of cable, MTU 9216, PFC on a tx queue of its own: W = 2 x 9258 + 84 + 30 ns x
        // 50 B/ns + 57,920 = 78,020 -> 929 cells (with 394 quanta it was 827: 102 short).
        let text = config_text("", "").replacen("speed_gbps = 100\n", "speed_gbps = 400\n", 1);
        let config = Config::parse(&text, "t.toml").unwrap();
        assert_eq!(config.ports[0].peer_response_quanta, 905);
        assert_eq!(peer_response_wire_bytes(&config.ports[0]), 57_920);
        assert_eq!(HeadroomParts::of(&config.ports[0], 9216).wire_bytes(), 78_020.0);
        assert_eq!(auto_headroom(&config.ports[0], 9216), 929 * CELL_BYTES);
        // A port may say what its peer takes.
        let text = text.replacen("cable_m = 3\n", "cable_m = 3\npeer_response_quanta = 2000\n", 1);
        let config = Config::parse(&text, "t.toml").unwrap();
        assert_eq!(peer_response_wire_bytes(&config.ports[0]), 128_000);
        assert_eq!(config.ports[0].peer_response_ps(), 2_560_000);
        let err = Config::parse(&text.replace("= 2000", "= 70000"), "t.toml").unwrap_err();
        assert_eq!(
            (err.field.as_str(), err.problem.as_str()),
            ("port[0].peer_response_quanta", "70000 is not between 0 and 65535 pause quanta")
        );
    }

    #[test]
    fn plan_reserves_headroom_per_lossless_group() {
        let plan = BufferPlan::new(&config("", "")).unwrap();
        assert_eq!(plan.reserved_headroom, 2 * (814 + 824) * CELL_BYTES);
        // The rest split evenly between the pools, in whole cells.
        let available = 16 * 1024 * 1024 - plan.reserved_headroom;
        assert_eq!(plan.lossless_pool, available / 2 / CELL_BYTES * CELL_BYTES);
        assert_eq!(plan.lossy_pool, (available - available / 2) / CELL_BYTES * CELL_BYTES);
        // Dynamic: alpha 1 x free; XON two MTUs below.
        assert_eq!(plan.xoff(1_000_000), 1_000_000);
        assert_eq!(plan.xon(1_000_000), 1_000_000 - 2 * 9216);
        assert_eq!(plan.xon(10_000), 0);
    }

    #[test]
    fn static_thresholds_and_too_much_headroom() {
        let plan =
            BufferPlan::new(&config("[qos.pfc]\nxoff_bytes = 100000\nxon_bytes = 50000\nalpha = 0.5", "")).unwrap();
        assert_eq!(plan.xoff(0), 100_000);
        assert_eq!(plan.xon(100_000), 50_000);
        let err = Config::parse(&config_text("", "buffer_bytes = 300000"), "t.toml").unwrap_err();
        assert_eq!(err.field, "qos.pfc.headroom_bytes");
        assert!(err.problem.contains("838656"), "{err}");
    }

    #[test]
    fn pools_as_configured_or_the_rest_and_never_more_than_the_buffer() {
        let available = 16 * 1024 * 1024 - 2 * (814 + 824) * CELL_BYTES;
        let plan = BufferPlan::new(&config("[qos.buffer]\nlossy_pool_bytes = 1000000", "")).unwrap();
        assert_eq!(plan.lossy_pool, 1_000_000 / CELL_BYTES * CELL_BYTES);
        assert_eq!(plan.lossless_pool, (available - 1_000_000) / CELL_BYTES * CELL_BYTES);
        let plan = BufferPlan::new(&config("[qos.buffer]\nlossless_pool_bytes = 2560", "")).unwrap();
        assert_eq!((plan.lossless_pool, plan.lossy_pool), (2560, available - 2560));
        let plan = BufferPlan::new(&config(
            "[qos.buffer]\nlossless_pool_bytes = 2560\nlossy_pool_bytes = 5120\nlossy_alpha = 0.5",
            "",
        ))
        .unwrap();
        assert_eq!((plan.lossless_pool, plan.lossy_pool), (2560, 5120));
        // Alpha 0.5: a queue may hold half of what is free.
        assert_eq!(plan.lossy_limit(4096), 2048);
        // Default alpha 8.
        assert_eq!(BufferPlan::new(&config("", "")).unwrap().lossy_limit(1000), 8000);
        let err = Config::parse(
            &config_text(&format!("[qos.buffer]\nlossless_pool_bytes = {available}\nlossy_pool_bytes = 1"), ""),
            "t.toml",
        )
        .unwrap_err();
        assert_eq!(err.field, "qos.buffer.lossy_pool_bytes");
        let err = Config::parse(&config_text("[qos.buffer]\nlossy_pool_bytes = 99999999", ""), "t.toml").unwrap_err();
        assert_eq!(err.field, "qos.buffer.lossy_pool_bytes");
        let err = Config::parse(&config_text("[qos.buffer]\nlossless_pool_bytes = 0", ""), "t.toml").unwrap_err();
        assert_eq!(err.field, "qos.buffer.lossless_pool_bytes");
        let err = Config::parse(&config_text("[qos.buffer]\nlossy_alpha = 0", ""), "t.toml").unwrap_err();
        assert_eq!(err.field, "qos.buffer.lossy_alpha");
    }

    #[test]
    fn pools_may_fill_the_buffer_exactly_but_not_more() {
        let available = 16 * 1024 * 1024 - 2 * (814 + 824) * CELL_BYTES;
        let parse = |buffer: String| Config::parse(&config_text(&buffer, ""), "t.toml");
        // Exactly what headroom leaves: together, or the lossless pool alone.
        let half = available / 2 / CELL_BYTES * CELL_BYTES;
        let plan = BufferPlan::new(
            &parse(format!("[qos.buffer]\nlossless_pool_bytes = {half}\nlossy_pool_bytes = {}", available - half))
                .unwrap(),
        )
        .unwrap();
        assert_eq!((plan.lossless_pool, plan.lossy_pool), (half, available - half));
        let plan = BufferPlan::new(&parse(format!("[qos.buffer]\nlossless_pool_bytes = {available}")).unwrap());
        assert_eq!(plan.map(|p| (p.lossless_pool, p.lossy_pool)), Ok((available, 0)));
        // Without lossless priorities the lossy pool may be the whole buffer.
        let lossy_only =
            config_text("[qos.buffer]\nlossy_pool_bytes = 16777216", "").replace("lossless = [3, 4]", "lossless = []");
        assert_eq!(BufferPlan::new(&Config::parse(&lossy_only, "t.toml").unwrap()).unwrap().lossy_pool, 16_777_216);
        // One byte more, alone or together, is an error naming the field.
        let field = |buffer: String| parse(buffer).unwrap_err().field;
        assert_eq!(
            field(format!("[qos.buffer]\nlossless_pool_bytes = {}", available + 1)),
            "qos.buffer.lossless_pool_bytes"
        );
        let sixty = available * 6 / 10;
        let err =
            parse(format!("[qos.buffer]\nlossless_pool_bytes = {sixty}\nlossy_pool_bytes = {sixty}")).unwrap_err();
        assert_eq!(err.field, "qos.buffer.lossy_pool_bytes");
        assert!(err.problem.starts_with(&format!("{} bytes do not fit in the {available}", 2 * sixty)), "{err}");
    }

    #[test]
    fn without_lossless_priorities_the_lossy_pool_is_the_whole_buffer() {
        let text = config_text("", "").replace("lossless = [3, 4]", "lossless = []");
        let plan = BufferPlan::new(&Config::parse(&text, "t.toml").unwrap()).unwrap();
        assert_eq!((plan.reserved_headroom, plan.lossless_pool, plan.lossy_pool), (0, 0, 16 * 1024 * 1024));
    }

    #[test]
    fn propagation_is_five_ns_per_metre() {
        let config = config("", "");
        assert_eq!(propagation_ps(&config.ports[0]), 15_000, "3 m");
        assert_eq!(propagation_ps(&config.ports[1]), 500_000, "100 m");
    }

    #[test]
    fn cells_and_quanta() {
        assert_eq!(charge(60), 256);
        assert_eq!(charge(256), 256);
        assert_eq!(charge(257), 512);
        assert_eq!(quanta_ps(1, 100_000), 5_120);
        assert_eq!(quanta_ps(0xffff, 100_000), 335_539_200);
    }
}
