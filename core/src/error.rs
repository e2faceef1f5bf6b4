//! The errors raceway reports, one type per layer:
//! - `InputError`: a mistake in what the user gave raceway: a config, a trace, a fabric file,
//!   a flag, or an output path it cannot write. One line, `file: field: problem` (a flag names
//!   itself in place of the file); the CLI prints it and exits 2.
//! - `dpdk::DpdkError`: the runtime (DPDK, the kernel) refused something a live run needs.
//!
//! Invariant: every message is one line that names where the problem is, so a user can fix
//! it without a backtrace.

use std::fmt;

/// One line: `file: field: problem` (`file: problem` when there is no field).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    pub file: String,
    pub field: String,
    pub problem: String,
}

impl InputError {
    pub fn new(file: impl fmt::Display, field: impl Into<String>, problem: impl Into<String>) -> Self {
        Self { file: file.to_string(), field: field.into(), problem: problem.into() }
    }

    /// A problem with a file as a whole, no field of it (it cannot be read, it is not the
    /// format it should be): `file: problem`.
    pub fn whole_file(file: impl fmt::Display, problem: impl Into<String>) -> Self {
        Self { file: file.to_string(), field: String::new(), problem: problem.into() }
    }

    /// A bad command-line flag: `--flag: problem`.
    pub fn flag(flag: &str, problem: impl Into<String>) -> Self {
        Self { file: flag.to_string(), field: String::new(), problem: problem.into() }
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}: {}", self.file, self.problem)
        } else {
            write!(f, "{}: {}: {}", self.file, self.field, self.problem)
        }
    }
}

impl std::error::Error for InputError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_names_file_field_and_problem() {
        assert_eq!(
            InputError::new("leaf.toml", "port[1].speed_gbps", "is 0").to_string(),
            "leaf.toml: port[1].speed_gbps: is 0"
        );
        assert_eq!(InputError::flag("--in", "'x' is not PORT=FILE").to_string(), "--in: 'x' is not PORT=FILE");
        assert_eq!(InputError::whole_file("t.pcap", "cannot open: gone").to_string(), "t.pcap: cannot open: gone");
    }
}
