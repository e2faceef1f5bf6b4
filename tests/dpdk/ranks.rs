//! `raceway fabric` under `mpirun` (the `mpi` feature, which `make test` builds): a fabric
//! split over 1 to 4 ranks writes every output byte for byte as one process on one thread
//! does, on a two-tier and a three-tier fabric, for each collective and for a lossy incast
//! under each transport; a rank given another fabric file is refused, and a killed rank
//! ends the job within seconds. Needs Open MPI's `mpirun` (make deps).

use crate::bin::*;
use crate::util::*;
use std::path::Path;
use std::process::Command;

/// `mpirun` starting `ranks` ranks on this machine, however many cores it has (root is
/// allowed: the tiers run as root).
fn mpirun(ranks: usize) -> Command {
    let mut command = Command::new("mpirun");
    command.args(["--oversubscribe", "--allow-run-as-root", "-np", &ranks.to_string()]);
    command
}

/// Every file under `dir`, by path below it, with its bytes.
fn files_under(dir: &Path) -> std::collections::BTreeMap<std::path::PathBuf, Vec<u8>> {
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

/// Runs `args` on `text`'s fabric in one process on one thread, then under `mpirun` on 1, 2,
/// 3 and 4 ranks (of one thread, and of two on 2 ranks), and asserts that every output is the
/// same bytes (the queue pairs' rates too, when asked for); returns the one process's
/// results.json.
fn ranks_write_what_one_process_writes(name: &str, text: &str, args: &[&str]) -> serde_json::Value {
    let dir = temp_dir(name);
    let config = dir.join("fabric.toml");
    std::fs::write(&config, text).unwrap();
    let fabric = |command: &mut Command, threads: &str, out: &Path| {
        let command = command.arg(env!("CARGO_BIN_EXE_raceway")).args(["fabric", "-c"]).arg(&config).args(args);
        run_ok(command.args(["--threads", threads]).arg("--out").arg(out));
    };
    let alone = dir.join("alone");
    let output =
        run_ok(raceway().args(["fabric", "-c"]).arg(&config).args(args).args(["--threads", "1", "--out"]).arg(&alone));
    let expected = files_under(&alone);
    assert!(expected.len() > 10, "{name}: {:?}", expected.keys());
    // Three ranks also exchange in rounds of 1 KiB (as more than 2 GiB would go, in MPI's
    // 32-bit counts).
    for (ranks, threads, round) in [(1, "1", ""), (2, "1", ""), (2, "2", ""), (3, "1", "1024"), (4, "1", "")] {
        let out = dir.join(format!("ranks-{ranks}-threads-{threads}"));
        let mut command = mpirun(ranks);
        if !round.is_empty() {
            command.env("RACEWAY_MPI_ROUND_BYTES", round).args(["-x", "RACEWAY_MPI_ROUND_BYTES"]);
        }
        fabric(&mut command, threads, &out);
        let written = files_under(&out);
        let differ: Vec<_> = expected.keys().filter(|path| expected.get(*path) != written.get(*path)).collect();
        assert!(
            differ.is_empty() && written.len() == expected.len(),
            "{name} on {ranks} ranks of {threads} threads: {differ:?} differ; {:?} written",
            written.keys()
        );
    }
    assert!(!output.stdout.is_empty());
    serde_json::from_slice(&expected[Path::new("results.json")]).unwrap()
}

/// Four leaves of four hosts and two spines: six partitions to spread.
fn two_tier() -> String {
    raceway::testing::leaf_spine("ranks-2x2", "spine_cable_m = 20", 200_000)
        .replace("leaves = 2", "leaves = 4")
        .replace("hosts_per_leaf = 2", "hosts_per_leaf = 4")
}

/// Two pods of two leaves and two spines, four cores: twelve partitions over three tiers.
fn three_tier() -> String {
    raceway::testing::leaf_spine("ranks-clos", "pods = 2\ncores = 4\ncore_cable_m = 50", 200_000)
}

#[test]
fn a_two_tier_fabric_on_mpi_ranks_writes_what_one_process_writes() {
    for workload in ["incast", "alltoall", "allreduce"] {
        let args =
            ["--workload", workload, "--mode", "adaptive", "--message-bytes", "65536", "--messages", "2", "--qp-rates"];
        let results = ranks_write_what_one_process_writes(&format!("ranks-two-tier-{workload}"), &two_tier(), &args);
        assert_eq!(results["incomplete_messages"], 0, "{results}");
    }
}

#[test]
fn a_three_tier_fabric_on_mpi_ranks_writes_what_one_process_writes() {
    for workload in ["incast", "alltoall", "allreduce"] {
        let args = ["--workload", workload, "--mode", "spray", "--message-bytes", "65536", "--messages", "2"];
        let results =
            ranks_write_what_one_process_writes(&format!("ranks-three-tier-{workload}"), &three_tier(), &args);
        assert_eq!(results["incomplete_messages"], 0, "{results}");
    }
}

/// A lossy incast (no lossless class, a 64 KiB buffer, a 200 us retransmission timeout)
/// drops frames, and each transport recovers them the same way on any number of ranks.
#[test]
fn a_lossy_incast_on_mpi_ranks_writes_what_one_process_writes_under_each_transport() {
    let lossy = two_tier()
        .replace("lossless = [3]\n", "")
        .replace("buffer_bytes = 4194304", "buffer_bytes = 65536")
        .replace("spine_cable_m = 20", "spine_cable_m = 20\nrto_us = 200");
    for transport in ["roce-gbn", "roce-sr", "irn", "uet-like"] {
        let args = ["--workload", "incast", "--transport", transport, "--message-bytes", "65536"];
        let results = ranks_write_what_one_process_writes(&format!("ranks-lossy-{transport}"), &lossy, &args);
        assert!(results["drops"].as_u64().unwrap() > 0, "{transport}: the incast drops: {results}");
        assert_eq!(results["incomplete_messages"], 0, "{transport}: {results}");
    }
}

/// Two ranks started on different fabric files: both refuse before running, in one line
/// naming the other rank, and the job exits with status 2.
#[test]
fn a_rank_given_another_fabric_file_is_refused() {
    let dir = temp_dir("ranks-mismatch");
    let (ours, theirs) = (dir.join("ours.toml"), dir.join("theirs.toml"));
    std::fs::write(&ours, two_tier()).unwrap();
    std::fs::write(&theirs, two_tier().replace("spine_cable_m = 20", "spine_cable_m = 30")).unwrap();
    let raceway = env!("CARGO_BIN_EXE_raceway");
    let mut command = mpirun(1);
    command.arg(raceway).args(["fabric", "--workload", "alltoall", "-c"]).arg(&ours).arg("--out").arg(dir.join("out"));
    command.args([":", "-np", "1", raceway, "fabric", "--workload", "alltoall", "-c"]).arg(&theirs);
    let output = command.arg("--out").arg(dir.join("out")).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("runs another fabric, workload or options (digest "), "{stderr}");
    assert!(!dir.join("out/results.json").exists(), "nothing ran");
}

/// A rank killed mid-run: mpirun ends the others and exits with an error within seconds,
/// never waiting for the lost rank.
#[test]
fn a_killed_rank_ends_the_job_within_seconds() {
    let dir = temp_dir("ranks-killed");
    let config = dir.join("fabric.toml");
    // 256 hosts all-to-all: seconds of work on each rank, far longer than the kill takes.
    let text = two_tier().replace("leaves = 4", "leaves = 16").replace("hosts_per_leaf = 4", "hosts_per_leaf = 16");
    std::fs::write(&config, text).unwrap();
    let mut command = mpirun(3);
    command.arg(env!("CARGO_BIN_EXE_raceway")).args(["fabric", "--workload", "alltoall", "--threads", "1", "-c"]);
    let mut job = command.arg(&config).arg("--out").arg(dir.join("out")).spawn().unwrap();
    // The ranks are mpirun's children (Open MPI starts local ranks itself).
    let children = || -> Vec<u32> {
        let listing =
            std::fs::read_to_string(format!("/proc/{}/task/{}/children", job.id(), job.id())).unwrap_or_default();
        listing.split_whitespace().filter_map(|pid| pid.parse().ok()).collect()
    };
    let started = std::time::Instant::now();
    let ranks = loop {
        let ranks = children();
        if ranks.len() == 3 {
            break ranks;
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(120), "the ranks never started: {ranks:?}");
        std::thread::yield_now();
    };
    let killed = std::time::Instant::now();
    assert!(Command::new("kill").args(["-KILL", &ranks[1].to_string()]).status().unwrap().success());
    let status = loop {
        if let Some(status) = job.try_wait().unwrap() {
            break status;
        }
        assert!(killed.elapsed() < std::time::Duration::from_secs(30), "the job outlived its killed rank by 30 s");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(!status.success(), "{status:?}");
    for rank in ranks {
        assert!(!Path::new(&format!("/proc/{rank}")).exists() || is_zombie(rank), "rank {rank} was left running");
    }
    assert!(!dir.join("out/results.json").exists());
}

/// Whether `pid` has exited and waits only to be reaped.
fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| stat.split_whitespace().nth(2) == Some("Z"))
}
