//! The fabric file of `raceway fabric` (`config/fabric/*.toml`) as the config reads it: TOML
//! errors named by line and key as in a switch config, the `[fabric]` table checked, the
//! `[dcqcn]` table set apart; the switch template, or the listed switches, hosts and links,
//! are left for the fabric builder (`engine::fabric`), which makes each switch's config and
//! validates it as any config.
//!
//! Invariant: what this returns names the file and field of every mistake it found, and holds
//! speeds that are positive and finite.

use super::toml_error;
use crate::error::InputError;
use serde::Deserialize;

/// The `[fabric]` table. `leaves`, `spines` and `hosts_per_leaf` generate a leaf-spine; a
/// fabric that lists `[[switch]]`, `[[host]]` and `[[link]]` instead leaves them out.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FabricTable {
    /// Generated leaf-spines default to their shape (`leaf-spine-32x16`); a listed fabric
    /// defaults to "fabric".
    pub name: Option<String>,
    pub leaves: Option<u8>,
    pub spines: Option<u8>,
    pub hosts_per_leaf: Option<u8>,
    #[serde(default = "default_speed")]
    pub host_speed_gbps: f64,
    #[serde(default = "default_speed")]
    pub spine_speed_gbps: f64,
    #[serde(default = "default_host_cable")]
    pub host_cable_m: f64,
    #[serde(default = "default_spine_cable")]
    pub spine_cable_m: f64,
    #[serde(default = "default_mode")]
    pub mode: String,
    /// How hosts recover losses (`engine::fabric::transport`).
    pub transport: Option<String>,
    /// The hosts' retransmission timeout, microseconds (irn's RTO_high).
    pub rto_us: Option<f64>,
    /// irn's RTO_low, microseconds: the timeout with few frames in flight.
    pub rto_low_us: Option<f64>,
    /// A three-tier Clos: `pods` pods of `leaves` leaves and `spines` spines each, and
    /// `cores` core switches (a multiple of `spines`), at `core_speed_gbps` over
    /// `core_cable_m` (the spines' unless given).
    pub pods: Option<u8>,
    pub cores: Option<u8>,
    pub core_speed_gbps: Option<f64>,
    pub core_cable_m: Option<f64>,
    /// A rail-optimised layout: each server has `rails` NICs, and NIC i of every server in a
    /// group of `rails` leaves is cabled to the group's leaf i (its rail).
    pub rails: Option<u8>,
    /// Servers of `server_nics` NICs each, all cabled to one leaf (consecutive ports): the
    /// layout a rail-optimised one is set against.
    pub server_nics: Option<u8>,
}

fn default_speed() -> f64 {
    100.0
}
fn default_host_cable() -> f64 {
    3.0
}
fn default_spine_cable() -> f64 {
    20.0
}
fn default_mode() -> String {
    "ecmp".into()
}

/// A fabric file, read: its `[fabric]` table, its `[dcqcn]` table if any, and the rest.
#[derive(Debug)]
pub struct FabricFile {
    pub topology: FabricTable,
    pub dcqcn: Option<toml::Table>,
    pub rest: toml::Table,
}

impl FabricFile {
    pub fn parse(text: &str, file: &str) -> Result<Self, InputError> {
        let mut rest: toml::Table = text.parse().map_err(|err: toml::de::Error| toml_error(text, file, &err))?;
        let topology: FabricTable = rest
            .remove("fabric")
            .ok_or_else(|| InputError::new(file, "fabric", "missing table"))?
            .try_into()
            .map_err(|err: toml::de::Error| InputError::new(file, "fabric", err.message().to_string()))?;
        let dcqcn = match rest.remove("dcqcn") {
            Some(toml::Value::Table(dcqcn)) => Some(dcqcn),
            Some(_) => return Err(InputError::new(file, "dcqcn", "must be a table")),
            None => None,
        };
        for (field, value) in [
            ("fabric.host_speed_gbps", topology.host_speed_gbps),
            ("fabric.spine_speed_gbps", topology.spine_speed_gbps),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return Err(InputError::new(file, field.to_string(), format!("{value} is not positive")));
            }
        }
        Ok(Self { topology, dcqcn, rest })
    }
}

#[cfg(test)]
mod tests {
    use super::FabricFile;

    #[test]
    fn a_fabric_files_mistakes_name_the_line_and_key_or_the_table() {
        let err = FabricFile::parse("[fabric]\nleaves = 2\nspines = \"two\"\n", "f.toml").unwrap_err();
        assert_eq!((err.file.as_str(), err.field.as_str()), ("f.toml", "fabric"), "{err}");
        let err = FabricFile::parse("[fabric]\nleaves = 2\nspines =\n", "f.toml").unwrap_err();
        assert_eq!(err.field, "line 3: spines", "a TOML mistake names its line and key, as a switch config's: {err}");
        let err = FabricFile::parse("[fabric]\nhost_speed_gbps = -1.0\n", "f.toml").unwrap_err();
        assert_eq!(err.field, "fabric.host_speed_gbps", "{err}");
        let read = FabricFile::parse("[fabric]\n[dcqcn]\n", "f.toml").unwrap();
        assert!(read.dcqcn.is_some() && read.rest.is_empty());
        assert_eq!(FabricFile::parse("dcqcn = 3\n[fabric]\n", "f.toml").unwrap_err().field, "dcqcn");
        assert_eq!(FabricFile::parse("[switch]\n", "f.toml").unwrap_err().field, "fabric");
    }
}
