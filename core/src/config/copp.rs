//! The control-plane policing classes: their names in `[control.copp.<class>]`, stats and
//! logs, their priority order and their default rates, in one list (`copp_classes!`). The
//! classifier sorts punted frames into them and `pipeline::punt` polices and queues by them;
//! they live here, with the config, because the config names them and the pipeline reads the
//! config.
//!
//! Invariant: `CoppClass::ALL` is every class once, highest priority first, and a class's
//! index is its place in it.

/// Defines `CoppClass` from one list, so a class is added in one place: its variant, its name
/// in configs and stats, and its default rate (frames per second, also the default burst).
macro_rules! copp_classes {
    ($($(#[doc = $doc:literal])* $variant:ident => $name:literal, $pps:literal;)*) => {
        /// A control-plane policing class: why a frame goes to the control plane, and which
        /// policer and ring it takes there. Declared highest priority first.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum CoppClass {
            $($(#[doc = $doc])* $variant,)*
        }

        impl CoppClass {
            pub const COUNT: usize = [$($name),*].len();
            /// Every class, highest priority first (the order the control thread serves them).
            pub const ALL: [CoppClass; Self::COUNT] = [$(Self::$variant),*];

            /// The name used in `[control.copp.<name>]`, stats JSON, metrics and logs.
            pub fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)*
                }
            }

            /// The default rate, frames per second (SONiC's `copp_cfg.json`, see `docs/CONFIG.md`).
            pub fn default_pps(self) -> u64 {
                match self {
                    $(Self::$variant => $pps,)*
                }
            }
        }
    };
}

copp_classes! {
    /// BGP: TCP to or from port 179 (SONiC's `bgp`, `bgpv6` traps, group `queue4_group1`).
    Bgp => "bgp", 6000;
    /// BFD: UDP to port 3784 (single hop) or 4784 (multihop), as SONiC's `bfd`, `bfdv6`.
    Bfd => "bfd", 6000;
    /// Slow protocols (EtherType 0x8809): LACP, marker, OAM (SONiC's `lacp`).
    Lacp => "lacp", 6000;
    /// ARP (EtherType 0x0806) and IPv6 neighbour discovery (ICMPv6 133-137), as SONiC's `arp`
    /// trap covers `arp_req`, `arp_resp` and `neigh_discovery` (group `queue4_group2`).
    Arp => "arp", 600;
    /// LLDP (EtherType 0x88cc; SONiC's `queue4_group3`).
    Lldp => "lldp", 100;
    /// Any other IP to one of the switch's addresses, to IPv6 link-local or link-scope
    /// multicast, to IPv4 broadcast or 224.0.0.0/24: ping, SSH, MLD (SONiC's `ip2me`).
    Ip2me => "ip2me", 6000;
    /// A routed frame whose next hop has no resolved neighbour: the kernel resolves it and
    /// forwards the first packets (SONiC's `neighbor_miss`, `queue1_group3`).
    Glean => "glean", 200;
    /// TTL or hop limit 1 or less: the kernel sends the ICMP time exceeded (SONiC's
    /// `ttl_error`, in its `default` group).
    Ttl => "ttl", 600;
    /// IP whose route raceway mirrors but does not forward itself (a next hop on an interface
    /// that is no port, a `tos` or `from` route, a route of another table or rule): the
    /// kernel forwards it, slowly but where its own lookup says (as glean's rate).
    Kernel => "kernel", 200;
    /// Unicast IP with no route: the kernel sends ICMP destination unreachable (net; host
    /// unreachable comes from glean when the neighbour never answers). SONiC's ASICs drop
    /// these; Linux and VPP routers answer, and so does raceway (rate as SONiC's `default`).
    Unreachable => "unreachable", 600;
    /// IP longer than its egress port's MTU: the kernel sends fragmentation needed (IPv4 with
    /// DF) or Packet Too Big (IPv6) with the port's MTU, or fragments IPv4 without DF (SONiC's
    /// `l3_mtu_error`, in its `default` group).
    Mtu => "mtu", 600;
    /// An EtherType listed in `[control] punt_ethertypes` (SONiC's `default` group).
    Other => "other", 600;
}

impl CoppClass {
    pub fn index(self) -> usize {
        self as usize
    }

    /// The class named `name`, as in `[control.copp.<name>]`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|class| class.name() == name)
    }
}

/// A class's policer settings: frames per second and bucket depth in frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoppRate {
    pub pps: u64,
    pub burst: u64,
}

impl CoppRate {
    /// SONiC's defaults: the committed burst equals the rate (one second's worth).
    pub fn default_for(class: CoppClass) -> Self {
        Self { pps: class.default_pps(), burst: class.default_pps() }
    }
}
