//! A leaf-spine fabric of raceway switches and RoCEv2 hosts in one virtual time
//! (`raceway fabric`). Every switch is the real pipeline (`Switch`: classify, queue, PFC, ECN,
//! groups); links carry frames with serialisation and propagation delay; hosts run queue
//! pairs with DCQCN, send CNPs, obey PFC and tolerate reordering.
//!
//! The fabric file (`config/fabric/*.toml`) has a `[fabric]` table (the topology and the leaf
//! uplink group mode), an optional `[dcqcn]` table, and a switch template: the `[switch]`
//! (without name and MAC) and `[qos]` tables of a raceway config. The topology is a standard
//! 2-tier leaf-spine: leaf L has ports `h0..` to its hosts and `s0..` to the spines, routes
//! each host's /32 to its port and everything else to the uplink group `spines`; spine S has
//! ports `l0..` and routes leaf L's 10.L.0.0/16 to port `lL`. Host h of leaf L is 10.L.h.1.
//!
//! A fabric file may instead list its switches (`[[switch]]`: name and config file), hosts
//! (`[[host]]`) and links (`[[link]]`) for any topology its configs route. `config::fabric`
//! reads the file (TOML errors by line and key, the `[fabric]` table checked); this module
//! builds the fabric from it.
//!
//! Invariant: each switch's config is the template plus generated ports, routes and groups,
//! or a config file, validated by `Config::parse` like any config, so a fabric runs only
//! switches a user could run alone; a link's speed equals its switch ports'; errors name the
//! fabric file and the switch or link.

pub mod dcqcn;
pub mod engine;
pub mod flows;
pub mod host;
pub mod parallel;
pub mod ranks;
pub mod transport;
pub mod workload;

use crate::config::fabric::{FabricFile, FabricTable};
use crate::config::{Config, GroupMode};
use crate::error::InputError;
use dcqcn::DcqcnParams;
use serde::Deserialize;
use std::path::Path;
use transport::{TransportKind, TransportParams};

/// One end of a link: a switch port, or a host's NIC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Endpoint {
    Switch { switch: usize, port: usize },
    Host(usize),
}

/// A full-duplex link.
#[derive(Debug, Clone)]
pub struct Link {
    pub a: Endpoint,
    pub b: Endpoint,
    pub speed_mbps: u64,
    pub cable_m: f64,
}

/// A host: its leaf (the switch it is cabled to), index on the leaf, address and MAC.
#[derive(Debug, Clone)]
pub struct HostSpec {
    pub name: String,
    pub leaf: usize,
    /// Its leaf's pod in a three-tier fabric (0 in a leaf-spine, or a listed fabric).
    pub pod: usize,
    pub index: u8,
    /// The server it is a NIC of: in a rail-optimised fabric, `rails` hosts (one per rail)
    /// share one, as `server_nics` hosts do on one leaf; otherwise each host is its own.
    pub server: usize,
    /// Which of its server's NICs it is: its rail in a rail-optimised fabric (0 when each
    /// host is its own server).
    pub rail: u8,
    pub address: std::net::Ipv4Addr,
    pub mac: crate::wire::ethernet::MacAddress,
}

/// A fabric ready to run: switch configs, hosts, links, DCQCN parameters.
#[derive(Debug, Clone)]
pub struct Fabric {
    pub name: String,
    /// Leaves first, then spines pod by pod, then cores (generated), or in the file's order
    /// (listed).
    pub switches: Vec<Config>,
    pub hosts: Vec<HostSpec>,
    pub links: Vec<Link>,
    pub dcqcn: DcqcnParams,
    /// How hosts recover losses (`[fabric] transport`, `rto_us`).
    pub transport: TransportParams,
    /// A generated fabric's cable length per tier above the leaves: leaf to spine, then spine
    /// to core in a three-tier fabric; none for a listed one.
    pub uplink_cables_m: Vec<f64>,
}

/// A generated leaf's number as the octet of its hosts' addresses (`10.LEAF.HOST.1`): a
/// shape has at most 256 leaves.
fn octet(leaf: u16) -> u8 {
    u8::try_from(leaf).expect("at most 256 leaves")
}

/// A generated fabric's shape: `pods` pods of `leaves` leaves and `spines` spines each, and
/// `cores` core switches in `spines` planes (a pod's spine j connects to every core of plane
/// j); one pod and no cores is a leaf-spine. With `rails` above 1, each pod's leaves form
/// groups of `rails` rail leaves, and server k of a group has NIC i on the group's leaf i,
/// port `hk`: the cabling is a leaf-spine's, the hosts are numbered server by server. With
/// `server_nics` above 1, a server's NICs sit on consecutive ports of one leaf instead.
struct Shape {
    pods: u8,
    rails: u8,
    server_nics: u8,
    leaves: u8,
    spines: u8,
    cores: u8,
    core_speed_gbps: f64,
    core_cable_m: f64,
}

impl Shape {
    fn of(topology: &FabricTable, leaves: u8, spines: u8, hosts_per_leaf: u8, file: &str) -> Result<Self, InputError> {
        let pods = topology.pods.unwrap_or(1);
        let cores = topology.cores.unwrap_or(0);
        let rails = topology.rails.unwrap_or(1);
        if rails == 0 || !leaves.is_multiple_of(rails) {
            return Err(InputError::new(
                file,
                "fabric.rails",
                format!(
                    "{rails} does not divide leaves ({leaves}): a server's NICs go one to each leaf of a group of rails leaves in its pod"
                ),
            ));
        }
        if pods == 0 || pods > 64 {
            return Err(InputError::new(file, "fabric.pods", format!("{pods} is not 1-64")));
        }
        if pods > 1 && cores == 0 {
            return Err(InputError::new(file, "fabric.cores", "pods need core switches to reach each other"));
        }
        if cores > 64 || !cores.is_multiple_of(spines) {
            return Err(InputError::new(
                file,
                "fabric.cores",
                format!(
                    "{cores} is not 1-64 and a multiple of spines ({spines}): each spine of a pod has a plane of cores"
                ),
            ));
        }
        if usize::from(pods) * usize::from(leaves) > 256 {
            return Err(InputError::new(
                file,
                "fabric.pods",
                format!("{pods} pods of {leaves} leaves are more than 256 leaves (hosts are 10.LEAF.HOST.1)"),
            ));
        }
        let core_speed_gbps = topology.core_speed_gbps.unwrap_or(topology.spine_speed_gbps);
        let core_cable_m = topology.core_cable_m.unwrap_or(topology.spine_cable_m);
        if !(core_speed_gbps.is_finite() && core_speed_gbps > 0.0 && core_cable_m.is_finite() && core_cable_m >= 0.0) {
            return Err(InputError::new(file, "fabric.core_speed_gbps", "core speed and cable must be positive"));
        }
        let server_nics = topology.server_nics.unwrap_or(1);
        if server_nics == 0 || !hosts_per_leaf.is_multiple_of(server_nics) || (server_nics > 1 && rails > 1) {
            return Err(InputError::new(
                file,
                "fabric.server_nics",
                format!(
                    "{server_nics} does not divide hosts_per_leaf ({hosts_per_leaf}), or rails is given too: a server's NICs share a leaf, or are one per rail"
                ),
            ));
        }
        Ok(Self { pods, rails, server_nics, leaves, spines, cores, core_speed_gbps, core_cable_m })
    }

    /// Leaves in all, up to 256: `10.LEAF` numbers them across pods (`octet`).
    fn leaves(&self) -> u16 {
        u16::from(self.pods) * u16::from(self.leaves)
    }

    fn pod_of(&self, leaf: u16) -> u8 {
        (leaf / u16::from(self.leaves)) as u8
    }

    fn leaves_of(&self, pod: u8) -> impl Iterator<Item = u16> {
        let first = u16::from(pod) * u16::from(self.leaves);
        first..first + u16::from(self.leaves)
    }

    /// The host cabled to port `hINDEX` of `leaf`: hosts are numbered server by server, a
    /// server's NICs by rail (leaf by leaf when there is one rail).
    fn host_at(&self, leaf: u16, index: u8, hosts_per_leaf: u8) -> HostSpecPlace {
        if self.rails == 1 {
            let host = usize::from(leaf) * usize::from(hosts_per_leaf) + usize::from(index);
            let nics = usize::from(self.server_nics);
            return HostSpecPlace { host, server: host / nics, rail: (host % nics) as u8 };
        }
        let rails = u16::from(self.rails);
        let (group, rail) = (usize::from(leaf / rails), (leaf % rails) as u8);
        let server = group * usize::from(hosts_per_leaf) + usize::from(index);
        HostSpecPlace { host: server * usize::from(self.rails) + usize::from(rail), server, rail }
    }

    /// Cores per plane: each spine of a pod connects to this many.
    fn per_plane(&self) -> u8 {
        self.cores / self.spines
    }

    fn spine_name(&self, pod: u8, spine: u8) -> String {
        if self.cores > 0 {
            format!("spine{pod}-{spine}")
        } else {
            format!("spine{spine}")
        }
    }

    fn spine_mac(&self, pod: u8, spine: u8) -> String {
        mac(0x30, spine, pod)
    }

    fn name(&self, leaves: u8, spines: u8) -> String {
        let shape = if self.cores > 0 {
            format!("clos-{}x{leaves}x{spines}x{}", self.pods, self.cores)
        } else {
            format!("leaf-spine-{leaves}x{spines}")
        };
        if self.rails > 1 {
            format!("{shape}-rails{}", self.rails)
        } else if self.server_nics > 1 {
            format!("{shape}-nics{}", self.server_nics)
        } else {
            shape
        }
    }
}

/// Where `Shape::host_at` puts a host: its number, server and rail.
struct HostSpecPlace {
    host: usize,
    server: usize,
    rail: u8,
}

/// `[fabric] transport`, `rto_us` and `rto_low_us`.
fn transport_of(topology: &FabricTable, file: &str) -> Result<TransportParams, InputError> {
    let mut params = TransportParams::default();
    if let Some(word) = &topology.transport {
        params.kind =
            TransportKind::parse(word).map_err(|problem| InputError::new(file, "fabric.transport", problem))?;
    }
    for (field, value) in [("fabric.rto_us", topology.rto_us), ("fabric.rto_low_us", topology.rto_low_us)] {
        if let Some(us) = value.filter(|us| !(1.0..=1e6).contains(us)) {
            return Err(InputError::new(file, field, format!("{us} is not between 1 and 1000000")));
        }
    }
    (params.rto_us, params.rto_low_us) = (topology.rto_us, topology.rto_low_us);
    Ok(params)
}

fn mac(kind: u8, a: u8, b: u8) -> String {
    format!("02:00:00:{kind:02x}:{a:02x}:{b:02x}")
}

impl Fabric {
    /// Reads a fabric file; `mode` overrides the uplink group mode.
    pub fn load(path: &Path, mode: Option<GroupMode>) -> Result<Self, InputError> {
        let text = std::fs::read_to_string(path)
            .map_err(|err| InputError::new(path.display(), "", format!("cannot read: {err}")))?;
        let base = path.parent().unwrap_or(Path::new("."));
        Self::parse_in(&text, &path.display().to_string(), base, mode)
    }

    /// Parses a fabric whose switch configs (if listed) are relative to the working directory.
    pub fn parse(text: &str, file: &str, mode: Option<GroupMode>) -> Result<Self, InputError> {
        Self::parse_in(text, file, Path::new("."), mode)
    }

    /// Parses a fabric; listed switch configs are read relative to `base`.
    pub fn parse_in(text: &str, file: &str, base: &Path, mode: Option<GroupMode>) -> Result<Self, InputError> {
        let FabricFile { topology, dcqcn, rest: table } = FabricFile::parse(text, file)?;
        let transport = transport_of(&topology, file)?;
        let dcqcn = match dcqcn {
            Some(dcqcn) => DcqcnParams::from_table(dcqcn),
            None => Ok(DcqcnParams::default()),
        }
        .map_err(|(field, problem)| InputError::new(file, field, problem))?;
        if table.get("switch").is_some_and(toml::Value::is_array) {
            return explicit(topology, table, dcqcn, file, base, mode).map(|fabric| Fabric { transport, ..fabric });
        }
        let (Some(leaves), Some(spines), Some(hosts_per_leaf)) =
            (topology.leaves, topology.spines, topology.hosts_per_leaf)
        else {
            return Err(InputError::new(
                file,
                "fabric",
                "give leaves, spines and hosts_per_leaf, or list [[switch]], [[host]] and [[link]]",
            ));
        };
        for (field, value) in [("fabric.leaves", leaves), ("fabric.spines", spines)] {
            if value == 0 || value > 64 {
                return Err(InputError::new(file, field.to_string(), format!("{value} is not 1-64")));
            }
        }
        if hosts_per_leaf == 0 || hosts_per_leaf > 200 {
            return Err(InputError::new(file, "fabric.hosts_per_leaf", format!("{hosts_per_leaf} is not 1-200")));
        }
        for key in ["port", "route", "group"] {
            if table.contains_key(key) {
                return Err(InputError::new(
                    file,
                    key.to_string(),
                    "the fabric generates ports, routes and groups; remove it",
                ));
            }
        }
        let shape = Shape::of(&topology, leaves, spines, hosts_per_leaf, file)?;
        let mode_name = mode.map_or_else(|| topology.mode.clone(), |mode| mode.name().to_string());
        let mut switches = Vec::new();
        let mut links = Vec::new();
        let mut hosts = Vec::new();
        // Server by server: each group of rails leaves, slot by slot, rail by rail.
        for group in 0..shape.leaves() / u16::from(shape.rails) {
            for index in 0..hosts_per_leaf {
                for rail in 0..u16::from(shape.rails) {
                    let leaf = group * u16::from(shape.rails) + rail;
                    let place = shape.host_at(leaf, index, hosts_per_leaf);
                    debug_assert_eq!(place.host, hosts.len());
                    let name = if shape.rails > 1 || shape.server_nics > 1 {
                        format!("server{}-nic{}", place.server, place.rail)
                    } else {
                        format!("leaf{leaf}-h{index}")
                    };
                    hosts.push(HostSpec {
                        name,
                        leaf: usize::from(leaf),
                        pod: usize::from(shape.pod_of(leaf)),
                        index,
                        server: place.server,
                        rail: place.rail,
                        address: std::net::Ipv4Addr::new(10, octet(leaf), index, 1),
                        mac: crate::wire::ethernet::MacAddress([0x02, 0, 0, 0x10, octet(leaf), index]),
                    });
                }
            }
        }
        let speed = |gbps: f64| (gbps * 1000.0).round() as u64;
        let uplinks = |name: &str, prefix: char, count: u8| {
            let mut group = toml::Table::new();
            group.insert("name".into(), name.into());
            group.insert(
                "ports".into(),
                toml::Value::Array((0..count).map(|i| format!("{prefix}{i}").into()).collect()),
            );
            group.insert("mode".into(), mode_name.clone().into());
            group
        };
        for leaf in 0..shape.leaves() {
            let mut ports = Vec::new();
            let mut routes = Vec::new();
            for index in 0..hosts_per_leaf {
                ports.push(port_table(
                    &format!("h{index}"),
                    topology.host_speed_gbps,
                    topology.host_cable_m,
                    &mac(0x10, octet(leaf), index),
                ));
                routes.push(route_table(&format!("10.{leaf}.{index}.1/32"), Some(&format!("h{index}")), None));
            }
            for spine in 0..spines {
                ports.push(port_table(
                    &format!("s{spine}"),
                    topology.spine_speed_gbps,
                    topology.spine_cable_m,
                    &shape.spine_mac(shape.pod_of(leaf), spine),
                ));
            }
            routes.push(route_table("0.0.0.0/0", None, Some("spines")));
            let groups = vec![uplinks("spines", 's', spines)];
            let config =
                switch_config(&table, &format!("leaf{leaf}"), &mac(0x20, octet(leaf), 0), ports, routes, groups, file)?;
            switches.push(config);
        }
        for pod in 0..shape.pods {
            for spine in 0..spines {
                let mut ports = Vec::new();
                let mut routes = Vec::new();
                for (index, leaf) in shape.leaves_of(pod).enumerate() {
                    ports.push(port_table(
                        &format!("l{index}"),
                        topology.spine_speed_gbps,
                        topology.spine_cable_m,
                        &mac(0x20, octet(leaf), 0),
                    ));
                    routes.push(route_table(&format!("10.{leaf}.0.0/16"), Some(&format!("l{index}")), None));
                }
                let mut groups = vec![];
                if shape.cores > 0 {
                    for plane_index in 0..shape.per_plane() {
                        let core = spine * shape.per_plane() + plane_index;
                        ports.push(port_table(
                            &format!("c{plane_index}"),
                            shape.core_speed_gbps,
                            shape.core_cable_m,
                            &mac(0x40, core, 0),
                        ));
                    }
                    routes.push(route_table("0.0.0.0/0", None, Some("cores")));
                    groups.push(uplinks("cores", 'c', shape.per_plane()));
                }
                let config = switch_config(
                    &table,
                    &shape.spine_name(pod, spine),
                    &shape.spine_mac(pod, spine),
                    ports,
                    routes,
                    groups,
                    file,
                )?;
                switches.push(config);
            }
        }
        for core in 0..shape.cores {
            let mut ports = Vec::new();
            let mut routes = Vec::new();
            for pod in 0..shape.pods {
                let port = format!("p{pod}");
                ports.push(port_table(
                    &port,
                    shape.core_speed_gbps,
                    shape.core_cable_m,
                    &shape.spine_mac(pod, core / shape.per_plane()),
                ));
                for leaf in shape.leaves_of(pod) {
                    routes.push(route_table(&format!("10.{leaf}.0.0/16"), Some(&port), None));
                }
            }
            let config =
                switch_config(&table, &format!("core{core}"), &mac(0x40, core, 0), ports, routes, vec![], file)?;
            switches.push(config);
        }
        let total_leaves = usize::from(shape.leaves());
        let spine_switch =
            |pod: u8, spine: u8| total_leaves + usize::from(pod) * usize::from(spines) + usize::from(spine);
        for leaf in 0..shape.leaves() {
            for index in 0..hosts_per_leaf {
                links.push(Link {
                    a: Endpoint::Host(shape.host_at(leaf, index, hosts_per_leaf).host),
                    b: Endpoint::Switch { switch: usize::from(leaf), port: usize::from(index) },
                    speed_mbps: speed(topology.host_speed_gbps),
                    cable_m: topology.host_cable_m,
                });
            }
            let pod = shape.pod_of(leaf);
            for spine in 0..spines {
                links.push(Link {
                    a: Endpoint::Switch {
                        switch: usize::from(leaf),
                        port: usize::from(hosts_per_leaf) + usize::from(spine),
                    },
                    b: Endpoint::Switch {
                        switch: spine_switch(pod, spine),
                        port: usize::from(leaf) - usize::from(pod) * usize::from(leaves),
                    },
                    speed_mbps: speed(topology.spine_speed_gbps),
                    cable_m: topology.spine_cable_m,
                });
            }
        }
        let first_core = total_leaves + usize::from(shape.pods) * usize::from(spines);
        for pod in 0..shape.pods {
            for spine in 0..spines {
                for plane_index in 0..shape.per_plane() {
                    let core = spine * shape.per_plane() + plane_index;
                    links.push(Link {
                        a: Endpoint::Switch {
                            switch: spine_switch(pod, spine),
                            port: usize::from(leaves) + usize::from(plane_index),
                        },
                        b: Endpoint::Switch { switch: first_core + usize::from(core), port: usize::from(pod) },
                        speed_mbps: speed(shape.core_speed_gbps),
                        cable_m: shape.core_cable_m,
                    });
                }
            }
        }
        let mut uplink_cables_m = vec![topology.spine_cable_m];
        if shape.cores > 0 {
            uplink_cables_m.push(shape.core_cable_m);
        }
        let name = topology.name.clone().unwrap_or_else(|| shape.name(leaves, spines));
        Ok(Self { name, switches, hosts, links, dcqcn, transport, uplink_cables_m })
    }

    /// The group mode of the fabric's uplinks: the first group's (ECMP if there is none).
    pub fn mode(&self) -> GroupMode {
        self.switches.iter().flat_map(|c| c.groups.iter()).map(|g| g.mode).next().unwrap_or(GroupMode::Ecmp)
    }

    /// The smallest switch MTU: the largest IP packet every switch forwards.
    pub fn mtu(&self) -> u32 {
        self.switches.iter().map(|c| c.mtu).min().unwrap_or(0)
    }

    /// What `raceway check` prints of a fabric: its hosts and switches by tier (leaves: the
    /// switches with hosts; then the switches linked to them; then those linked to those),
    /// each tier's capacity down and up and their ratio (its oversubscription), and the
    /// bisection bandwidth: what half the hosts can send to the other half through the
    /// tightest tier (half of each tier's uplinks), against half the hosts at line rate.
    pub fn shape_report(&self) -> String {
        let switch_of = |end: Endpoint| match end {
            Endpoint::Switch { switch, .. } => Some(switch),
            Endpoint::Host(_) => None,
        };
        let mut tier = vec![0usize; self.switches.len()];
        let mut host_mbps = 0u64;
        for link in &self.links {
            if let (Some(switch), None) | (None, Some(switch)) = (switch_of(link.a), switch_of(link.b)) {
                tier[switch] = 1;
                host_mbps += link.speed_mbps;
            }
        }
        for level in 2..=8 {
            for link in &self.links {
                if let (Some(a), Some(b)) = (switch_of(link.a), switch_of(link.b)) {
                    for (low, high) in [(a, b), (b, a)] {
                        if tier[low] == level - 1 && tier[high] == 0 {
                            tier[high] = level;
                        }
                    }
                }
            }
        }
        let tiers = tier.iter().copied().max().unwrap_or(0);
        let names = ["leaves", "spines", "cores"];
        let gbps = |mbps: u64| mbps as f64 / 1000.0;
        let mut text = format!(
            "fabric {}: {} hosts, {} switches in {tiers} tiers\n",
            self.name,
            self.hosts.len(),
            self.switches.len()
        );
        let mut tightest = gbps(host_mbps) / 2.0;
        for level in 1..=tiers {
            let count = tier.iter().filter(|&&t| t == level).count();
            let (mut down, mut up, mut down_links, mut up_links) = (0u64, 0u64, 0usize, 0usize);
            for link in &self.links {
                let tiers_of = (switch_of(link.a).map_or(0, |s| tier[s]), switch_of(link.b).map_or(0, |s| tier[s]));
                for (mine, other) in [tiers_of, (tiers_of.1, tiers_of.0)] {
                    if mine == level && other + 1 == level {
                        (down, down_links) = (down + link.speed_mbps, down_links + 1);
                    } else if mine == level && other == level + 1 {
                        (up, up_links) = (up + link.speed_mbps, up_links + 1);
                    }
                }
            }
            let name = names.get(level - 1).copied().unwrap_or("switches");
            text +=
                &format!("  tier {level} ({name}): {count} switches, {down_links} links down ({:.0} Gb/s)", gbps(down));
            if up_links > 0 {
                text += &format!(
                    ", {up_links} up ({:.0} Gb/s): oversubscription {:.2}:1",
                    gbps(up),
                    down as f64 / up as f64
                );
                tightest = tightest.min(gbps(up) / 2.0);
            }
            text += "\n";
        }
        let nics = self.hosts.iter().map(|host| usize::from(host.rail) + 1).max().unwrap_or(1);
        if nics > 1 {
            let servers = self.hosts.iter().map(|host| host.server + 1).max().unwrap_or(0);
            let on_rails = self.hosts.iter().any(|host| host.server == 0 && host.leaf != self.hosts[0].leaf);
            text += &if on_rails {
                format!(
                    "  rails: {servers} servers of {nics} NICs, NIC i of each on rail leaf i of its group of {nics} leaves\n"
                )
            } else {
                format!("  servers: {servers} servers of {nics} NICs, each server's on one leaf\n")
            };
        }
        text += &format!(
            "  bisection bandwidth: {tightest:.0} Gb/s of {:.0} Gb/s (half the hosts at line rate)\n",
            gbps(host_mbps) / 2.0
        );
        text
    }

    /// "leaf0:s1" or "leaf0-h1" for a link end.
    pub fn endpoint_name(&self, end: Endpoint) -> String {
        match end {
            Endpoint::Switch { switch, port } => {
                let config = &self.switches[switch];
                format!("{}:{}", config.name, config.ports[port].name)
            }
            Endpoint::Host(host) => self.hosts[host].name.clone(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSwitchEntry {
    name: String,
    /// A raceway config, relative to the fabric file.
    config: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHostEntry {
    name: String,
    address: std::net::Ipv4Addr,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLink {
    /// `switch:port` or a host name.
    a: String,
    b: String,
    speed_gbps: Option<f64>,
    cable_m: Option<f64>,
}

/// A fabric listed switch by switch: `[[switch]]` (name, config file), `[[host]]` (name,
/// address) and `[[link]]` (two ends, `switch:port` or a host; speed and cable default to the
/// switch port's and must agree with it, so the switch shapes what the link carries).
fn explicit(
    topology: FabricTable,
    mut table: toml::Table,
    dcqcn: DcqcnParams,
    file: &str,
    base: &Path,
    mode: Option<GroupMode>,
) -> Result<Fabric, InputError> {
    fn entries<T: serde::de::DeserializeOwned>(
        table: &mut toml::Table,
        key: &str,
        file: &str,
    ) -> Result<Vec<T>, InputError> {
        match table.remove(key) {
            Some(value) => value
                .try_into()
                .map_err(|err: toml::de::Error| InputError::new(file, key.to_string(), err.message().to_string())),
            None => Ok(Vec::new()),
        }
    }
    let generated_only = [
        ("fabric.pods", topology.pods.is_some()),
        ("fabric.cores", topology.cores.is_some()),
        ("fabric.core_speed_gbps", topology.core_speed_gbps.is_some()),
        ("fabric.core_cable_m", topology.core_cable_m.is_some()),
        ("fabric.rails", topology.rails.is_some()),
        ("fabric.server_nics", topology.server_nics.is_some()),
    ];
    if let Some((field, _)) = generated_only.iter().find(|(_, given)| *given) {
        return Err(InputError::new(
            file,
            field.to_string(),
            "shapes a generated fabric; a listed fabric is shaped by its [[link]]s",
        ));
    }
    let switch_entries: Vec<RawSwitchEntry> = entries(&mut table, "switch", file)?;
    let host_entries: Vec<RawHostEntry> = entries(&mut table, "host", file)?;
    let link_entries: Vec<RawLink> = entries(&mut table, "link", file)?;
    if let Some(key) = table.keys().next() {
        return Err(InputError::new(file, key.to_string(), "not a fabric table (fabric, dcqcn, switch, host, link)"));
    }
    let mut configs: Vec<Config> = Vec::new();
    for (index, entry) in switch_entries.iter().enumerate() {
        let mut config = Config::load(&base.join(&entry.config))?;
        if config.name != entry.name {
            return Err(InputError::new(
                file,
                format!("switch[{index}].name"),
                format!("'{}' but {} names it '{}'", entry.name, entry.config, config.name),
            ));
        }
        if configs.iter().any(|c| c.name == entry.name) {
            return Err(InputError::new(
                file,
                format!("switch[{index}].name"),
                format!("'{}' is listed twice", entry.name),
            ));
        }
        if let Some(mode) = mode {
            for group in &mut config.groups {
                group.mode = mode;
            }
        }
        configs.push(config);
    }
    if configs.is_empty() {
        return Err(InputError::new(file, "switch", "list at least one switch"));
    }
    let mut hosts: Vec<HostSpec> = Vec::new();
    for (index, entry) in host_entries.iter().enumerate() {
        if hosts.iter().any(|h| h.name == entry.name) || configs.iter().any(|c| c.name == entry.name) {
            return Err(InputError::new(
                file,
                format!("host[{index}].name"),
                format!("'{}' is already a host or switch", entry.name),
            ));
        }
        hosts.push(HostSpec {
            name: entry.name.clone(),
            leaf: 0,
            pod: 0,
            index: 0,
            server: index,
            rail: 0,
            address: entry.address,
            mac: crate::wire::ethernet::MacAddress([0x02, 0, 0, 0x10, (index >> 8) as u8, index as u8]),
        });
    }
    let resolve = |text: &str, field: &str| -> Result<(Endpoint, Option<(u64, f64)>), InputError> {
        if let Some((switch, port)) = text.split_once(':') {
            let index = configs
                .iter()
                .position(|c| c.name == switch)
                .ok_or_else(|| InputError::new(file, field.to_string(), format!("no switch '{switch}'")))?;
            let config = &configs[index];
            let port_index = config.port_index(port).ok_or_else(|| {
                InputError::new(file, field.to_string(), format!("switch '{switch}' has no port '{port}'"))
            })?;
            let spec = &config.ports[port_index];
            Ok((Endpoint::Switch { switch: index, port: port_index }, Some((spec.speed_mbps, spec.cable_m))))
        } else {
            let index = hosts.iter().position(|h| h.name == text).ok_or_else(|| {
                InputError::new(file, field.to_string(), format!("no host '{text}' (a switch port is switch:port)"))
            })?;
            Ok((Endpoint::Host(index), None))
        }
    };
    let mut links = Vec::new();
    let mut used: Vec<Endpoint> = Vec::new();
    let mut host_switch = vec![None; hosts.len()];
    let mut host_mac = vec![None; hosts.len()];
    for (index, link) in link_entries.iter().enumerate() {
        let (a, a_port) = resolve(&link.a, &format!("link[{index}].a"))?;
        let (b, b_port) = resolve(&link.b, &format!("link[{index}].b"))?;
        for end in [a, b] {
            if used.contains(&end) {
                return Err(InputError::new(file, format!("link[{index}]"), "an end is already linked"));
            }
            used.push(end);
        }
        let ports: Vec<(u64, f64)> = [a_port, b_port].into_iter().flatten().collect();
        let Some(&(speed_mbps, cable_m)) = ports.first() else {
            return Err(InputError::new(
                file,
                format!("link[{index}]"),
                "a link needs a switch port at one end at least",
            ));
        };
        if ports.iter().any(|&(speed, _)| speed != speed_mbps) {
            return Err(InputError::new(file, format!("link[{index}]"), "the two ports' speed_gbps differ"));
        }
        if let Some(gbps) = link.speed_gbps {
            if (gbps * 1000.0).round() as u64 != speed_mbps {
                return Err(InputError::new(
                    file,
                    format!("link[{index}].speed_gbps"),
                    format!("{gbps} differs from the port's speed_gbps"),
                ));
            }
        }
        let cable_m = link.cable_m.unwrap_or(cable_m);
        if !(cable_m.is_finite() && cable_m >= 0.0) {
            return Err(InputError::new(file, format!("link[{index}].cable_m"), format!("{cable_m} is not a length")));
        }
        for (end, other) in [(a, b), (b, a)] {
            let Endpoint::Switch { switch, port } = end else { continue };
            let config = &configs[switch];
            let peer_mac = config.ports[port].peer_mac;
            match other {
                // The host answers to the MAC its switch expects, if the port names one.
                Endpoint::Host(host) => {
                    host_switch[host] = Some(switch);
                    host_mac[host] = peer_mac;
                }
                // A switch routes only frames sent to its own MAC, as a real one does.
                Endpoint::Switch { switch: peer, .. } => match peer_mac {
                    Some(mac) if mac != configs[peer].mac => {
                        return Err(InputError::new(
                            file,
                            format!("link[{index}]"),
                            format!(
                                "port '{}' of switch '{}' has peer_mac {mac}, but switch '{}' has mac {}: \
                                 it would drop the frames as not_router_mac",
                                config.ports[port].name, config.name, configs[peer].name, configs[peer].mac
                            ),
                        ))
                    }
                    _ => {}
                },
            }
        }
        links.push(Link { a, b, speed_mbps, cable_m });
    }
    for (host, switch) in host_switch.iter().enumerate() {
        let Some(switch) = switch else {
            return Err(InputError::new(file, "host", format!("'{}' has no link to a switch", hosts[host].name)));
        };
        hosts[host].leaf = *switch;
        if let Some(mac) = host_mac[host] {
            hosts[host].mac = mac;
        }
    }
    // A port without a cable would send into nothing: the engine needs every port linked.
    for (index, config) in configs.iter().enumerate() {
        let unlinked = config
            .ports
            .iter()
            .enumerate()
            .find(|(port, _)| !used.contains(&Endpoint::Switch { switch: index, port: *port }));
        if let Some((_, port)) = unlinked {
            return Err(InputError::new(
                file,
                "link",
                format!(
                    "port '{}' of switch '{}' has no link (every port of a listed switch needs one)",
                    port.name, config.name
                ),
            ));
        }
    }
    let name = topology.name.unwrap_or_else(|| "fabric".to_string());
    Ok(Fabric {
        name,
        switches: configs,
        hosts,
        links,
        dcqcn,
        transport: TransportParams::default(),
        uplink_cables_m: vec![],
    })
}

fn port_table(name: &str, speed_gbps: f64, cable_m: f64, peer_mac: &str) -> toml::Table {
    let mut port = toml::Table::new();
    port.insert("name".into(), name.into());
    port.insert("speed_gbps".into(), speed_gbps.into());
    port.insert("cable_m".into(), cable_m.into());
    port.insert("peer_mac".into(), peer_mac.into());
    port
}

fn route_table(prefix: &str, port: Option<&str>, group: Option<&str>) -> toml::Table {
    let mut route = toml::Table::new();
    route.insert("prefix".into(), prefix.into());
    if let Some(port) = port {
        route.insert("port".into(), port.into());
    }
    if let Some(group) = group {
        route.insert("group".into(), group.into());
    }
    route
}

/// The template plus a switch's name, MAC, ports, routes and groups, validated as a config.
fn switch_config(
    template: &toml::Table,
    name: &str,
    mac: &str,
    ports: Vec<toml::Table>,
    routes: Vec<toml::Table>,
    groups: Vec<toml::Table>,
    file: &str,
) -> Result<Config, InputError> {
    let mut table = template.clone();
    let switch = table.entry("switch").or_insert_with(|| toml::Value::Table(toml::Table::new()));
    let Some(switch) = switch.as_table_mut() else { return Err(InputError::new(file, "switch", "must be a table")) };
    for key in ["name", "mac"] {
        if switch.contains_key(key) {
            return Err(InputError::new(file, format!("switch.{key}"), "set per switch by the fabric; remove it"));
        }
    }
    switch.insert("name".into(), name.into());
    switch.insert("mac".into(), mac.into());
    let array = |tables: Vec<toml::Table>| toml::Value::Array(tables.into_iter().map(toml::Value::Table).collect());
    table.insert("port".into(), array(ports));
    table.insert("route".into(), array(routes));
    if !groups.is_empty() {
        table.insert("group".into(), array(groups));
    }
    let text = toml::to_string(&table).map_err(|err| InputError::new(file, name.to_string(), err.to_string()))?;
    Config::parse(&text, &format!("{file} ({name})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 2x2 leaf-spine most fabric tests run.
    pub(crate) fn small() -> String {
        crate::testing::leaf_spine("small", "", 400_000)
    }

    /// Two pods of two leaves and two spines, four cores in two planes of two.
    pub(crate) fn clos() -> String {
        crate::testing::leaf_spine("clos", "pods = 2\ncores = 4\ncore_cable_m = 50", 400_000)
    }

    #[test]
    fn a_three_tier_clos_is_generated_in_pods_with_a_plane_of_cores_per_spine() {
        let fabric = Fabric::parse(&clos(), "clos.toml", None).unwrap();
        let names: Vec<&str> = fabric.switches.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "leaf0", "leaf1", "leaf2", "leaf3", "spine0-0", "spine0-1", "spine1-0", "spine1-1", "core0", "core1",
                "core2", "core3"
            ]
        );
        assert_eq!(fabric.hosts.len(), 8);
        assert_eq!((fabric.hosts[5].leaf, fabric.hosts[5].pod), (2, 1));
        assert_eq!(fabric.hosts[5].address, std::net::Ipv4Addr::new(10, 2, 1, 1));
        // 8 host links, 4 leaves x 2 spines, 4 spines x 2 cores of their plane.
        assert_eq!(fabric.links.len(), 24);
        let ends: Vec<(String, String)> =
            fabric.links.iter().map(|l| (fabric.endpoint_name(l.a), fabric.endpoint_name(l.b))).collect();
        assert!(ends.contains(&("leaf3:s1".into(), "spine1-1:l1".into())), "{ends:?}");
        assert!(ends.contains(&("spine1-1:c1".into(), "core3:p1".into())), "spine 1 of a pod: plane 1, cores 2 and 3");
        assert!(!ends.iter().any(|(a, b)| a.starts_with("spine0-0:c") && b.starts_with("core2")), "not across planes");
        assert_eq!(fabric.uplink_cables_m, [20.0, 50.0]);
        let core2 = &fabric.switches[10];
        let routes: Vec<String> = core2.routes.iter().map(|r| format!("{}", r.prefix)).collect();
        assert_eq!(routes, ["10.0.0.0/16", "10.1.0.0/16", "10.2.0.0/16", "10.3.0.0/16"]);
        assert_eq!(fabric.switches[6].groups[0].name, "cores", "a spine's uplinks to its plane");
        let unnamed = clos().replace("name = \"clos\"\n", "");
        assert_eq!(Fabric::parse(&unnamed, "clos.toml", None).unwrap().name, "clos-2x2x2x4");
        // A leaf-spine has one tier above its leaves.
        assert_eq!(Fabric::parse(&small(), "small.toml", None).unwrap().uplink_cables_m.len(), 1);
    }

    #[test]
    fn check_prints_the_tiers_their_oversubscription_and_the_bisection_bandwidth() {
        let clos = Fabric::parse(&clos(), "clos.toml", None).unwrap();
        assert_eq!(
            clos.shape_report(),
            "fabric clos: 8 hosts, 12 switches in 3 tiers\n\
             \x20 tier 1 (leaves): 4 switches, 8 links down (800 Gb/s), 8 up (800 Gb/s): oversubscription 1.00:1\n\
             \x20 tier 2 (spines): 4 switches, 8 links down (800 Gb/s), 8 up (800 Gb/s): oversubscription 1.00:1\n\
             \x20 tier 3 (cores): 4 switches, 8 links down (800 Gb/s)\n\
             \x20 bisection bandwidth: 400 Gb/s of 400 Gb/s (half the hosts at line rate)\n"
        );
        // Four hosts a leaf over two uplinks: 2:1, and half the leaves' uplinks are the cut.
        let text = crate::testing::leaf_spine("over", "", 400_000).replace("hosts_per_leaf = 2", "hosts_per_leaf = 4");
        let report = Fabric::parse(&text, "over.toml", None).unwrap().shape_report();
        assert!(
            report.contains(
                "tier 1 (leaves): 2 switches, 8 links down (800 Gb/s), 4 up (400 Gb/s): oversubscription 2.00:1"
            ),
            "{report}"
        );
        assert!(report.contains("bisection bandwidth: 200 Gb/s of 400 Gb/s"), "{report}");
    }

    /// 16 pods of 16 leaves: 256 leaves, the last one's hosts 10.255.h.1, its /16 routed
    /// by every core.
    #[test]
    fn a_clos_of_256_leaves_numbers_the_last_one_255() {
        let text =
            crate::testing::leaf_spine("wide", "pods = 16\ncores = 2", 400_000).replace("leaves = 2", "leaves = 16");
        let fabric = Fabric::parse(&text, "wide.toml", None).unwrap();
        let last = fabric.hosts.last().unwrap();
        assert_eq!((last.leaf, last.pod, last.address), (255, 15, std::net::Ipv4Addr::new(10, 255, 1, 1)));
        assert_eq!(fabric.switches.iter().filter(|c| c.name.starts_with("leaf")).count(), 256);
        let core = fabric.switches.iter().find(|c| c.name == "core1").unwrap();
        assert_eq!(core.ports.len(), 16, "a port per pod");
        assert_eq!(core.routes.len(), 256, "a route per leaf");
    }

    /// Two pods of two rail leaves: server k of a pod has NIC 0 on the pod's first leaf and
    /// NIC 1 on its second, both at port hk; the hosts are numbered server by server.
    #[test]
    fn a_rail_optimised_fabric_cables_nic_i_of_each_server_to_rail_leaf_i() {
        let text = clos().replace("name = \"clos\"\n", "").replace("pods = 2", "pods = 2\nrails = 2");
        let fabric = Fabric::parse(&text, "rails.toml", None).unwrap();
        assert_eq!(fabric.name, "clos-2x2x2x4-rails2");
        let hosts: Vec<(&str, usize, usize, u8, usize, u8)> =
            fabric.hosts.iter().map(|h| (h.name.as_str(), h.leaf, h.pod, h.index, h.server, h.rail)).collect();
        assert_eq!(
            hosts,
            [
                ("server0-nic0", 0, 0, 0, 0, 0),
                ("server0-nic1", 1, 0, 0, 0, 1),
                ("server1-nic0", 0, 0, 1, 1, 0),
                ("server1-nic1", 1, 0, 1, 1, 1),
                ("server2-nic0", 2, 1, 0, 2, 0),
                ("server2-nic1", 3, 1, 0, 2, 1),
                ("server3-nic0", 2, 1, 1, 3, 0),
                ("server3-nic1", 3, 1, 1, 3, 1),
            ]
        );
        assert_eq!(fabric.hosts[5].address, std::net::Ipv4Addr::new(10, 3, 0, 1), "addressed by leaf and port");
        let host_links: Vec<(String, String)> = fabric
            .links
            .iter()
            .filter(|l| matches!(l.a, Endpoint::Host(_)))
            .map(|l| (fabric.endpoint_name(l.a), fabric.endpoint_name(l.b)))
            .collect();
        assert_eq!(host_links.len(), 8);
        for (host, port) in [("server2-nic1", "leaf3:h0"), ("server1-nic0", "leaf0:h1"), ("server3-nic1", "leaf3:h1")] {
            assert!(host_links.contains(&(host.into(), port.into())), "{host} on {port}: {host_links:?}");
        }
        // The cabling above the leaves is the Clos's.
        let plain = Fabric::parse(&clos(), "clos.toml", None).unwrap();
        assert_eq!(fabric.links.len(), plain.links.len());
        assert_eq!(fabric.switches.len(), plain.switches.len());
        let report = fabric.shape_report();
        assert!(
            report.contains("\n  rails: 4 servers of 2 NICs, NIC i of each on rail leaf i of its group of 2 leaves\n"),
            "{report}"
        );
        assert!(!plain.shape_report().contains("rails"), "no rails line without rails");
        // The same servers, each on one leaf: numbered leaf by leaf, NICs on consecutive ports.
        let racked =
            Fabric::parse(&clos().replace("pods = 2", "pods = 2\nserver_nics = 2"), "racks.toml", None).unwrap();
        let hosts: Vec<(&str, usize, u8, usize, u8)> =
            racked.hosts.iter().map(|h| (h.name.as_str(), h.leaf, h.index, h.server, h.rail)).collect();
        assert_eq!(
            &hosts[..3],
            [("server0-nic0", 0, 0, 0, 0), ("server0-nic1", 0, 1, 0, 1), ("server1-nic0", 1, 0, 1, 0)]
        );
        assert!(racked.shape_report().contains("\n  servers: 4 servers of 2 NICs, each server's on one leaf\n"));
        let unnamed = clos().replace("name = \"clos\"\n", "").replace("pods = 2", "pods = 2\nserver_nics = 2");
        assert_eq!(Fabric::parse(&unnamed, "racks.toml", None).unwrap().name, "clos-2x2x2x4-nics2");
        assert_eq!(racked.links.len(), plain.links.len());
    }

    #[test]
    fn a_clos_that_cannot_be_built_is_one_line_naming_its_field() {
        for (extra, expected) in [
            ("pods = 2", "fabric.cores: pods need core switches"),
            ("pods = 2\ncores = 3", "fabric.cores: 3 is not 1-64 and a multiple of spines (2)"),
            ("pods = 0\ncores = 2", "fabric.pods: 0 is not 1-64"),
            ("pods = 52\ncores = 2", "fabric.pods: 52 pods of 5 leaves are more than 256 leaves"),
            ("rails = 2", "fabric.rails: 2 does not divide leaves (5)"),
            ("rails = 0", "fabric.rails: 0 does not divide leaves (5)"),
            ("server_nics = 3", "fabric.server_nics: 3 does not divide hosts_per_leaf (2)"),
            ("server_nics = 2\nrails = 5", "or rails is given too"),
        ] {
            let text = crate::testing::leaf_spine("bad", extra, 400_000).replace("leaves = 2", "leaves = 5");
            let err = Fabric::parse(&text, "bad.toml", None).unwrap_err().to_string();
            assert!(err.contains(expected), "{extra:?}: {err}");
        }
    }

    #[test]
    fn leaf_spine_is_generated_and_routes_reach_every_host() {
        let fabric = Fabric::parse(&small(), "small.toml", None).unwrap();
        assert_eq!(fabric.switches.len(), 4);
        assert_eq!(fabric.hosts.len(), 4);
        // 4 host links + 2 x 2 uplinks.
        assert_eq!(fabric.links.len(), 8);
        let leaf1 = &fabric.switches[1];
        assert_eq!(leaf1.name, "leaf1");
        let names: Vec<&str> = leaf1.ports.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["h0", "h1", "s0", "s1"]);
        assert_eq!(fabric.hosts[3].address, std::net::Ipv4Addr::new(10, 1, 1, 1));
        assert_eq!(fabric.endpoint_name(fabric.links[4].a), "leaf1-h0");
        assert_eq!(fabric.endpoint_name(fabric.links[3].a), "leaf0:s1");
        assert_eq!(fabric.endpoint_name(fabric.links[3].b), "spine1:l0");
        assert_eq!(Fabric::parse(&small(), "small.toml", Some(GroupMode::Spray)).unwrap().mode(), GroupMode::Spray);
    }

    #[test]
    fn a_generated_fabric_is_named_by_its_shape_unless_the_file_names_it() {
        let named = Fabric::parse(&small(), "small.toml", None).unwrap();
        assert_eq!(named.name, "small");
        let unnamed = small().replace("name = \"small\"\n", "").replace("spines = 2", "spines = 3");
        assert_eq!(Fabric::parse(&unnamed, "f.toml", None).unwrap().name, "leaf-spine-2x3");
    }

    #[test]
    fn a_listed_host_s_leaf_is_its_switch_past_256_switches() {
        let dir = std::env::temp_dir().join(format!("raceway-fabric-leaves-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut fabric = String::from("[fabric]\ntransport = \"irn\"\n");
        for index in 0..258 {
            let config = format!(
                "[switch]\nname = \"s{index}\"\nmac = \"02:00:00:00:00:01\"\n\
                 [[port]]\nname = \"h0\"\nspeed_gbps = 100\npeer_mac = \"02:00:00:00:00:02\"\n\
                 [[route]]\nprefix = \"0.0.0.0/0\"\nport = \"h0\"\n"
            );
            std::fs::write(dir.join(format!("s{index}.toml")), config).unwrap();
            let address = std::net::Ipv4Addr::from(0x0a00_0001 + index);
            fabric.push_str(&format!(
                "[[switch]]\nname = \"s{index}\"\nconfig = \"s{index}.toml\"\n\
                 [[host]]\nname = \"h{index}\"\naddress = \"{address}\"\n\
                 [[link]]\na = \"h{index}\"\nb = \"s{index}:h0\"\n"
            ));
        }
        let parsed = Fabric::parse_in(&fabric, "f.toml", &dir, None);
        std::fs::remove_dir_all(&dir).unwrap();
        let parsed = parsed.unwrap();
        let leaves: Vec<usize> = parsed.hosts.iter().map(|host| host.leaf).collect();
        assert_eq!(leaves, (0..258).collect::<Vec<_>>(), "host 256 is on switch 256, not 0");
        assert_eq!(parsed.transport.kind, TransportKind::Irn, "a listed fabric's [fabric] transport");
    }

    #[test]
    fn mistakes_name_the_file_and_field() {
        let err = Fabric::parse(&small().replace("leaves = 2", "leaves = 0"), "f.toml", None).unwrap_err();
        assert_eq!((err.file.as_str(), err.field.as_str()), ("f.toml", "fabric.leaves"), "{err}");
        let listed = "[fabric]\nrails = 2\n[[switch]]\nname = \"s\"\nconfig = \"s.toml\"\n";
        let err = Fabric::parse(listed, "f.toml", None).unwrap_err();
        assert_eq!(err.field, "fabric.rails", "a listed fabric is shaped by its links: {err}");
        let err = Fabric::parse(&small().replace("[switch]", "[switch]\nname = \"x\""), "f.toml", None).unwrap_err();
        assert_eq!(err.field, "switch.name", "{err}");
        let err = Fabric::parse(
            &small().replace("hosts_per_leaf = 2\n", "hosts_per_leaf = 2\nmode = \"teleport\"\n"),
            "f.toml",
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("f.toml (leaf0)") && err.contains("mode"), "{err}");
        let err = Fabric::parse(&format!("{}\n[dcqcn]\ng = 2.0\n", small()), "f.toml", None).unwrap_err().to_string();
        assert!(err.starts_with("f.toml: dcqcn.g: "), "{err}");
        let err = Fabric::parse(&format!("{}\n[dcqcn]\npreset = \"hpcc\"\n", small()), "f.toml", None).unwrap_err();
        assert_eq!((err.field.as_str(), err.problem.as_str()), ("dcqcn.preset", "'hpcc' is not default or paper"));
        let err = Fabric::parse(&format!("{}\n[dcqcn]\nbyte_counter = 5\n", small()), "f.toml", None).unwrap_err();
        assert!(err.field == "dcqcn" && err.problem.contains("byte_counter"), "{err}");
    }

    #[test]
    fn the_paper_preset_gives_the_paper_s_recovery_and_keys_beside_it_override_it() {
        let fabric =
            Fabric::parse(&format!("{}\n[dcqcn]\npreset = \"paper\"\ng = 0.0625\n", small()), "f.toml", None).unwrap();
        let dcqcn = &fabric.dcqcn;
        assert_eq!((dcqcn.byte_counter_bytes, dcqcn.fast_recovery_stages), (10 * 1024 * 1024, 5));
        assert_eq!((dcqcn.additive_increase_mbps, dcqcn.hyper_increase_mbps), (40.0, 200.0));
        assert_eq!(dcqcn.g, 0.0625, "a key beside the preset wins");
        assert_eq!(dcqcn.rate_increase_us, DcqcnParams::default().rate_increase_us, "the rest as default");
        let plain = Fabric::parse(&format!("{}\n[dcqcn]\npreset = \"default\"\n", small()), "f.toml", None).unwrap();
        assert_eq!(plain.dcqcn, DcqcnParams::default());
    }
}
