//! Running the `raceway` binary, for the tiers that test it as an operator runs it (the dpdk
//! and root tiers; the core tier has no binary).
#![allow(dead_code)]

use std::process::{Command, Output};

pub fn raceway() -> Command {
    Command::new(env!("CARGO_BIN_EXE_raceway"))
}

pub fn run_ok(command: &mut Command) -> Output {
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{:?} failed: {}\n{}",
        command,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}
