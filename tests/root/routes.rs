//! Random routes for the FIB's test: a plan of prefixes, next hops and deltas drawn from a
//! seed, applied to the kernel in the switch's namespace, and the edge addresses of each
//! prefix where an answer could go wrong.

use crate::lab::*;

/// A small PRNG for the random route sets (xorshift64*): the seed is printed and can be given.
pub(crate) struct Random(pub(crate) u64);

impl Random {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// The differential test's plan: four ports (`host0`-`host3`, 10.0.i.1/24 and fd00:i::1/64),
/// and in raceway's namespace `lo` up and a veth pair `xa`/`xb` (10.250.0.1/24, fd50::1/64):
/// an interface that is no port.
pub(crate) struct FibPlan {
    pub(crate) control: String,
    /// Where batches are written, numbered, with what `ip` said of each.
    pub(crate) dir: std::path::PathBuf,
    pub(crate) batches: usize,
    pub(crate) ports: usize,
    /// Nexthop object ids defined (single and group) and their families (true: IPv4).
    pub(crate) objects: Vec<(u32, bool)>,
}

impl FibPlan {
    /// Starts raceway on a lab of four ports (`host0`-`host3`, 10.0.i.1/24 and fd00:i::1/64,
    /// `tag` naming it) and returns the lab, an empty plan over its control namespace, the
    /// config's path and the ports' names.
    pub(crate) fn start(tag: &str) -> (Lab, FibPlan, std::path::PathBuf, Vec<String>) {
        let mut lab = Lab::new(tag);
        let ports: Vec<String> = (0..4).map(|index| format!("host{index}")).collect();
        for index in 0..ports.len() {
            lab.host(index);
        }
        let config = lab.config(ports.len(), "");
        lab.start(&config, &ports.iter().map(String::as_str).collect::<Vec<_>>());
        let config_path = lab.dir.join("leaf.toml");
        let plan = FibPlan {
            control: lab.control(),
            dir: lab.dir.to_path_buf(),
            batches: 0,
            ports: ports.len(),
            objects: Vec::new(),
        };
        (lab, plan, config_path, ports)
    }

    /// A gateway on port `port` of the given family: on the port's subnet, or (IPv6) a
    /// link-local one (fe80::1 on every port, as BGP unnumbered peers use).
    pub(crate) fn gateway(&self, random: &mut Random, port: usize, v4: bool) -> String {
        let host = 10 + random.below(12);
        match (v4, random.below(3)) {
            (true, _) => format!("10.0.{port}.{host}"),
            (false, 0) => "fe80::1".to_string(),
            (false, 1) => format!("fe80::{host:x}"),
            (false, _) => format!("fd00:{port}::{host:x}"),
        }
    }

    /// A random prefix of any length from `shortest` (IPv4 from /8, in 10.0.0.0/8; IPv6 from
    /// /8, in fd00::/8). Default routes come in a delta round of their own: until then, some
    /// destinations have no route.
    pub(crate) fn prefix(random: &mut Random, v4: bool, shortest: u32) -> String {
        if v4 {
            let shortest = shortest.clamp(8, 32);
            let len = shortest + random.below(u64::from(33 - shortest)) as u32;
            let bits = (10u32 << 24) | (random.next() as u32 & 0x00ff_ffff);
            let mask = if len == 32 { u32::MAX } else { !(u32::MAX >> len) };
            format!("{}/{len}", std::net::Ipv4Addr::from(bits & mask))
        } else {
            let shortest = (shortest * 4).clamp(8, 128);
            let len = shortest + random.below(u64::from(129 - shortest)) as u32;
            let bits = (0xfdu128 << 120)
                | (u128::from(random.next()) << 56 | u128::from(random.next() >> 8)) & (u128::MAX >> 8);
            let mask = if len == 128 { u128::MAX } else { !(u128::MAX >> len) };
            format!("{}/{len}", std::net::Ipv6Addr::from(bits & mask))
        }
    }

    /// One `ip -batch` line adding (or, with `verb` "replace", replacing) a random route.
    pub(crate) fn route(&self, random: &mut Random, verb: &str, prefix: Option<&str>, metric: Option<u64>) -> String {
        let v4 = prefix.map_or(random.chance(55), |prefix| prefix.contains('.'));
        let kind = random.below(100);
        // An AnyIP range of the local table (IPv6) and a source route cover what is inside
        // them: kept long, so that they do not cover most of the plan.
        let shortest = if (84..=86).contains(&kind) || (!v4 && (91..=93).contains(&kind)) { 24 } else { 8 };
        let prefix = prefix.map_or_else(|| Self::prefix(random, v4, shortest), str::to_string);
        // The metric comes straight after the prefix (after a nexthop list it would not parse).
        let metric = metric.or_else(|| random.chance(30).then(|| 1 + random.below(30)));
        let prefix = match metric {
            Some(metric) => format!("{prefix} metric {metric}"),
            None => prefix,
        };
        let port = random.below(self.ports as u64) as usize;
        let line = match kind {
            0..=34 => format!("route {verb} {prefix} via {} dev host{port}", self.gateway(random, port, v4)),
            35..=39 if v4 => {
                format!("route {verb} {prefix} via 10.9.{port}.{} dev host{port} onlink", random.below(200))
            }
            40..=54 => {
                let hops: Vec<String> = (0..2 + random.below(2))
                    .map(|_| {
                        let port = random.below(self.ports as u64) as usize;
                        let weight = 1 + random.below(10);
                        format!("nexthop via {} dev host{port} weight {weight}", self.gateway(random, port, v4))
                    })
                    .collect();
                format!("route {verb} {prefix} {}", hops.join(" "))
            }
            55..=69 => {
                let ids: Vec<u32> =
                    self.objects.iter().filter(|(_, family)| *family == v4).map(|(id, _)| *id).collect();
                if ids.is_empty() {
                    format!("route {verb} blackhole {prefix}")
                } else {
                    format!("route {verb} {prefix} nhid {}", random.pick(&ids))
                }
            }
            70..=74 => format!("route {verb} blackhole {prefix}"),
            75..=77 => format!("route {verb} unreachable {prefix}"),
            78..=80 => format!("route {verb} prohibit {prefix}"),
            81..=83 => format!("route {verb} throw {prefix}"),
            84..=86 => format!("route {verb} local {prefix} dev lo"),
            87..=90 => {
                let gateway = if v4 { "10.250.0.2" } else { "fd50::2" };
                format!("route {verb} {prefix} via {gateway} dev xa")
            }
            91..=93 if v4 => {
                format!("route {verb} {prefix} tos 0x10 via {} dev host{port}", self.gateway(random, port, v4))
            }
            91..=93 => format!(
                "route {verb} {prefix} from fd99:{:x}::/64 via {} dev host{port}",
                random.below(9),
                self.gateway(random, port, v4)
            ),
            94..=96 if v4 => {
                format!("route {verb} {prefix} via {} dev host{port} table default", self.gateway(random, port, v4))
            }
            _ => format!("route {verb} {prefix} dev host{port}"),
        };
        // A batch line takes no family option: the prefix's own says it.
        line
    }

    /// Runs `lines` with `ip -batch -force` in raceway's namespace (some fail, as they may:
    /// a duplicate, a family mismatch; the kernel's tables are the truth compared with).
    pub(crate) fn batch(&mut self, lines: &[String]) {
        self.batches += 1;
        let path = self.dir.join(format!("batch-{}.txt", self.batches));
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        let output = run("ip", &["-n", &self.control, "-force", "-batch", path.to_str().unwrap()]);
        std::fs::write(path.with_extension("err"), &output.stderr).unwrap();
        // A line ip cannot parse ends the batch, even with -force: the generator must not write one.
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !stderr
                .lines()
                .any(|line| line.contains("is unknown") || line.contains("expected") || line.contains("is invalid")),
            "{}: a line ip could not parse:\n{stderr}",
            path.display()
        );
    }

    /// Every route of the kernel's tables (`ip -j route show table all`, both families).
    pub(crate) fn kernel_routes(&self) -> Vec<serde_json::Value> {
        let mut routes = Vec::new();
        for family in ["-4", "-6"] {
            let text = ok("ip", &["-n", &self.control, family, "-j", "route", "show", "table", "all"]);
            routes.extend(serde_json::from_str::<Vec<serde_json::Value>>(&text).unwrap());
        }
        routes
    }
}

/// A kernel route's destination as `a/len`.
pub(crate) fn route_prefix(dst: &str, v4: bool) -> String {
    match dst {
        "default" => (if v4 { "0.0.0.0/0" } else { "::/0" }).to_string(),
        dst if dst.contains('/') => dst.to_string(),
        dst => format!("{dst}/{}", if v4 { 32 } else { 128 }),
    }
}

/// Addresses at the edges of `prefix` (its first and last, and those just outside) and three
/// inside; none a front door drops before any lookup (link-local, multicast, loopback,
/// unspecified, broadcast).
pub(crate) fn edges(prefix: &str, random: &mut Random) -> Vec<std::net::IpAddr> {
    use std::net::IpAddr;
    let (address, len) = prefix.split_once('/').unwrap();
    let len: u32 = len.parse().unwrap();
    let address: IpAddr = address.parse().unwrap();
    let mut out = Vec::new();
    match address {
        IpAddr::V4(v4) => {
            let first = u32::from(v4);
            let size = if len == 0 { u32::MAX } else { (1u32 << (32 - len)) - 1 };
            let last = first | size;
            let mut inside = || first | (random.next() as u32 & size);
            for candidate in [first, last, first.wrapping_sub(1), last.wrapping_add(1), inside(), inside(), inside()] {
                out.push(IpAddr::V4(candidate.into()));
            }
        }
        IpAddr::V6(v6) => {
            let first = u128::from(v6);
            let size = if len == 0 { u128::MAX } else { (1u128 << (128 - len)) - 1 };
            let last = first | size;
            let mut inside = || first | ((u128::from(random.next()) << 64 | u128::from(random.next())) & size);
            for candidate in [first, last, first.wrapping_sub(1), last.wrapping_add(1), inside(), inside(), inside()] {
                out.push(IpAddr::V6(candidate.into()));
            }
        }
    }
    out.retain(|address| match address {
        IpAddr::V4(v4) => {
            !(v4.is_loopback() || v4.is_multicast() || v4.is_broadcast() || v4.is_unspecified() || v4.is_link_local())
                && v4.octets()[0] != 0
        }
        IpAddr::V6(v6) => {
            let bits = u128::from(*v6);
            !(v6.is_loopback() || v6.is_multicast() || v6.is_unspecified() || bits >> 118 == 0x3fa)
        }
    });
    out
}
