//! The kernel's routes side by side in one key (its aliases): IPv4's `append`, `prepend` and
//! `change`, IPv6 routes it does not merge, routes over nexthop objects under a prepend, and
//! IPv6 routes that expire. Each case from the kernel's own behaviour, then a random
//! differential over them, against `ip route get` as everywhere in this tier. Both passed
//! twice beside `stress-ng --cpu 2` (2026-12-07): the one timing here, an expiry, has the
//! control thread's 250 ms margin (`kernel::EXPIRY_MARGIN`), and the comparisons ask again
//! for up to 10 s.

use crate::lab::*;
use crate::oracle::{disagreements, kernel_answers, raceway_answers, KernelAnswer};
use crate::routes::{edges, FibPlan, Random};
use std::time::{Duration, Instant};

/// A lab of four ports (`host0`-`host3`: 10.0.i.1/24, fd00:i::1/64) whose gateways .10 and
/// ::10 are resolved (permanent neighbours) and .11/::11 are not; nexthop objects 1-4 (one
/// on each port, IPv6) and group 10 of 1-3.
fn lab(tag: &str) -> (Lab, FibPlan, std::path::PathBuf, Vec<String>) {
    let (lab, mut plan, config_path, ports) = FibPlan::start(tag);
    let mut setup = Vec::new();
    for port in 0..ports.len() {
        setup.push(format!("neigh replace 10.0.{port}.10 lladdr 02:00:00:0{port}:00:10 dev host{port} nud permanent"));
        setup.push(format!("neigh replace fd00:{port}::10 lladdr 02:00:00:0{port}:00:11 dev host{port} nud permanent"));
        setup.push(format!("nexthop add id {} via fd00:{port}::10 dev host{port}", port + 1));
        plan.objects.push((port as u32 + 1, false));
    }
    setup.push("nexthop add id 10 group 1/2/3".to_string());
    plan.objects.push((10, false));
    plan.batch(&setup);
    (lab, plan, config_path, ports)
}

/// raceway's answer for `address`: its action, and the ports of its next hops.
fn answer(config: &std::path::Path, address: &str) -> (String, Vec<String>, serde_json::Value) {
    let answer = raceway_answers(config, &[address.parse().unwrap()]).remove(0);
    let ports = answer["next_hops"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|hop| hop["port"].as_str().map(str::to_string))
        .collect();
    let action = format!("{} {}", answer["action"].as_str().unwrap_or(""), answer["reason"].as_str().unwrap_or(""));
    (action, ports, answer["behind"].clone())
}

/// Waits until raceway's next hops for `address` are on `ports` (it follows the kernel in
/// milliseconds; 10 s is the margin of a busy machine), then holds raceway to the kernel for
/// it.
fn expect(plan: &FibPlan, config: &std::path::Path, all: &[String], address: &str, ports: &[&str], case: &str) {
    let mut last = None;
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let (_, got, _) = answer(config, address);
        if got == ports {
            break;
        }
        last = Some(got);
        std::thread::sleep(Duration::from_millis(50));
    }
    let (_, got, _) = answer(config, address);
    assert_eq!(got, ports, "{case}: {address} (before: {last:?})");
    let (found, _) = disagreements(plan, config, &[address.parse().unwrap()], all);
    assert!(found.is_empty(), "{case}: {found:?}");
}

/// The cases, each as the kernel answers it.
#[test]
fn routes_of_one_key_answer_as_the_kernel_keeps_them() {
    let _alone = alone();
    let (mut lab, mut plan, config, ports) = lab("rwa");
    // 1. IPv4 append: the first holds; deleting it, the appended one.
    plan.batch(&[
        "route add 198.18.1.0/24 via 10.0.2.10 dev host2".into(),
        "route append 198.18.1.0/24 via 10.0.3.10 dev host3".into(),
    ]);
    expect(&plan, &config, &ports, "198.18.1.7", &["host2"], "append");
    let (_, _, behind) = answer(&config, "198.18.1.7");
    assert_eq!((behind["aliases"].as_u64(), behind["others"].as_u64()), (Some(1), Some(0)), "{behind}");
    plan.batch(&["route del 198.18.1.0/24 via 10.0.2.10 dev host2".into()]);
    expect(&plan, &config, &ports, "198.18.1.7", &["host3"], "append, the first deleted");
    assert!(answer(&config, "198.18.1.7").2.is_null(), "nothing waits behind it now");
    // IPv4 prepend: in force at once; deleted, the one behind it again.
    plan.batch(&[
        "route add 198.18.2.0/24 via 10.0.2.10 dev host2".into(),
        "route prepend 198.18.2.0/24 via 10.0.3.10 dev host3".into(),
    ]);
    expect(&plan, &config, &ports, "198.18.2.7", &["host3"], "prepend");
    plan.batch(&["route del 198.18.2.0/24 via 10.0.3.10 dev host3".into()]);
    expect(&plan, &config, &ports, "198.18.2.7", &["host2"], "prepend, deleted");
    // By protocol: the static route deleted, bgp's appended one is left.
    plan.batch(&[
        "route add 198.18.3.0/24 via 10.0.2.10 dev host2 proto static".into(),
        "route append 198.18.3.0/24 via 10.0.3.10 dev host3 proto bgp".into(),
        "route del 198.18.3.0/24 proto static".into(),
    ]);
    expect(&plan, &config, &ports, "198.18.3.7", &["host3"], "proto");
    // `change` takes the first one's place, the appended one still behind it.
    plan.batch(&[
        "route append 198.18.3.0/24 via 10.0.1.10 dev host1".into(),
        "route change 198.18.3.0/24 via 10.0.0.10 dev host0 proto bgp".into(),
    ]);
    expect(&plan, &config, &ports, "198.18.3.7", &["host0"], "change");

    // 2. IPv6: a dev route and a gateway route are not merged: the first is used.
    plan.batch(&[
        "route add 2001:db8:4::/48 dev host2".into(),
        "route append 2001:db8:4::/48 via fd00:3::10 dev host3".into(),
    ]);
    expect(&plan, &config, &ports, "2001:db8:4::7", &["host2"], "IPv6 dev then gateway");
    plan.batch(&["route add 2001:db8:7::/48 dev host1".into(), "route append 2001:db8:7::/48 dev host0".into()]);
    expect(&plan, &config, &ports, "2001:db8:7::7", &["host1"], "IPv6 two dev routes");
    plan.batch(&["route del 2001:db8:7::/48 dev host1".into()]);
    expect(&plan, &config, &ports, "2001:db8:7::7", &["host0"], "IPv6 two dev routes, the first deleted");

    // 3. IPv6 prepend onto a route over a nexthop object: the object's three hops stay.
    plan.batch(&[
        "route add 2001:db8:5::/48 nhid 10".into(),
        "route prepend 2001:db8:5::/48 via fd00:0::10 dev host0".into(),
    ]);
    expect(&plan, &config, &ports, "2001:db8:5::7", &["host0", "host1", "host2"], "IPv6 prepend onto an object");

    // 4. IPv6 expiry: forwarded by until its time, never after: from then the kernel answers
    // (by the route behind it), and once the kernel deletes it the route behind it is ours.
    // Its time is the kernel's; raceway stops 250 ms before (kernel::EXPIRY_MARGIN), which is
    // the margin this holds by on a busy machine (the control thread runs at real-time
    // priority: main.rs of this tier).
    plan.batch(&[
        "route add 2001:db8:6::/48 via fd00:3::10 dev host3 metric 2000".into(),
        "route add 2001:db8:6::/48 via fd00:2::10 dev host2 metric 1000 expires 3".into(),
    ]);
    let added = Instant::now();
    expect(&plan, &config, &ports, "2001:db8:6::7", &["host2"], "an expiring route, in its time");
    let address: std::net::IpAddr = "2001:db8:6::7".parse().unwrap();
    let kernel_uses_it = || match &kernel_answers(&plan.control, &[address])[0] {
        KernelAnswer::Route(route) => route["dev"] == "host2",
        _ => false,
    };
    wait_for("the kernel to skip the expired route", Duration::from_secs(10), || !kernel_uses_it());
    let (action, got, _) = answer(&config, "2001:db8:6::7");
    assert!(
        got != ["host2"],
        "{:.2} s after it was added with 3 s to live, the kernel skips it and raceway still forwards by it ({action})",
        added.elapsed().as_secs_f64()
    );
    let (found, _) = disagreements(&plan, &config, &[address], &ports);
    assert!(found.is_empty(), "expired: {found:?}");
    let stats = lab.stop();
    assert_eq!(stats["mbufs"]["pool"], stats["mbufs"]["available_at_exit"]);
}

/// One random route command over `prefix` for the alias differential: add, append, prepend,
/// change or replace (both families: gateways resolved or not, `dev` routes, nexthop objects,
/// blackholes, `proto`, IPv6 `expires`), or a delete of one of its routes by its attributes.
fn alias_line(random: &mut Random, plan: &FibPlan, prefix: &str, v4: bool, expiring: &mut Vec<String>) -> String {
    let verb = *random.pick(&["add", "append", "append", "prepend", "prepend", "change", "replace", "del"]);
    let port = random.below(plan.ports as u64);
    let host = 10 + random.below(2);
    let gateway = if v4 { format!("10.0.{port}.{host}") } else { format!("fd00:{port}::{host:x}") };
    let metric = if random.chance(20) { " metric 20" } else { "" };
    let proto = *random.pick(&["", "", " proto static", " proto bgp"]);
    let what = match random.below(10) {
        0..=4 => format!("via {gateway} dev host{port}"),
        5 | 6 => format!("dev host{port}"),
        7 if !v4 => format!("nhid {}", 1 + random.below(4)),
        7 => format!("via 10.0.{port}.{host} dev host{port} onlink"),
        8 if !v4 => "nhid 10".to_string(),
        8 => "blackhole".to_string(),
        _ => format!("via {gateway} dev host{port}"),
    };
    let (head, what) = if what == "blackhole" {
        (format!("route {verb} blackhole {prefix}"), String::new())
    } else {
        (format!("route {verb} {prefix}"), format!(" {what}"))
    };
    // Some IPv6 routes expire: most long after the test, a few within it.
    let expires = if !v4 && verb != "del" && random.chance(25) {
        let seconds = if random.chance(30) { 3 } else { 600 };
        if seconds == 3 {
            expiring.push(prefix.to_string());
        }
        format!(" expires {seconds}")
    } else {
        String::new()
    };
    format!("{head}{metric}{what}{proto}{expires}")
}

/// A random differential over the kernel's aliases: 330 prefixes, each given 2-5 random
/// commands of `alias_line` in turn, in batches; at least 2,000 destinations at their edges
/// asked of both; then again once the routes with 3 s to live have expired. A new seed each
/// run, printed; RACEWAY_ALIAS_SEED=N repeats it.
#[test]
fn random_aliases_answer_as_the_kernel_does() {
    let _alone = alone();
    let seed = match std::env::var("RACEWAY_ALIAS_SEED").ok() {
        Some(seed) => seed.parse().expect("RACEWAY_ALIAS_SEED: a number"),
        None => std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1,
    };
    eprintln!("FIB alias differential: seed {seed} (RACEWAY_ALIAS_SEED={seed} repeats this run)");
    let mut random = Random(seed);
    let (mut lab, mut plan, config, ports) = lab("rwr");
    let prefixes: Vec<(String, bool)> = (0..330)
        .map(|index| {
            let v4 = index % 2 == 0;
            let prefix = FibPlan::prefix(&mut random, v4, 16);
            (if v4 { prefix.replacen("10.", "198.", 1) } else { prefix.replacen("fd", "20", 1) }, v4)
        })
        .collect();
    let mut expiring = Vec::new();
    let rounds = 5;
    for round in 0..rounds {
        let mut lines = Vec::new();
        for (prefix, v4) in &prefixes {
            if round < 2 || random.chance(60) {
                lines.push(alias_line(&mut random, &plan, prefix, *v4, &mut expiring));
            }
        }
        plan.batch(&lines);
    }
    let mut addresses: Vec<std::net::IpAddr> =
        prefixes.iter().flat_map(|(prefix, _)| edges(prefix, &mut random)).collect();
    addresses.sort();
    addresses.dedup();
    assert!(addresses.len() >= 2_000, "only {} destinations", addresses.len());
    let aliased = plan
        .kernel_routes()
        .iter()
        .filter_map(|route| route["dst"].as_str().map(|dst| (dst.to_string(), route["metric"].as_u64())))
        .fold(std::collections::HashMap::<_, usize>::new(), |mut counts, key| {
            *counts.entry(key).or_default() += 1;
            counts
        })
        .values()
        .filter(|&&count| count > 1)
        .count();
    eprintln!("{aliased} keys hold several routes");
    assert!(aliased >= 30, "seed {seed}: only {aliased} keys with several routes: the test would prove little");
    let check = |plan: &FibPlan, what: &str| {
        let (found, kinds) = disagreements(plan, &config, &addresses, &ports);
        if let Some(first) = found.first() {
            let prefix =
                first.split("\"prefix\":\"").nth(1).and_then(|rest| rest.split('"').next()).unwrap_or("").to_string();
            let mut history = String::new();
            for batch in 1..=plan.batches {
                let lines = std::fs::read_to_string(plan.dir.join(format!("batch-{batch}.txt"))).unwrap_or_default();
                for line in lines
                    .lines()
                    .filter(|line| !prefix.is_empty() && line.contains(prefix.split_whitespace().next().unwrap_or("-")))
                {
                    history += &format!("batch {batch}: {line}\n");
                }
            }
            let family = if prefix.contains(':') { "-6" } else { "-4" };
            let kernel = run("ip", &["-n", &plan.control, family, "route", "show", "table", "all"]);
            eprintln!(
                "the commands of {prefix}, the first prefix that disagrees:\n{history}the kernel lists:\n{}",
                String::from_utf8_lossy(&kernel.stdout)
                    .lines()
                    .filter(|l| l.contains(prefix.split('/').next().unwrap_or("-")))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
        assert!(
            found.is_empty(),
            "{what} (seed {seed}): {} of {} destinations disagree ({kinds:?}):\n{}",
            found.len(),
            addresses.len(),
            found.iter().take(10).cloned().collect::<Vec<_>>().join("\n")
        );
    };
    check(&plan, "after the commands");
    if !expiring.is_empty() {
        // Past the last 3 s route's time (the last batch was applied before this).
        std::thread::sleep(Duration::from_millis(3_300));
        check(&plan, "once the 3 s routes expired");
    }
    let stats = lab.stop();
    assert_eq!(stats["mbufs"]["pool"], stats["mbufs"]["available_at_exit"]);
}
