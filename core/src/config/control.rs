//! `[control]`: the control plane (a Linux interface per port in a namespace of the switch's
//! own), its CoPP policers per class, the sources each class takes (`[control.acl]`), the
//! class its frames leave in and the EtherTypes it takes, validated into `ControlConfig`.
//!
//! Invariant: the namespace name is one the kernel takes; every CoPP class is known and its
//! rate and burst are 1-10,000,000; only classes of IP frames are limited to sources; a
//! punted EtherType is not one the data plane routes or always punts.

use super::{CoppClass, CoppRate, Prefix};
use super::{GroupMode, Validator};
use crate::error::InputError;
use crate::keyword::keywords;
use serde::Deserialize;
use std::collections::BTreeMap;

/// The traffic class the control plane's own frames leave in.
const DEFAULT_CONTROL_TC: u8 = 7;
/// How long the host interfaces outlive a stopped switch, waiting for the next one: longer than
/// a restart (systemd's RestartSec, the EAL's start on hugepages), short enough that a switch
/// stopped for good does not leave live-looking links behind for long.
const DEFAULT_KEEP_INTERFACES_S: u32 = 30;
/// The longest `keep_interfaces_s` (an hour).
const MAX_KEEP_INTERFACES_S: i64 = 3600;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawControl {
    pub(super) netns: Option<String>,
    /// Replaced by `[control.copp.<class>]`; kept to say so.
    pub(super) punt_pps: Option<toml::Value>,
    pub(super) punt_burst: Option<toml::Value>,
    #[serde(default)]
    pub(super) copp: RawCoppSection,
    pub(super) control_tc: Option<i64>,
    pub(super) multipath_mode: Option<String>,
    #[serde(default)]
    pub(super) punt_ethertypes: Vec<String>,
    pub(super) keep_interfaces_s: Option<i64>,
    /// `[control.acl]`: class = "any" | "neighbors" | ["neighbors", "PREFIX", ...].
    #[serde(default)]
    pub(super) acl: BTreeMap<String, toml::Value>,
}

/// `[control.copp]`: `scope`, and a table per class.
#[derive(Debug, Default, Deserialize)]
pub(super) struct RawCoppSection {
    pub(super) scope: Option<String>,
    #[serde(flatten)]
    pub(super) classes: BTreeMap<String, RawCopp>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCopp {
    pub(super) pps: Option<u64>,
    pub(super) burst: Option<u64>,
}

/// The control plane (`[control]`): a Linux interface per port in a namespace of the switch's
/// own, and the frames punted to it.
#[derive(Debug, Clone, PartialEq)]
pub struct ControlConfig {
    /// The network namespace of the host interfaces.
    pub netns: String,
    /// Each CoPP class's policer, by `CoppClass::index`: one per port, or one for the switch
    /// (`copp_scope`).
    pub copp: [CoppRate; CoppClass::COUNT],
    pub copp_scope: CoppScope,
    /// The traffic class frames from the control plane leave in.
    pub control_tc: u8,
    /// The load-balancing mode of the kernel's multipath routes.
    pub multipath_mode: GroupMode,
    /// EtherTypes punted besides ARP, slow protocols and LLDP (class `other`).
    pub punt_ethertypes: Vec<u16>,
    /// The sources each CoPP class takes (`[control.acl]`); shared, so that a reload hands the
    /// workers a new one without copying it on the packet path.
    pub acl: std::sync::Arc<ControlAcl>,
    /// Seconds the namespace and host interfaces outlive the switch (held by `raceway keep`),
    /// so that a restart finds them, and the sessions on them, as they were; 0: they go with it.
    pub keep_interfaces_s: u32,
}

impl Validator<'_> {
    pub(super) fn control(&self, raw: RawControl, switch_name: &str) -> Result<ControlConfig, InputError> {
        let netns = raw.netns.unwrap_or_else(|| format!("raceway-{switch_name}"));
        if netns.is_empty() || netns.len() > 64 || netns.contains(['/', ' ', '\0']) || netns == "." || netns == ".." {
            return Err(self.error(
                "control.netns",
                format!("'{netns}' is not a namespace name (1-64 characters, no '/' or spaces)"),
            ));
        }
        for (field, value) in [("control.punt_pps", &raw.punt_pps), ("control.punt_burst", &raw.punt_burst)] {
            if value.is_some() {
                return Err(self.error(field, "replaced by per-class policers: [control.copp.<class>] pps, burst"));
            }
        }
        let copp = self.copp(&raw.copp.classes)?;
        let copp_scope = self.keyword("control.copp.scope", raw.copp.scope.as_deref(), CoppScope::Port)?;
        let control_tc = match raw.control_tc {
            Some(tc) => self.traffic_class("control.control_tc", tc)?,
            None => DEFAULT_CONTROL_TC,
        };
        let multipath_mode = self.keyword("control.multipath_mode", raw.multipath_mode.as_deref(), GroupMode::Ecmp)?;
        let mut punt_ethertypes = Vec::with_capacity(raw.punt_ethertypes.len());
        for text in &raw.punt_ethertypes {
            let digits = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X"));
            let value = digits.and_then(|digits| u16::from_str_radix(digits, 16).ok()).filter(|v| *v >= 0x0600);
            let value = value.ok_or_else(|| {
                self.error("control.punt_ethertypes", format!("'{text}' is not an EtherType (0x0600-0xffff, in hex)"))
            })?;
            if matches!(value, 0x0800 | 0x86dd | 0x8100 | 0x88a8 | 0x8808) {
                return Err(self.error(
                    "control.punt_ethertypes",
                    format!("{text} is routed or handled by the data plane; it cannot be punted whole"),
                ));
            }
            if let Some(class) = [(0x0806, "arp"), (0x8809, "lacp"), (0x88cc, "lldp")]
                .iter()
                .find_map(|(always, class)| (*always == value).then_some(class))
            {
                return Err(self.error(
                    "control.punt_ethertypes",
                    format!("{text} is always punted (class {class}); list only other EtherTypes"),
                ));
            }
            punt_ethertypes.push(value);
        }
        let keep_interfaces_s = match raw.keep_interfaces_s {
            None => DEFAULT_KEEP_INTERFACES_S,
            Some(seconds @ 0..=MAX_KEEP_INTERFACES_S) => seconds as u32,
            Some(seconds) => {
                return Err(self
                    .error("control.keep_interfaces_s", format!("{seconds} is not 0-{MAX_KEEP_INTERFACES_S} seconds")))
            }
        };
        let acl = std::sync::Arc::new(self.control_acl(&raw.acl)?);
        Ok(ControlConfig {
            netns,
            copp,
            copp_scope,
            control_tc,
            multipath_mode,
            punt_ethertypes,
            acl,
            keep_interfaces_s,
        })
    }

    /// `[control.copp.<class>]`: each class's rate and burst, SONiC's defaults where unset; a
    /// burst left out is one second's worth of the rate.
    fn copp(&self, raw: &BTreeMap<String, RawCopp>) -> Result<[CoppRate; CoppClass::COUNT], InputError> {
        let mut rates = CoppClass::ALL.map(CoppRate::default_for);
        for (name, settings) in raw {
            let class = CoppClass::parse(name).ok_or_else(|| {
                let names: Vec<&str> = CoppClass::ALL.iter().map(|class| class.name()).collect();
                self.error(format!("control.copp.{name}"), format!("not a CoPP class ({})", names.join(", ")))
            })?;
            let pps = settings.pps.unwrap_or(class.default_pps());
            let burst = settings.burst.unwrap_or(pps);
            for (field, value) in [("pps", pps), ("burst", burst)] {
                if !(1..=10_000_000).contains(&value) {
                    return Err(
                        self.error(format!("control.copp.{name}.{field}"), format!("{value} is not 1-10000000"))
                    );
                }
            }
            rates[class.index()] = CoppRate { pps, burst };
        }
        Ok(rates)
    }
}

keywords! {
    /// Whose rate a CoPP policer keeps (`[control.copp] scope`).
    pub enum CoppScope {
        /// One policer per port and class: a flood on one port spends only that port's rate.
        Port => "port",
        /// One policer per class for the whole switch, as SONiC's trap groups: the kernel
        /// sees at most the class's rate, whatever the number of ports.
        Switch => "switch",
    }
}

/// The sources one CoPP class takes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Sources {
    /// Any source.
    pub any: bool,
    /// A peer of the control plane's: a `[[neighbor]]` on the port the frame came in on, or
    /// a BGP peer the kernel has a connection with (FRR connects to each neighbour it is
    /// given), arriving on a port the FIB routes it back through (a link-local one on its
    /// own).
    pub neighbors: bool,
    /// Sources in these prefixes (peers further away: multihop BGP, a management subnet).
    pub prefixes: Vec<Prefix>,
}

/// `[control.acl]`: which sources each CoPP class takes, as SONiC's caclmgrd limits BGP to its
/// configured neighbours. The rest of a class's frames are dropped before its policer (so a
/// spoofed flood spends none of the real peers' rate) and counted as `control_acl`, by class
/// in `refused`.
#[derive(Debug, Clone, PartialEq)]
pub struct ControlAcl {
    pub classes: [Sources; CoppClass::COUNT],
}

impl Default for ControlAcl {
    /// BGP and BFD from neighbours only; every other class from anyone.
    fn default() -> Self {
        let classes = CoppClass::ALL.map(|class| match class {
            CoppClass::Bgp | CoppClass::Bfd => Sources { neighbors: true, ..Sources::default() },
            _ => Sources { any: true, ..Sources::default() },
        });
        Self { classes }
    }
}

impl ControlAcl {
    /// The sources `class` takes, or `None` when it takes any.
    #[inline]
    pub fn limits(&self, class: CoppClass) -> Option<&Sources> {
        let sources = &self.classes[class.index()];
        (!sources.any).then_some(sources)
    }
}

/// Classes whose frames have no IP source to judge (ARP among them: ND shares its class).
const WITHOUT_SOURCES: [CoppClass; 4] = [CoppClass::Lacp, CoppClass::Arp, CoppClass::Lldp, CoppClass::Other];

impl Validator<'_> {
    /// `[control.acl]`: each listed class's sources, the defaults for the rest.
    fn control_acl(&self, raw: &BTreeMap<String, toml::Value>) -> Result<ControlAcl, InputError> {
        let mut acl = ControlAcl::default();
        for (name, value) in raw {
            let field = format!("control.acl.{name}");
            let class = CoppClass::parse(name).ok_or_else(|| {
                let names: Vec<&str> = CoppClass::ALL.iter().map(|class| class.name()).collect();
                self.error(&field, format!("not a CoPP class ({})", names.join(", ")))
            })?;
            let mut sources = Sources::default();
            let words: Vec<&toml::Value> = match value {
                toml::Value::Array(items) => items.iter().collect(),
                single => vec![single],
            };
            for word in words {
                match word.as_str() {
                    Some("any") => sources.any = true,
                    Some("neighbors") => sources.neighbors = true,
                    Some(text) => {
                        sources.prefixes.push(Prefix::parse(text).map_err(|problem| self.error(&field, problem))?)
                    }
                    None => {
                        return Err(self.error(
                            &field,
                            format!("{word} is not \"any\", \"neighbors\" or a list of prefixes and \"neighbors\""),
                        ))
                    }
                }
            }
            if !sources.any && !sources.neighbors && sources.prefixes.is_empty() {
                return Err(self.error(&field, "an empty list would refuse the whole class; say which sources"));
            }
            if !sources.any && WITHOUT_SOURCES.contains(&class) {
                return Err(
                    self.error(&field, format!("class {name} is not IP (or shares its class with ARP): only \"any\""))
                );
            }
            acl.classes[class.index()] = sources;
        }
        Ok(acl)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::MINIMAL;
    use crate::config::Config;

    #[test]
    fn copp_classes_take_sonic_defaults_and_overrides_per_class() {
        let copp = |tables: &str| {
            Config::parse(&format!("{MINIMAL}\n[control]\n{tables}"), "t.toml")
                .map(|config| config.control.unwrap().copp)
        };
        let rate = |pps, burst| CoppRate { pps, burst };
        let defaults = copp("").unwrap();
        assert_eq!(defaults, CoppClass::ALL.map(CoppRate::default_for));
        // A rate alone sets the burst to one second of it; a burst alone keeps the rate.
        let set = copp("[control.copp.ip2me]\npps = 100\n[control.copp.bgp]\nburst = 50\n").unwrap();
        assert_eq!(set[CoppClass::Ip2me.index()], rate(100, 100));
        assert_eq!(set[CoppClass::Bgp.index()], rate(6000, 50));
        assert_eq!(set[CoppClass::Arp.index()], defaults[CoppClass::Arp.index()]);
        let error = |tables: &str| {
            let err = copp(tables).unwrap_err();
            (err.field, err.problem)
        };
        let (field, problem) = error("[control.copp.icmp]\npps = 10\n");
        assert_eq!(field, "control.copp.icmp");
        assert!(
            problem.contains("bgp, bfd, lacp, arp, lldp, ip2me, glean, ttl, kernel, unreachable, mtu, other"),
            "{problem}"
        );
        assert_eq!(error("[control.copp.arp]\npps = 0\n").0, "control.copp.arp.pps");
        assert_eq!(error("[control.copp.arp]\nburst = 10000001\n").0, "control.copp.arp.burst");
        let (field, problem) = error("punt_pps = 2000\n");
        assert_eq!(field, "control.punt_pps");
        assert!(problem.contains("[control.copp.<class>]"), "{problem}");
        assert_eq!(error("punt_burst = 10\n").0, "control.punt_burst");
        let (field, problem) = error("punt_ethertypes = [\"0x8809\"]\n");
        assert_eq!(field, "control.punt_ethertypes");
        assert!(problem.contains("class lacp"), "{problem}");
        let scope = |text: &str| {
            Config::parse(&format!("{MINIMAL}\n[control]\n[control.copp]\n{text}"), "t.toml")
                .map(|config| config.control.unwrap().copp_scope)
        };
        assert_eq!(scope(""), Ok(CoppScope::Port));
        assert_eq!(scope("scope = \"switch\"\n[control.copp.arp]\npps = 5\n"), Ok(CoppScope::Switch));
        let err = scope("scope = \"chassis\"").unwrap_err();
        assert_eq!(err.field, "control.copp.scope");
        assert!(err.problem.contains("port") && err.problem.contains("switch"), "{}", err.problem);
    }

    #[test]
    fn control_acls_take_bgp_and_bfd_from_neighbours_by_default_and_lists_per_class() {
        let acl = |tables: &str| {
            Config::parse(&format!("{MINIMAL}\n[control]\n{tables}"), "t.toml")
                .map(|config| config.control.unwrap().acl)
        };
        let defaults = acl("").unwrap();
        assert_eq!(*defaults, ControlAcl::default());
        assert!(defaults.limits(CoppClass::Bgp).is_some_and(|sources| sources.neighbors));
        assert!(defaults.limits(CoppClass::Ip2me).is_none(), "any source");
        let set =
            acl("[control.acl]\nbgp = [\"neighbors\", \"10.1.0.0/16\"]\nip2me = \"10.9.0.0/24\"\nbfd = \"any\"\n")
                .unwrap();
        let bgp = set.limits(CoppClass::Bgp).unwrap();
        assert!(bgp.neighbors);
        assert_eq!(bgp.prefixes, vec![Prefix::parse("10.1.0.0/16").unwrap()]);
        let ip2me = set.limits(CoppClass::Ip2me).unwrap();
        assert!(!ip2me.neighbors && ip2me.prefixes.len() == 1);
        assert!(set.limits(CoppClass::Bfd).is_none());
        let error = |tables: &str| {
            let err = acl(tables).unwrap_err();
            (err.field, err.problem)
        };
        assert_eq!(error("[control.acl]\nssh = \"any\"\n").0, "control.acl.ssh");
        assert!(error("[control.acl]\narp = \"neighbors\"\n").1.contains("only \"any\""));
        assert!(error("[control.acl]\nbgp = []\n").1.contains("empty list"));
        assert!(error("[control.acl]\nbgp = \"10.0.0.1/8\"\n").1.contains("host bits"));
        assert!(error("[control.acl]\nbgp = 7\n").1.contains("not \"any\""));
    }
}
