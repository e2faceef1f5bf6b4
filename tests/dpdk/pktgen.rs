//! The pktgen RFC 2544 sweep (`perf/pktgen/rfc2544.lua`) against a simulated pktgen: trials
//! timed by the wall clock, a slow generator never passed off as a zero-loss rate, and the
//! reported rate only ever rising (`perf/pktgen/rfc2544_test.lua` holds the cases). Needs
//! `lua5.3`, which `make deps` installs.

#[test]
fn the_rfc2544_sweep_reports_only_measured_rates() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../perf/pktgen");
    let output = std::process::Command::new("lua5.3")
        .arg(format!("{root}/rfc2544_test.lua"))
        .arg(format!("{root}/rfc2544.lua"))
        .output()
        .expect("lua5.3 runs (make deps installs it)");
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout), "rfc2544_test: all passed\n");
}
