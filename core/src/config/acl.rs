//! `[[acl]]`: access control lists, as SONiC's ACL_TABLE (types L3 and L3V6) and ACL_RULE
//! configure them. A table is bound to ports at one stage (ingress or egress) and holds rules
//! on source and destination prefix, protocol, L4 ports, DSCP and TCP flags, each with an
//! action (permit, drop, or set DSCP and/or traffic class). The highest priority that matches
//! decides; a frame no rule matches is permitted. Validated into `AclTable`; the pipeline's
//! `acl` module matches and `switch` applies them.
//!
//! Invariant: in a valid table every rule's fields agree (one address family, ports only
//! with TCP or UDP, flags only with TCP, ranges ordered), priorities are unique, a port is
//! bound to at most one table per stage, and no action moves a frame into a lossless class
//! (its PFC priority would no longer match the queue that pauses it).

use super::qos::Qos;
use super::{PortConfig, Prefix, Validator};
use crate::error::InputError;
use crate::keyword::keywords;
use crate::units::TRAFFIC_CLASSES;
use serde::Deserialize;
use std::fmt;

/// IANA protocol numbers the rules may name by word.
const PROTOCOL_WORDS: [(&str, u8); 4] = [("icmp", 1), ("tcp", 6), ("udp", 17), ("icmpv6", 58)];
pub const PROTOCOL_TCP: u8 = 6;
pub const PROTOCOL_UDP: u8 = 17;

/// A value a config may give as a number or a word (`protocol = "udp"` or `17`,
/// `dst_port = 4791` or `"4791-4800"`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(super) enum NumberOrWord {
    Number(i64),
    Word(String),
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum RawAction {
    Word(String),
    Set(RawSet),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSet {
    dscp: Option<i64>,
    tc: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAcl {
    name: String,
    ports: Vec<String>,
    stage: Option<String>,
    #[serde(default)]
    rule: Vec<RawRule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRule {
    priority: i64,
    src: Option<String>,
    dst: Option<String>,
    protocol: Option<NumberOrWord>,
    src_port: Option<NumberOrWord>,
    dst_port: Option<NumberOrWord>,
    dscp: Option<i64>,
    /// SONiC's `TCP_FLAGS`: "VALUE/MASK", each 0-255 in decimal or 0x hex.
    tcp_flags: Option<String>,
    action: RawAction,
}

keywords! {
    /// Where a table looks at frames (`acl.stage`).
    pub enum AclStage {
        /// As a frame arrives, once it is routed: before its queue is chosen.
        Ingress => "ingress",
        /// As a routed frame goes to its egress port: after the MTU check, before it is queued.
        Egress => "egress",
    }
}

/// What a matching rule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AclAction {
    Permit,
    Drop,
    /// Rewrite the DSCP (ECN kept, IPv4 checksum patched) and/or queue in another class.
    Set {
        dscp: Option<u8>,
        tc: Option<u8>,
    },
}

impl fmt::Display for AclAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Permit => f.write_str("permit"),
            Self::Drop => f.write_str("drop"),
            Self::Set { dscp, tc } => {
                let parts: Vec<String> = [dscp.map(|dscp| format!("dscp={dscp}")), tc.map(|tc| format!("tc={tc}"))]
                    .into_iter()
                    .flatten()
                    .collect();
                write!(f, "set {}", parts.join(" "))
            }
        }
    }
}

/// One validated rule; `None` fields match anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclRule {
    pub priority: u32,
    pub src: Option<Prefix>,
    pub dst: Option<Prefix>,
    pub protocol: Option<u8>,
    /// Inclusive ranges (a single port is `(p, p)`).
    pub src_port: Option<(u16, u16)>,
    pub dst_port: Option<(u16, u16)>,
    pub dscp: Option<u8>,
    /// (value, mask): the TCP flags byte masked equals the value.
    pub tcp_flags: Option<(u8, u8)>,
    pub action: AclAction,
}

impl AclRule {
    /// `Some(true)` for a rule on IPv6 addresses, `Some(false)` on IPv4 ones, `None` for a rule
    /// that names no address (it matches both families).
    pub fn family_v6(&self) -> Option<bool> {
        self.src.or(self.dst).map(|prefix| prefix.address.is_ipv6())
    }

    /// The match as one line (`show acl`, `check`): "any" for a rule that matches all.
    pub fn describe(&self) -> String {
        let range = |(low, high): (u16, u16)| if low == high { low.to_string() } else { format!("{low}-{high}") };
        let mut parts = Vec::new();
        if let Some(src) = self.src {
            parts.push(format!("src {src}"));
        }
        if let Some(dst) = self.dst {
            parts.push(format!("dst {dst}"));
        }
        if let Some(protocol) = self.protocol {
            let word = PROTOCOL_WORDS.iter().find(|(_, number)| *number == protocol);
            parts.push(word.map_or_else(|| format!("protocol {protocol}"), |(word, _)| word.to_string()));
        }
        if let Some(ports) = self.src_port {
            parts.push(format!("sport {}", range(ports)));
        }
        if let Some(ports) = self.dst_port {
            parts.push(format!("dport {}", range(ports)));
        }
        if let Some(dscp) = self.dscp {
            parts.push(format!("dscp {dscp}"));
        }
        if let Some((value, mask)) = self.tcp_flags {
            parts.push(format!("flags {value:#04x}/{mask:#04x}"));
        }
        if parts.is_empty() {
            "any".to_string()
        } else {
            parts.join(" ")
        }
    }
}

/// One `[[acl]]` table, its rules highest priority first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclTable {
    pub name: String,
    pub stage: AclStage,
    /// Port indices it is bound to.
    pub ports: Vec<usize>,
    pub rules: Vec<AclRule>,
}

impl Validator<'_> {
    pub(super) fn acls(&self, raw: Vec<RawAcl>, ports: &[PortConfig], qos: &Qos) -> Result<Vec<AclTable>, InputError> {
        let mut tables: Vec<AclTable> = Vec::with_capacity(raw.len());
        for (index, raw) in raw.into_iter().enumerate() {
            let field = |key: &str| format!("acl[{index}].{key}");
            if raw.name.is_empty() || tables.iter().any(|table| table.name == raw.name) {
                return Err(self.error(field("name"), format!("'{}' is empty or names another table", raw.name)));
            }
            let stage = self.keyword(&field("stage"), raw.stage.as_deref(), AclStage::Ingress)?;
            if raw.ports.is_empty() {
                return Err(self.error(field("ports"), "a table is bound to at least one port"));
            }
            let mut bound = Vec::with_capacity(raw.ports.len());
            for name in &raw.ports {
                let port = ports
                    .iter()
                    .position(|port| &port.name == name)
                    .ok_or_else(|| self.error(field("ports"), format!("'{name}' is not a port")))?;
                let taken = tables.iter().find(|table| table.stage == stage && table.ports.contains(&port));
                if let Some(other) = taken {
                    return Err(self.error(
                        field("ports"),
                        format!(
                            "'{name}' is bound to table '{}' at {stage} already: one table per port and stage",
                            other.name
                        ),
                    ));
                }
                if !bound.contains(&port) {
                    bound.push(port);
                }
            }
            let mut rules: Vec<AclRule> = Vec::with_capacity(raw.rule.len());
            for (rule_index, rule) in raw.rule.into_iter().enumerate() {
                let rule = self.acl_rule(&format!("acl[{index}].rule[{rule_index}]"), rule, qos)?;
                if rules.iter().any(|other| other.priority == rule.priority) {
                    return Err(self.error(
                        format!("acl[{index}].rule[{rule_index}].priority"),
                        format!(
                            "{} is taken by another rule of '{}': the order would be a guess",
                            rule.priority, raw.name
                        ),
                    ));
                }
                rules.push(rule);
            }
            rules.sort_by_key(|rule| std::cmp::Reverse(rule.priority));
            tables.push(AclTable { name: raw.name, stage, ports: bound, rules });
        }
        Ok(tables)
    }

    fn acl_rule(&self, at: &str, raw: RawRule, qos: &Qos) -> Result<AclRule, InputError> {
        let field = |key: &str| format!("{at}.{key}");
        let priority = u32::try_from(raw.priority)
            .map_err(|_| self.error(field("priority"), format!("{} is not 0-4294967295", raw.priority)))?;
        let prefix = |key: &str, text: Option<String>| {
            text.map(|text| Prefix::parse(&text).map_err(|problem| self.error(field(key), problem))).transpose()
        };
        let src = prefix("src", raw.src)?;
        let dst = prefix("dst", raw.dst)?;
        if let (Some(src), Some(dst)) = (src, dst) {
            if src.address.is_ipv6() != dst.address.is_ipv6() {
                return Err(self.error(field("dst"), format!("{dst} and src {src} are of different families")));
            }
        }
        let protocol = match raw.protocol {
            None => None,
            Some(NumberOrWord::Number(number)) => Some(
                u8::try_from(number)
                    .map_err(|_| self.error(field("protocol"), format!("{number} is not an IP protocol 0-255")))?,
            ),
            Some(NumberOrWord::Word(word)) => {
                Some(PROTOCOL_WORDS.iter().find(|(name, _)| *name == word).map(|(_, number)| *number).ok_or_else(
                    || self.error(field("protocol"), format!("'{word}' is not tcp, udp, icmp, icmpv6 or a number")),
                )?)
            }
        };
        let src_port = raw.src_port.map(|ports| self.port_range(&field("src_port"), ports)).transpose()?;
        let dst_port = raw.dst_port.map(|ports| self.port_range(&field("dst_port"), ports)).transpose()?;
        if (src_port.is_some() || dst_port.is_some()) && !matches!(protocol, Some(PROTOCOL_TCP | PROTOCOL_UDP)) {
            let key = if src_port.is_some() { "src_port" } else { "dst_port" };
            return Err(self.error(field(key), "ports need protocol = \"tcp\" or \"udp\""));
        }
        let dscp = raw.dscp.map(|dscp| self.dscp(&field("dscp"), dscp)).transpose()?;
        let tcp_flags = raw.tcp_flags.map(|text| self.tcp_flags(&field("tcp_flags"), &text)).transpose()?;
        if tcp_flags.is_some() && protocol != Some(PROTOCOL_TCP) {
            return Err(self.error(field("tcp_flags"), "flags need protocol = \"tcp\""));
        }
        let action = match raw.action {
            RawAction::Word(word) => match word.as_str() {
                "permit" => AclAction::Permit,
                "drop" => AclAction::Drop,
                _ => {
                    return Err(self.error(
                        field("action"),
                        format!("'{word}' is not permit, drop, {{ dscp = N }} or {{ tc = N }}"),
                    ))
                }
            },
            RawAction::Set(set) => {
                let dscp = set.dscp.map(|dscp| self.dscp(&field("action.dscp"), dscp)).transpose()?;
                let tc = set.tc.map(|tc| self.traffic_class(&field("action.tc"), tc)).transpose()?;
                if let Some(tc) = tc.filter(|tc| qos.tc_lossless(usize::from(*tc))) {
                    return Err(self.error(
                        field("action.tc"),
                        format!("TC {tc} is lossless: a frame moved there would carry another PFC priority than the one that pauses it"),
                    ));
                }
                if dscp.is_none() && tc.is_none() {
                    return Err(self.error(field("action"), "a set action names dscp, tc or both"));
                }
                debug_assert!(tc.is_none_or(|tc| usize::from(tc) < TRAFFIC_CLASSES));
                AclAction::Set { dscp, tc }
            }
        };
        Ok(AclRule { priority, src, dst, protocol, src_port, dst_port, dscp, tcp_flags, action })
    }

    /// `4791` or `"4791-4800"`.
    fn port_range(&self, field: &str, raw: NumberOrWord) -> Result<(u16, u16), InputError> {
        let port =
            |value: i64| u16::try_from(value).map_err(|_| self.error(field, format!("{value} is not a port 0-65535")));
        match raw {
            NumberOrWord::Number(number) => port(number).map(|port| (port, port)),
            NumberOrWord::Word(word) => {
                let bounds = word
                    .split_once('-')
                    .and_then(|(low, high)| Some((low.trim().parse::<i64>().ok()?, high.trim().parse::<i64>().ok()?)));
                let (low, high) =
                    bounds.ok_or_else(|| self.error(field, format!("'{word}' is not PORT or LOW-HIGH")))?;
                let (low, high) = (port(low)?, port(high)?);
                if low > high {
                    return Err(self.error(field, format!("'{word}' runs backwards")));
                }
                Ok((low, high))
            }
        }
    }

    /// SONiC's "VALUE/MASK" (a bare VALUE is its own mask): value bits outside the mask are
    /// an error, as they could never match.
    fn tcp_flags(&self, field: &str, text: &str) -> Result<(u8, u8), InputError> {
        let byte = |part: &str| {
            let part = part.trim();
            let parsed = match part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
                Some(hex) => u8::from_str_radix(hex, 16),
                None => part.parse::<u8>(),
            };
            parsed.map_err(|_| self.error(field, format!("'{part}' is not a byte (0-255 or 0x00-0xff)")))
        };
        let (value, mask) = match text.split_once('/') {
            Some((value, mask)) => (byte(value)?, byte(mask)?),
            None => {
                let value = byte(text)?;
                (value, value)
            }
        };
        if value & !mask != 0 {
            return Err(self.error(field, format!("'{text}' sets bits its mask ignores: it could never match")));
        }
        Ok((value, mask))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn parse(acl: &str) -> Result<Config, String> {
        let text = format!(
            "[switch]\nname = \"t\"\nmac = \"02:00:00:00:00:01\"\n[qos]\ndscp_to_tc = {{ 26 = 3, default = 0 }}\n\
             lossless = [3]\n[[port]]\nname = \"p0\"\nspeed_gbps = 100\npeer_mac = \"02:00:00:00:10:00\"\n\
             [[port]]\nname = \"p1\"\nspeed_gbps = 100\npeer_mac = \"02:00:00:00:10:01\"\n{acl}"
        );
        Config::parse(&text, "t.toml").map_err(|err| err.to_string())
    }

    #[test]
    fn a_table_keeps_its_rules_best_first_with_every_field() {
        let config = parse(
            "[[acl]]\nname = \"edge\"\nports = [\"p0\", \"p1\"]\n\
             [[acl.rule]]\npriority = 10\nsrc = \"10.0.0.0/24\"\ndst = \"10.1.0.0/16\"\nprotocol = \"udp\"\n\
             dst_port = \"4791-4800\"\naction = \"drop\"\n\
             [[acl.rule]]\npriority = 20\nprotocol = 6\nsrc_port = 179\ntcp_flags = \"0x02/0x12\"\ndscp = 48\n\
             action = { dscp = 10, tc = 1 }\n\
             [[acl]]\nname = \"out\"\nports = [\"p1\"]\nstage = \"egress\"\n\
             [[acl.rule]]\npriority = 1\ndst = \"2001:db8::/32\"\naction = \"permit\"\n",
        )
        .unwrap();
        let [edge, out] = &config.acls[..] else { panic!("two tables") };
        assert_eq!(
            (edge.stage, &edge.ports[..], out.stage, &out.ports[..]),
            (AclStage::Ingress, &[0, 1][..], AclStage::Egress, &[1][..])
        );
        assert_eq!(edge.rules.iter().map(|rule| rule.priority).collect::<Vec<_>>(), [20, 10]);
        let syn = &edge.rules[0];
        assert_eq!(
            (syn.protocol, syn.src_port, syn.tcp_flags, syn.dscp),
            (Some(6), Some((179, 179)), Some((2, 0x12)), Some(48))
        );
        assert_eq!(syn.action, AclAction::Set { dscp: Some(10), tc: Some(1) });
        assert_eq!(syn.describe(), "tcp sport 179 dscp 48 flags 0x02/0x12");
        assert_eq!(syn.action.to_string(), "set dscp=10 tc=1");
        let roce = &edge.rules[1];
        assert_eq!(roce.describe(), "src 10.0.0.0/24 dst 10.1.0.0/16 udp dport 4791-4800");
        assert_eq!((roce.family_v6(), out.rules[0].family_v6(), syn.family_v6()), (Some(false), Some(true), None));
        assert!(parse("").unwrap().acls.is_empty());
    }

    #[test]
    fn each_acl_mistake_names_its_field() {
        let table = "[[acl]]\nname = \"a\"\nports = [\"p0\"]\n[[acl.rule]]\npriority = 1\n";
        let cases = [
            (format!("{table}action = \"reject\""), "acl[0].rule[0].action: 'reject' is not permit"),
            (format!("{table}action = {{}}"), "acl[0].rule[0].action: a set action names"),
            (format!("{table}action = {{ tc = 3 }}"), "acl[0].rule[0].action.tc: TC 3 is lossless"),
            (format!("{table}action = {{ dscp = 64 }}"), "acl[0].rule[0].action.dscp: DSCP 64 is not 0-63"),
            (
                format!("{table}src = \"10.0.0.1/24\"\naction = \"drop\""),
                "acl[0].rule[0].src: '10.0.0.1/24' has host bits",
            ),
            (
                format!("{table}src = \"10.0.0.0/8\"\ndst = \"fd00::/8\"\naction = \"drop\""),
                "acl[0].rule[0].dst: fd00::/8 and src",
            ),
            (format!("{table}dst_port = 80\naction = \"drop\""), "acl[0].rule[0].dst_port: ports need protocol"),
            (format!("{table}protocol = \"udp\"\ndst_port = \"90-80\"\naction = \"drop\""), "runs backwards"),
            (
                format!("{table}protocol = \"udp\"\nsrc_port = 70000\naction = \"drop\""),
                "acl[0].rule[0].src_port: 70000 is not a port",
            ),
            (format!("{table}protocol = \"sctp\"\naction = \"drop\""), "acl[0].rule[0].protocol: 'sctp' is not"),
            (
                format!("{table}protocol = \"udp\"\ntcp_flags = \"0x02\"\naction = \"drop\""),
                "acl[0].rule[0].tcp_flags: flags need",
            ),
            (format!("{table}protocol = \"tcp\"\ntcp_flags = \"0x12/0x02\"\naction = \"drop\""), "could never match"),
            (
                table.replace("priority = 1", "priority = -1") + "action = \"drop\"",
                "acl[0].rule[0].priority: -1 is not",
            ),
            (
                format!("{table}action = \"drop\"\n[[acl.rule]]\npriority = 1\naction = \"permit\""),
                "acl[0].rule[1].priority: 1 is taken",
            ),
            (format!("{table}action = \"drop\"\n[[acl]]\nname = \"a\"\nports = [\"p1\"]"), "acl[1].name: 'a'"),
            (
                format!("{table}action = \"drop\"\n[[acl]]\nname = \"b\"\nports = [\"p0\"]"),
                "acl[1].ports: 'p0' is bound to table 'a' at ingress",
            ),
            ("[[acl]]\nname = \"a\"\nports = [\"p9\"]".to_string(), "acl[0].ports: 'p9' is not a port"),
            ("[[acl]]\nname = \"a\"\nports = []".to_string(), "acl[0].ports: a table is bound"),
            (
                "[[acl]]\nname = \"a\"\nports = [\"p0\"]\nstage = \"middle\"".to_string(),
                "acl[0].stage: 'middle' is not",
            ),
        ];
        for (text, expected) in cases {
            let err = parse(&text).unwrap_err();
            assert!(err.contains(expected), "{text}\ngave: {err}");
            assert!(!err.contains('\n'));
        }
        // The same port at the other stage is fine.
        parse(&format!("{table}action = \"drop\"\n[[acl]]\nname = \"b\"\nports = [\"p0\"]\nstage = \"egress\""))
            .unwrap();
    }
}
