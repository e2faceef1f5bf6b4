//! `[[group]]`: a set of ports frames are spread over, and how (`GroupMode`, which
//! `pipeline::balance` implements), validated into `GroupConfig`.
//!
//! Invariant: group names are unique; every member exists, once, and has a peer MAC to send
//! to.

use super::{PortConfig, Validator};
use crate::error::InputError;
use crate::keyword::keywords;
use serde::Deserialize;

pub const DEFAULT_FLOWLET_GAP_US: u32 = 100;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGroup {
    pub(super) name: String,
    pub(super) ports: Vec<String>,
    pub(super) mode: Option<String>,
    pub(super) flowlet_gap_us: Option<u32>,
}

keywords! {
    /// How a group spreads frames over its members (`group.mode`, `control.multipath_mode`,
    /// `raceway fabric --mode`; `pipeline::balance` implements each).
    pub enum GroupMode {
        Ecmp => "ecmp",
        Spray => "spray",
        Random => "random",
        Adaptive => "adaptive",
        Flowlet => "flowlet",
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct GroupConfig {
    pub name: String,
    pub members: Vec<usize>,
    pub mode: GroupMode,
    pub flowlet_gap_us: u32,
}

impl Validator<'_> {
    pub(super) fn groups(&self, raw: Vec<RawGroup>, ports: &[PortConfig]) -> Result<Vec<GroupConfig>, InputError> {
        let mut groups: Vec<GroupConfig> = Vec::with_capacity(raw.len());
        for (index, group) in raw.into_iter().enumerate() {
            let field = |name: &str| format!("group[{index}].{name}");
            if groups.iter().any(|other| other.name == group.name) {
                return Err(self.error(field("name"), format!("duplicate group name '{}'", group.name)));
            }
            if group.ports.is_empty() {
                return Err(self.error(field("ports"), "a group needs at least one port"));
            }
            let mut members = Vec::with_capacity(group.ports.len());
            for name in &group.ports {
                let port = ports
                    .iter()
                    .position(|port| &port.name == name)
                    .ok_or_else(|| self.error(field("ports"), format!("unknown port '{name}'")))?;
                if ports[port].peer_mac.is_none() {
                    return Err(self.error(field("ports"), format!("port '{name}' has no peer_mac to send to")));
                }
                if members.contains(&port) {
                    return Err(self.error(field("ports"), format!("port '{name}' is listed twice")));
                }
                members.push(port);
            }
            let mode = self.keyword(&field("mode"), group.mode.as_deref(), GroupMode::Ecmp)?;
            groups.push(GroupConfig {
                name: group.name,
                members,
                mode,
                flowlet_gap_us: group.flowlet_gap_us.unwrap_or(DEFAULT_FLOWLET_GAP_US),
            });
        }
        Ok(groups)
    }
}
