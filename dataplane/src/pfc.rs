//! PFC thresholds per lossless (ingress port, priority) group: headroom, XOFF and XON.
//!
//! Buffer is accounted in cells of `CELL_BYTES`, as switch ASICs do: a frame occupies
//! ceil(len / CELL_BYTES) cells. Every threshold here is in cell bytes.
//!
//! Headroom ("auto") is what can still arrive after the switch decides to send XOFF:
//! - the switch may be sending a maximum frame when it decides (the XOFF waits for it), and the
//!   XOFF frame itself takes 84 bytes of wire time;
//! - the XOFF travels the cable, and data the peer already sent travels back: 2 x cable_m x
//!   5 ns/m (light in fibre);
//! - the peer answers within its response time, taken as IEEE 802.3's 394 pause quanta at
//!   100 Gb/s (2.017 us), at every speed;
//! - the peer may have just started a maximum frame, which it finishes.
//!
//! In wire bytes: W = 2 x (mtu + 18 + 24) + 84 + (2 x cable_m x 5 ns + 2.017 us) x speed / 8.
//! Converted to cells at the worst case, minimum-size frames (84 wire bytes each, one cell
//! each): headroom = ceil(W / 84) x CELL_BYTES. A 100 Gb/s port with 3 m of cable and a 9216
//! MTU needs 527 cells, 134,912 bytes; with a 1500 MTU, 159 cells.
//!
//! XOFF ("auto") is SONiC's dynamic threshold: alpha x the free shared buffer, where the shared
//! buffer is `buffer_bytes` less all reserved headroom. XON ("auto") is XOFF - 2 x mtu.
//!
//! Invariant: the reserved headroom always fits in the buffer (`PfcPlan::new` refuses
//! otherwise), so the shared buffer is never negative.

#![forbid(unsafe_code)]

use crate::config::{Config, PortConfig, Threshold};

/// Bytes per buffer cell.
pub const CELL_BYTES: u64 = 256;
/// The peer's PFC response time: 394 quanta of 512 bit times at 100 Gb/s.
pub const PEER_RESPONSE_PS: u64 = 394 * 512 * 10;
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

/// Propagation delay of a port's cable, one way, in ps.
pub fn propagation_ps(port: &PortConfig) -> u64 {
    (port.cable_m * PROPAGATION_PS_PER_M).round() as u64
}

/// The "auto" headroom of a port, in cell bytes (see the module notes).
pub fn auto_headroom(port: &PortConfig, mtu: u32) -> u64 {
    let bytes_per_ps = port.speed_mbps as f64 / 8e6;
    let max_frame_wire = f64::from(mtu) + 18.0 + 24.0;
    let in_flight_time = 2.0 * port.cable_m * PROPAGATION_PS_PER_M + PEER_RESPONSE_PS as f64;
    let wire = 2.0 * max_frame_wire + MIN_WIRE_BYTES as f64 + in_flight_time * bytes_per_ps;
    (wire / MIN_WIRE_BYTES as f64).ceil() as u64 * CELL_BYTES
}

/// XOFF of a group, static or dynamic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Xoff {
    Static(u64),
    /// alpha x free shared buffer, alpha in 16.16 fixed point
    Dynamic(u64),
}

/// The thresholds of every port's lossless groups.
#[derive(Debug, Clone, PartialEq)]
pub struct PfcPlan {
    pub headroom: Vec<u64>,
    pub xoff: Xoff,
    pub xon: Threshold,
    pub mtu: u64,
    pub lossless_mask: u8,
    /// Headroom reserved for every (enabled port, lossless priority).
    pub reserved_headroom: u64,
    /// `buffer_bytes` less the reserved headroom.
    pub shared_capacity: u64,
}

impl PfcPlan {
    /// Derives the thresholds; the error names the problem (the field is `qos.pfc`).
    pub fn new(config: &Config) -> Result<Self, String> {
        let qos = &config.qos;
        let headroom: Vec<u64> = config
            .ports
            .iter()
            .map(|port| match qos.pfc.headroom_bytes {
                Threshold::Auto => auto_headroom(port, config.mtu),
                Threshold::Bytes(bytes) => charge(bytes as usize),
            })
            .collect();
        let groups = u64::from(qos.lossless_mask.count_ones());
        let reserved_headroom: u64 =
            config.ports.iter().zip(&headroom).filter(|(port, _)| port.enabled).map(|(_, h)| h * groups).sum();
        if groups > 0 && reserved_headroom >= config.buffer_bytes {
            return Err(format!(
                "headroom for {} lossless groups needs {reserved_headroom} bytes, more than switch.buffer_bytes {}",
                groups * config.ports.iter().filter(|p| p.enabled).count() as u64,
                config.buffer_bytes
            ));
        }
        let xoff = match qos.pfc.xoff_bytes {
            Threshold::Auto => Xoff::Dynamic((qos.pfc.alpha * 65536.0).round() as u64),
            Threshold::Bytes(bytes) => Xoff::Static(bytes),
        };
        Ok(Self {
            headroom,
            xoff,
            xon: qos.pfc.xon_bytes,
            mtu: u64::from(config.mtu),
            lossless_mask: qos.lossless_mask,
            reserved_headroom,
            shared_capacity: config.buffer_bytes - reserved_headroom,
        })
    }

    /// The XOFF point given the free shared buffer.
    #[inline]
    pub fn xoff(&self, shared_free: u64) -> u64 {
        match self.xoff {
            Xoff::Static(bytes) => bytes,
            // alpha in 16.16 fixed point: an integer multiply per frame, not two float
            // conversions.
            Xoff::Dynamic(alpha) => ((u128::from(shared_free) * u128::from(alpha)) >> 16) as u64,
        }
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
        // 100G, 3 m, MTU 9216: W = 2 x 9258 + 84 + (30 ns + 2017.28 ns) x 12.5 B/ns = 44191.
        assert_eq!(auto_headroom(&config.ports[0], 9216), 527 * CELL_BYTES);
        // 10G, 100 m: W = 18516 + 84 + (1000 + 2017.28) x 1.25 = 22371.6 -> 267 cells.
        assert_eq!(auto_headroom(&config.ports[1], 9216), 267 * CELL_BYTES);
        // Longer cables and faster links need more.
        assert!(auto_headroom(&config.ports[0], 1500) < auto_headroom(&config.ports[0], 9216));
    }

    #[test]
    fn plan_reserves_headroom_per_lossless_group() {
        let plan = PfcPlan::new(&config("", "")).unwrap();
        assert_eq!(plan.reserved_headroom, 2 * (527 + 267) * CELL_BYTES);
        assert_eq!(plan.shared_capacity, 16 * 1024 * 1024 - plan.reserved_headroom);
        // Dynamic: alpha 1 x free; XON two MTUs below.
        assert_eq!(plan.xoff(1_000_000), 1_000_000);
        assert_eq!(plan.xon(1_000_000), 1_000_000 - 2 * 9216);
        assert_eq!(plan.xon(10_000), 0);
    }

    #[test]
    fn static_thresholds_and_too_much_headroom() {
        let plan = PfcPlan::new(&config("[qos.pfc]\nxoff_bytes = 100000\nxon_bytes = 50000\nalpha = 0.5", "")).unwrap();
        assert_eq!(plan.xoff(0), 100_000);
        assert_eq!(plan.xon(100_000), 50_000);
        let err = Config::parse(&config_text("", "buffer_bytes = 300000"), "t.toml").unwrap_err();
        assert_eq!(err.field, "qos.pfc.headroom_bytes");
        assert!(err.problem.contains("406528"), "{err}");
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
