//! The `--in` spec: a trace file, and for pcapng the interface and direction to read.

use crate::error::InputError;
use pcap_file::pcapng::blocks::interface_description::{InterfaceDescriptionBlock, InterfaceDescriptionOption};
use std::fmt;
use std::path::PathBuf;

/// Which interface of a pcapng file to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InterfaceChoice {
    Index(u32),
    Name(String),
}

impl InterfaceChoice {
    /// Whether it names interface `index`, described by `interface`.
    pub(super) fn names(&self, index: u32, interface: &InterfaceDescriptionBlock) -> bool {
        match self {
            Self::Index(wanted) => index == *wanted,
            Self::Name(name) => interface
                .options
                .iter()
                .any(|option| matches!(option, InterfaceDescriptionOption::IfName(n) if n == name)),
        }
    }
}

impl fmt::Display for InterfaceChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Index(index) => write!(f, "{index}"),
            Self::Name(name) => write!(f, "'{name}'"),
        }
    }
}

/// Which direction of a pcapng file's frames to read (the enhanced packet block's flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Frames the capturing port received.
    In,
    /// Frames it sent.
    Out,
}

/// An input trace: a file, and for pcapng which of its frames.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceSpec {
    pub path: PathBuf,
    pub interface: Option<InterfaceChoice>,
    pub direction: Option<Direction>,
}

impl TraceSpec {
    /// A whole file.
    pub fn file(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into(), interface: None, direction: None }
    }

    /// `FILE[:if=N|NAME][:dir=in|out]`, as `--in` takes it after `PORT=`; `flag` names the
    /// flag in errors.
    pub fn parse(flag: &str, text: &str) -> Result<Self, InputError> {
        let mut rest = text;
        let mut spec = Self::file("");
        // Selectors are peeled from the end, so a path may itself hold ':'.
        while let Some((head, tail)) = rest.rsplit_once(':') {
            let Some((key, value)) = tail.split_once('=') else { break };
            match key {
                "if" if spec.interface.is_none() => {
                    spec.interface = Some(match value.parse::<u32>() {
                        Ok(index) => InterfaceChoice::Index(index),
                        Err(_) if !value.is_empty() => InterfaceChoice::Name(value.to_string()),
                        Err(_) => {
                            return Err(InputError::flag(flag, format!("'{text}': if= needs an index or a name")))
                        }
                    })
                }
                "dir" if spec.direction.is_none() => {
                    spec.direction = Some(match value {
                        "in" => Direction::In,
                        "out" => Direction::Out,
                        _ => return Err(InputError::flag(flag, format!("'{text}': dir= is in or out, not '{value}'"))),
                    })
                }
                "if" | "dir" => return Err(InputError::flag(flag, format!("'{text}': {key}= is given twice"))),
                _ => break,
            }
            rest = head;
        }
        if rest.is_empty() {
            return Err(InputError::flag(flag, format!("'{text}' names no file")));
        }
        spec.path = PathBuf::from(rest);
        Ok(spec)
    }
}

impl fmt::Display for TraceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())
    }
}
