//! `raceway fabric` end to end on small leaf-spines: lossless traffic loses nothing across
//! the fabric with the auto headroom, DCQCN reduces PFC pauses against ECN without
//! reaction, results are deterministic for a seed, and mistakes are one error line.

use crate::bin::*;
use crate::util::*;

/// The test fabric: 2x2 leaf-spine with 20 m spine cables and ECN up to 200 KB.
fn fabric_file() -> String {
    raceway::testing::leaf_spine("test-2x2", "spine_cable_m = 20", 200_000)
}

/// Runs the fabric and returns results.json.
fn fabric(name: &str, args: &[&str]) -> serde_json::Value {
    fabric_of(&fabric_file(), name, args)
}

fn fabric_of(text: &str, name: &str, args: &[&str]) -> serde_json::Value {
    let dir = temp_dir(name);
    let config = dir.join("fabric.toml");
    std::fs::write(&config, text).unwrap();
    let out = dir.join("out");
    run_ok(raceway().args(["fabric", "-c"]).arg(&config).arg("--out").arg(&out).args(args));
    serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap()
}

#[test]
fn lossless_traffic_loses_nothing_across_the_fabric() {
    for mode in ["ecmp", "flowlet", "spray", "adaptive"] {
        for workload in ["incast", "alltoall", "allreduce"] {
            for dcqcn in [true, false] {
                let mut args =
                    vec!["--workload", workload, "--mode", mode, "--message-bytes", "262144", "--messages", "3"];
                if !dcqcn {
                    args.push("--no-dcqcn");
                }
                let result = fabric(&format!("fabric-{mode}-{workload}-{dcqcn}"), &args);
                let what = format!("{mode} {workload} dcqcn {dcqcn}");
                assert_eq!(result["drops"], 0, "{what}: {}", result["drops_by_reason"]);
                assert_eq!(result["incomplete_messages"], 0, "{what}");
                assert!(result["completion_us"].as_f64().unwrap() > 0.0, "{what}");
            }
        }
    }
}

/// `raceway check` on a fabric file prints its shape: tiers, oversubscription, bisection.
#[test]
fn check_prints_a_fabric_files_tiers_and_bisection_bandwidth() {
    let dir = temp_dir("fabric-check");
    let config = dir.join("fabric.toml");
    std::fs::write(&config, fabric_file()).unwrap();
    let output = raceway().args(["check", "-c"]).arg(&config).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(printed.starts_with("fabric test-2x2: 4 hosts, 4 switches in 2 tiers\n"), "{printed}");
    assert!(printed.contains("bisection bandwidth: 200 Gb/s of 200 Gb/s"), "{printed}");
}

/// results.json says what ran, from the command line: a Poisson run names `poisson`, its size
/// distribution (and its digest), load and duration; a flow file run its file, its digest
/// and the lines after its declared flows that were not read; neither has a message size.
#[test]
fn results_name_the_workload_and_its_parameters_from_the_command_line() {
    let cdf = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/fabric/cdf/websearch.txt");
    let poisson =
        fabric("fabric-poisson", &["--workload", "poisson", "--cdf", cdf, "--load", "0.3", "--duration-us", "1000"]);
    let parameters = &poisson["workload_parameters"];
    assert_eq!(poisson["workload"], "poisson");
    assert!(poisson["message_bytes"].is_null() && parameters["message_bytes"].is_null());
    assert_eq!((parameters["load"].as_f64(), parameters["duration_us"].as_f64()), (Some(0.3), Some(1000.0)));
    assert!(parameters["cdf"].as_str().unwrap().ends_with("websearch.txt"));
    let digest = raceway::digest::hex(&std::fs::read(cdf).unwrap());
    assert_eq!(parameters["cdf_digest"].as_str(), Some(digest.as_str()));
    let dir = temp_dir("fabric-flow-file");
    let flows = dir.join("flow.txt");
    std::fs::write(&flows, "1\n0 3 3 100 100000 2\n1 2 3 100 100000 2\n\nhelp text\n").unwrap();
    let listed = fabric("fabric-flow-file-run", &["--workload", "flows", "--flow-file", flows.to_str().unwrap()]);
    let parameters = &listed["workload_parameters"];
    assert_eq!((listed["workload"].as_str(), parameters["flows"].as_u64()), (Some("flows"), Some(1)));
    assert_eq!(parameters["flow_file_lines_not_read"], 2, "a flow and the help text");
    assert_eq!((listed["incomplete_messages"].as_u64(), parameters["first_start_us"].as_f64()), (Some(0), Some(2e6)));
}

/// A lossy incast with a small buffer loses frames, and a horizon shorter than the hosts need
/// to send them again leaves messages incomplete. The results count them, and the FCT
/// percentiles say how many they leave out (a p99 of the survivors alone once read as the
/// workload's).
#[test]
fn fct_percentiles_say_how_many_incomplete_messages_they_leave_out() {
    let text = fabric_file()
        .replace("lossless = [3]", "lossless = []")
        .replace("buffer_bytes = 4194304", "buffer_bytes = 262144");
    let args =
        ["--workload", "incast", "--no-dcqcn", "--message-bytes", "1048576", "--messages", "4", "--horizon-ms", "0.5"];
    let result = fabric_of(&text, "fabric-lossy-incast", &args);
    let incomplete = result["incomplete_messages"].as_u64().unwrap();
    assert!(result["drops"].as_u64().unwrap() > 0 && incomplete > 0, "{result}");
    assert_eq!(result["fct_us"]["left_out"].as_u64().unwrap(), incomplete);
    assert_eq!(result["fct_us"]["messages"].as_u64().unwrap() + incomplete, result["messages"].as_u64().unwrap());
    assert!(result["completion_us"].is_null());
    // The summary line says it too.
    let dir = temp_dir("fabric-lossy-incast-line");
    std::fs::write(dir.join("fabric.toml"), &text).unwrap();
    let output = run_ok(
        raceway().args(["fabric", "-c"]).arg(dir.join("fabric.toml")).arg("--out").arg(dir.join("out")).args(args),
    );
    let line = String::from_utf8_lossy(&output.stdout).to_string();
    let completed = result["fct_us"]["messages"].as_u64().unwrap();
    assert!(line.contains(&format!("(of the {completed} completed; {incomplete} incomplete left out)")), "{line}");
}

/// All-to-all among 8 hosts: ECMP collisions on the uplinks and 7:1 fan-in at every host.
#[test]
fn dcqcn_reduces_pfc_pauses() {
    let eight_hosts = fabric_file().replace("hosts_per_leaf = 2", "hosts_per_leaf = 4");
    let args = ["--workload", "alltoall", "--message-bytes", "1048576", "--messages", "2"];
    let with = fabric_of(&eight_hosts, "fabric-dcqcn-on", &args);
    let without = fabric_of(&eight_hosts, "fabric-dcqcn-off", &[&args[..], &["--no-dcqcn"]].concat());
    let (paused_with, paused_without) =
        (with["pfc_pause_total_us"].as_f64().unwrap(), without["pfc_pause_total_us"].as_f64().unwrap());
    assert!(paused_without > 0.0, "no PFC without DCQCN: the test does not congest");
    assert!(paused_with < paused_without * 0.5, "PFC pause {paused_with} us with DCQCN, {paused_without} us without");
    assert!(with["cnps_sent"].as_u64().unwrap() > 0);
    assert_eq!(without["cnps_sent"], 0);
    // Marks happen either way; only DCQCN senders react to them.
    assert!(without["ecn_marked"].as_u64().unwrap() > 0);
}

#[test]
fn results_are_deterministic_for_a_seed() {
    let args = ["--workload", "alltoall", "--mode", "random", "--message-bytes", "131072", "--messages", "2"];
    let first = fabric("fabric-seed-a", &[&args[..], &["--seed", "7"]].concat());
    let again = fabric("fabric-seed-b", &[&args[..], &["--seed", "7"]].concat());
    assert_eq!(first, again);
    let other = fabric("fabric-seed-c", &[&args[..], &["--seed", "8"]].concat());
    assert_ne!(first["max_queue_bytes"], other["max_queue_bytes"], "random spraying ignores the seed");
}

/// Every file under `dir`, by path below it, with its bytes.
fn files_under(dir: &std::path::Path) -> std::collections::BTreeMap<std::path::PathBuf, Vec<u8>> {
    let mut files = std::collections::BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                files.insert(path.strip_prefix(dir).unwrap().to_path_buf(), std::fs::read(&path).unwrap());
            }
        }
    }
    files
}

/// Six partitions (four leaves with four hosts each, two spines) on one thread, two and more
/// threads than partitions: every output, charts included, byte for byte. Adaptive uplinks
/// draw random numbers, DCQCN sends CNPs across partitions, and the all-reduce releases
/// messages on arrivals.
#[test]
fn any_number_of_threads_writes_the_same_outputs() {
    let text = fabric_file().replace("leaves = 2", "leaves = 4").replace("hosts_per_leaf = 2", "hosts_per_leaf = 4");
    let dir = temp_dir("fabric-threads");
    let config = dir.join("fabric.toml");
    std::fs::write(&config, text).unwrap();
    for workload in ["alltoall", "allreduce"] {
        let outputs: Vec<_> = ["1", "2", "8"]
            .iter()
            .map(|threads| {
                let out = dir.join(format!("{workload}-{threads}"));
                let args =
                    ["--workload", workload, "--mode", "adaptive", "--message-bytes", "131072", "--messages", "2"];
                run_ok(
                    raceway()
                        .args(["fabric", "-c"])
                        .arg(&config)
                        .args(args)
                        .args(["--threads", threads])
                        .arg("--out")
                        .arg(&out),
                );
                files_under(&out)
            })
            .collect();
        assert!(outputs[0].len() > 6 * 5, "{workload}: {:?}", outputs[0].keys());
        let results: serde_json::Value =
            serde_json::from_slice(&outputs[0][std::path::Path::new("results.json")]).unwrap();
        assert_eq!(results["incomplete_messages"], 0, "{workload}: {results}");
        if workload == "alltoall" {
            assert!(results["cnps_sent"].as_u64().unwrap() > 0, "no CNP crossed: {results}");
        }
        for (threads, other) in ["2", "8"].iter().zip(&outputs[1..]) {
            let differ: Vec<_> = outputs[0].keys().filter(|path| outputs[0].get(*path) != other.get(*path)).collect();
            assert!(
                differ.is_empty() && outputs[0].len() == other.len(),
                "{workload} on {threads} threads: {differ:?}"
            );
        }
    }
}

#[test]
fn per_switch_outputs_are_written() {
    let dir = temp_dir("fabric-outputs");
    let config = dir.join("fabric.toml");
    std::fs::write(&config, fabric_file()).unwrap();
    let out = dir.join("out");
    run_ok(raceway().args(["fabric", "-c"]).arg(&config).args(["--workload", "incast", "--out"]).arg(&out));
    for switch in ["leaf0", "leaf1", "spine0", "spine1"] {
        for file in ["stats.json", "index.html", "series.json", "throughput.svg", "pfc.svg"] {
            assert!(out.join(switch).join(file).exists(), "{switch}/{file}");
        }
        let index = std::fs::read_to_string(out.join(switch).join("index.html")).unwrap();
        assert!(index.contains(&format!("<h1>raceway fabric: {switch}</h1>")), "{index}");
    }
    // The incast into host 0 queues only on its path: leaf0's port to it, the uplinks of
    // leaf1 (whose two senders may hash onto one spine) and the spines' ports to leaf0.
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let queues = results["max_queue_bytes"].as_object().unwrap();
    assert!(queues["leaf0:h0"].as_u64().unwrap() > 0);
    let on_path = ["leaf0:h0", "leaf1:s0", "leaf1:s1", "spine0:l0", "spine1:l0"];
    for (port, depth) in queues {
        if !on_path.contains(&port.as_str()) {
            assert!(depth.as_u64().unwrap() < 20_000, "{port} queued {depth} bytes off the incast's path");
        }
    }
}

#[test]
fn fabric_mistakes_are_one_error_line() {
    let dir = temp_dir("fabric-mistakes");
    let config = dir.join("fabric.toml");
    std::fs::write(&config, fabric_file()).unwrap();
    let out = dir.join("out");
    let run = |args: &[&str]| {
        raceway().args(["fabric", "-c"]).arg(&config).arg("--out").arg(&out).args(args).output().unwrap()
    };
    // An HPCC topology of one rack of four hosts, for a fabric of two leaves of two.
    let (flows, topology) = (dir.join("flow.txt"), dir.join("topology.txt"));
    std::fs::write(&flows, "1\n1 2 3 100 1000 2\n").unwrap();
    let links: String = (1..5).map(|host| format!("0 {host} 100Gbps 0.001ms 0\n")).collect();
    std::fs::write(&topology, format!("5 1 4\n0\n{links}")).unwrap();
    let (flows, topology) = (flows.to_str().unwrap(), topology.to_str().unwrap());
    for (args, word) in [
        (vec!["--workload", "flows", "--flow-file", flows, "--hpcc-topology", topology], "racks"),
        (vec!["--workload", "broadcast"], "--workload"),
        (vec!["--workload", "incast", "--target", "4"], "--target"),
        (vec!["--workload", "incast", "--mode", "teleport"], "mode"),
        (vec!["--workload", "incast", "--roce-mtu", "20000"], "--roce-mtu"),
        (vec!["--workload", "incast", "--threads", "0"], "--threads"),
        (vec!["--workload", "incast", "--message-bytes", "20000000000000000"], "--message-bytes"),
        (vec!["--workload", "alltoall", "--messages", "4000000000"], "--messages"),
    ] {
        let output = run(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains(word), "{}", lines[0]);
    }
    std::fs::write(&config, fabric_file().replace("leaves = 2", "leaves = 0")).unwrap();
    let output = run(&["--workload", "incast"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("fabric.leaves"));
}

/// A switch config for the listed fabric: its `mac`, `ports` (name, speed Gb/s, the peer's
/// MAC) and `routes` (prefix, port).
fn listed_switch(name: &str, mac: &str, ports: &[(&str, u32, &str)], routes: &[(&str, &str)]) -> String {
    let mut text = format!(
        "[switch]\nname = \"{name}\"\nmac = \"{mac}\"\nbuffer_bytes = 4194304\n\
         [qos]\ndscp_to_tc = {{ 26 = 3, 48 = 6, default = 0 }}\nlossless = [3]\n\
         [qos.ecn.3]\nkmin_bytes = 50000\nkmax_bytes = 200000\npmax = 0.2\n"
    );
    for (port, speed, peer_mac) in ports {
        text.push_str(&format!(
            "[[port]]\nname = \"{port}\"\nspeed_gbps = {speed}\ncable_m = 5\npeer_mac = \"{peer_mac}\"\n"
        ));
    }
    for (prefix, port) in routes {
        text.push_str(&format!("[[route]]\nprefix = \"{prefix}\"\nport = \"{port}\"\n"));
    }
    text
}

/// A fabric listed switch by switch (configs, hosts, links) rather than generated: two
/// leaves under one spine, a slower 40G spine link, and an incast across it.
#[test]
fn a_listed_fabric_runs_its_own_configs_and_links() {
    let dir = temp_dir("fabric-listed");
    const SPINE_MAC: &str = "02:00:00:00:05:01";
    let leaf = |name: &str, mac: &str, local: &str| {
        listed_switch(
            name,
            mac,
            &[("h0", 100, "02:00:00:00:10:01"), ("h1", 100, "02:00:00:00:10:02"), ("up", 40, SPINE_MAC)],
            &[(&format!("{local}.1/32"), "h0"), (&format!("{local}.2/32"), "h1"), ("0.0.0.0/0", "up")],
        )
    };
    std::fs::write(dir.join("leaf-a.toml"), leaf("leaf-a", "02:00:00:00:0a:01", "10.0.0")).unwrap();
    std::fs::write(dir.join("leaf-b.toml"), leaf("leaf-b", "02:00:00:00:0b:01", "10.0.1")).unwrap();
    std::fs::write(
        dir.join("spine.toml"),
        listed_switch(
            "spine",
            SPINE_MAC,
            &[("a", 40, "02:00:00:00:0a:01"), ("b", 40, "02:00:00:00:0b:01")],
            &[("10.0.0.0/24", "a"), ("10.0.1.0/24", "b")],
        ),
    )
    .unwrap();
    let fabric = r#"
[fabric]
name = "listed"

[[switch]]
name = "leaf-a"
config = "leaf-a.toml"
[[switch]]
name = "leaf-b"
config = "leaf-b.toml"
[[switch]]
name = "spine"
config = "spine.toml"

[[host]]
name = "a1"
address = "10.0.0.1"
[[host]]
name = "a2"
address = "10.0.0.2"
[[host]]
name = "b1"
address = "10.0.1.1"
[[host]]
name = "b2"
address = "10.0.1.2"

[[link]]
a = "a1"
b = "leaf-a:h0"
[[link]]
a = "a2"
b = "leaf-a:h1"
[[link]]
a = "b1"
b = "leaf-b:h0"
[[link]]
a = "b2"
b = "leaf-b:h1"
[[link]]
a = "leaf-a:up"
b = "spine:a"
cable_m = 30
[[link]]
a = "leaf-b:up"
b = "spine:b"
speed_gbps = 40
"#;
    let path = dir.join("fabric.toml");
    std::fs::write(&path, fabric).unwrap();
    let out = dir.join("out");
    run_ok(
        raceway()
            .args(["fabric", "-c"])
            .arg(&path)
            .args(["--workload", "incast", "--message-bytes", "262144", "--out"])
            .arg(&out),
    );
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(results["incomplete_messages"], 0);
    assert_eq!(results["drops"], 0);
    // Two of the three senders cross the 40G spine link, which is where the queue builds.
    let queues = results["max_queue_bytes"].as_object().unwrap();
    assert!(queues["spine:a"].as_u64().unwrap() > 0 || queues["leaf-b:up"].as_u64().unwrap() > 0, "{queues:?}");
    assert!(out.join("spine").join("stats.json").exists());

    // Mistakes name the file and the link; a peer_mac that is not the linked switch's MAC is
    // one (the peer would drop every frame as not_router_mac).
    let spine_config = std::fs::read_to_string(dir.join("spine.toml")).unwrap();
    std::fs::write(dir.join("spine.toml"), spine_config.replace("02:00:00:00:0b:01", "02:00:00:00:0b:02")).unwrap();
    let output =
        raceway().args(["fabric", "-c"]).arg(&path).args(["--workload", "incast", "--out"]).arg(&out).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    for word in ["link[5]", "port 'b' of switch 'spine'", "not_router_mac"] {
        assert!(stderr.contains(word), "{stderr} lacks {word}");
    }
    std::fs::write(dir.join("spine.toml"), spine_config).unwrap();
    let run = |text: &str| {
        std::fs::write(&path, text).unwrap();
        raceway().args(["fabric", "-c"]).arg(&path).args(["--workload", "incast", "--out"]).arg(&out).output().unwrap()
    };
    for (text, words) in [
        (fabric.replace("speed_gbps = 40", "speed_gbps = 100"), ["link[5].speed_gbps", "differs"]),
        (fabric.replace("b = \"spine:b\"", "b = \"spine:c\""), ["link[5].b", "no port 'c'"]),
        (
            fabric.replace("a = \"b2\"\nb = \"leaf-b:h1\"", "a = \"b2\"\nb = \"leaf-b:h0\""),
            ["link[3]", "already linked"],
        ),
        (
            fabric.replace("[[link]]\na = \"leaf-b:up\"\nb = \"spine:b\"\nspeed_gbps = 40\n", ""),
            ["port 'up' of switch 'leaf-b'", "no link"],
        ),
    ] {
        let output = run(&text);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        for word in words {
            assert!(stderr.contains(word), "{stderr} lacks {word}");
        }
    }
}

/// Runs `script` (in perf/) with the debug binary and `env`, and checks that its table has
/// `runs` rows and that each is a line of docs/FABRIC.md: the fabric runs in virtual time, so
/// any difference is a stale figure, not noise.
fn docs_hold_the_table_of(script: &str, env: &[(&str, &str)], runs: usize) {
    let dir = temp_dir(script.trim_end_matches(".sh"));
    let path = format!("{}/../perf/{script}", env!("CARGO_MANIFEST_DIR"));
    let output = std::process::Command::new("bash")
        .arg(&path)
        .env("RACEWAY", env!("CARGO_BIN_EXE_raceway"))
        .env("OUT", &dir)
        .envs(env.iter().copied())
        .output()
        .unwrap_or_else(|err| panic!("bash runs {path}: {err}"));
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let table = String::from_utf8(output.stdout).unwrap();
    let rows: Vec<&str> = table.lines().filter(|line| line.starts_with('|')).collect();
    assert_eq!(rows.len(), runs + 2, "a header, a rule and {runs} runs:\n{table}");
    let docs = include_str!("../../docs/FABRIC.md");
    let stale: Vec<&&str> = rows.iter().filter(|row| !docs.lines().any(|line| line == **row)).collect();
    assert!(
        stale.is_empty(),
        "docs/FABRIC.md's table differs from perf/{script} in:\n{stale:#?}\nits output:\n{table}"
    );
}

/// docs/FABRIC.md's fabric table is what `perf/fabric-table.sh` prints now, row for row.
#[test]
fn the_readmes_fabric_table_is_what_its_script_prints() {
    docs_hold_the_table_of("fabric-table.sh", &[], 16);
}

/// docs/FABRIC.md's lossless-or-lossy table at 8 hosts is what `perf/lossy-vs-lossless.sh`
/// prints with those settings now, row for row.
#[test]
fn the_lossy_versus_lossless_table_is_what_its_script_prints() {
    docs_hold_the_table_of("lossy-vs-lossless.sh", &[("SIZE", "2x2x4"), ("DURATION_US", "100")], 18);
}
