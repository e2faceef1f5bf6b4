//! The FIB against its oracle: random routes and deltas in the kernel, and raceway's answer
//! for every edge address equal to `ip route get`'s.

use crate::lab::*;
use crate::oracle::disagreements;
use crate::routes::{edges, route_prefix, FibPlan, Random};

/// The FIB is the kernel's: random routes of every kind in raceway's namespace (both
/// families, at least 2,000, over nexthop objects and groups, with weights, metrics, onlink
/// and unresolved gateways, routes to an interface that is no port, tos, from and the default
/// table), then random deltas (routes added, deleted and replaced, a port down and up, an
/// address removed, neighbours changed, a nexthop id reused). After each, at least 10,000
/// destinations at prefix edges are asked of the kernel (`ip -j route get fibmatch`) and of
/// raceway (`show route --json`): not one disagreement. The seed is printed;
/// RACEWAY_FIB_SEED=N repeats a run, RACEWAY_FIB_SEED=random explores.
#[test]
fn the_fib_answers_as_the_kernel_does_for_random_routes_and_deltas() {
    let _alone = alone();
    // A fixed seed by default, so that make test is the same test every time; any other seed
    // explores (RACEWAY_FIB_SEED=N, or =random for one from the clock).
    let seed = match std::env::var("RACEWAY_FIB_SEED").ok().as_deref() {
        Some("random") => {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1
        }
        Some(seed) => seed.parse().expect("RACEWAY_FIB_SEED: a number or 'random'"),
        None => 42,
    };
    eprintln!("FIB differential test: seed {seed} (RACEWAY_FIB_SEED={seed} repeats this run)");
    let mut random = Random(seed);
    let (mut lab, mut plan, config_path, ports) = FibPlan::start("rwg");
    let mut setup = vec![
        "link set lo up".to_string(),
        "link add xa type veth peer name xb".to_string(),
        "link set xa up".to_string(),
        "link set xb up".to_string(),
        "addr add 10.250.0.1/24 dev xa".to_string(),
        "addr add fd50::1/64 dev xa nodad".to_string(),
    ];
    // Half the gateways resolved (fe80::1 on every port, each with its own MAC), half not.
    for port in 0..ports.len() {
        for host in 10..22 {
            for gateway in [format!("10.0.{port}.{host}"), format!("fd00:{port}::{host:x}"), format!("fe80::{host:x}")]
            {
                if random.chance(50) || gateway == "fe80::a" {
                    setup.push(format!("neigh replace {gateway} lladdr 02:00:00:{port:02x}:{:02x}:{host:02x} dev host{port} nud permanent", random.below(256)));
                }
            }
        }
        setup.push(format!("neigh replace fe80::1 lladdr 02:00:00:{port:02x}:00:01 dev host{port} nud permanent"));
    }
    // Nexthop objects: singles of both families, then groups of them with weights.
    for id in 1..=24u32 {
        let v4 = id % 2 == 0;
        let port = random.below(ports.len() as u64) as usize;
        setup.push(format!("nexthop add id {id} via {} dev host{port}", plan.gateway(&mut random, port, v4)));
        plan.objects.push((id, v4));
    }
    for id in 100..112u32 {
        let v4 = id % 2 == 0;
        let members: Vec<String> = (0..2 + random.below(2))
            .map(|_| {
                let singles: Vec<u32> = (1..=24).filter(|single| (single % 2 == 0) == v4).collect();
                format!("{},{}", random.pick(&singles), 1 + random.below(8))
            })
            .collect();
        setup.push(format!("nexthop add id {id} group {}", members.join("/")));
        plan.objects.push((id, v4));
    }
    plan.batch(&setup);
    let routes: Vec<String> = (0..2_300).map(|_| plan.route(&mut random, "add", None, None)).collect();
    plan.batch(&routes);
    // Metrics: some prefixes again at other metrics.
    let prefixes: Vec<String> = routes
        .iter()
        .filter_map(|line| {
            line.split_whitespace().find(|word| word.contains('/') && !word.starts_with("fd99")).map(str::to_string)
        })
        .collect();
    let mut again = Vec::new();
    for prefix in prefixes {
        if random.chance(15) {
            let metric = 40 + random.below(20);
            again.push(plan.route(&mut random, "add", Some(&prefix), Some(metric)));
        }
    }
    plan.batch(&again);
    let mainly = |plan: &FibPlan| {
        plan.kernel_routes()
            .into_iter()
            .filter(|route| {
                route["protocol"] != "kernel"
                    && route["table"] != "local"
                    && route["dst"].as_str().is_some_and(|dst| !dst.starts_with("fe80") && !dst.starts_with("ff00"))
            })
            .collect::<Vec<_>>()
    };
    let installed = mainly(&plan);
    assert!(installed.len() >= 2_000, "only {} routes were installed", installed.len());
    let destinations = |plan: &FibPlan, random: &mut Random| {
        let mut addresses: Vec<std::net::IpAddr> = Vec::new();
        for route in plan.kernel_routes() {
            let dst = route["dst"].as_str().unwrap_or("");
            if dst.starts_with("fe80") || dst.starts_with("ff00") {
                continue;
            }
            let v4 = if dst == "default" { !route.to_string().contains("\"gateway\":\"f") } else { !dst.contains(':') };
            addresses.extend(edges(&route_prefix(dst, v4), random));
        }
        // And the prefixes policy rules select.
        let rules = ok("ip", &["-n", &plan.control, "-j", "rule", "show"]);
        for rule in serde_json::from_str::<Vec<serde_json::Value>>(&rules).unwrap_or_default() {
            if let (Some(dst), Some(len)) = (rule["dst"].as_str(), rule["dstlen"].as_u64()) {
                addresses.extend(edges(&format!("{dst}/{len}"), random));
            }
        }
        addresses.sort();
        addresses.dedup();
        addresses
    };
    let check = |plan: &FibPlan, random: &mut Random, what: &str| {
        let addresses = destinations(plan, random);
        assert!(addresses.len() >= 10_000, "{what}: only {} destinations", addresses.len());
        let (found, kinds) = disagreements(plan, &config_path, &addresses, &ports);
        // Every kind of answer was met at first (a test that only ever saw one would prove
        // little); the deltas may take some away (a rule's or an AnyIP range's cover). (The
        // rule's own answers are not always met: some runs' third round shows none, not yet
        // understood; the unit tests in control/kernel.rs hold rules.)
        let mut expected = Vec::new();
        if what == "after the first routes" {
            expected.extend([
                "forward ",
                "glean unresolved",
                "drop blackhole",
                "kernel unreachable",
                "kernel prohibit",
            ]);
            expected.extend(["kernel local", "kernel not_a_port", "kernel throw", "kernel tos", "kernel source"]);
            expected.push("kernel no_route");
        }
        for kind in expected {
            assert!(
                kinds.get(kind).is_some_and(|count| *count > 0),
                "{what} (seed {seed}): no '{kind}' answer among {kinds:?}"
            );
        }
        // The first few of each kind of disagreement (the kernel's answer's shape, raceway's
        // action and reason).
        let mut kinds: std::collections::BTreeMap<String, Vec<&String>> = std::collections::BTreeMap::new();
        for why in &found {
            let kernel = if why.contains("kernel Error") {
                "error"
            } else if why.contains("kernel Delivered") {
                "delivered"
            } else if why.contains("nexthops") {
                "multipath"
            } else {
                "route"
            };
            let ours = why.split("\"action\":").nth(1).unwrap_or("").split(',').next().unwrap_or("").to_string();
            let reason = why.split("\"reason\":").nth(1).unwrap_or("").split('}').next().unwrap_or("").to_string();
            kinds.entry(format!("{kernel} / {ours} {reason}")).or_default().push(why);
        }
        let report: Vec<String> = kinds
            .iter()
            .map(|(kind, whys)| {
                format!(
                    "{kind}: {}\n  {}",
                    whys.len(),
                    whys.iter().take(3).map(|why| why.as_str()).collect::<Vec<_>>().join("\n  ")
                )
            })
            .collect();
        if !found.is_empty() {
            // What a reader of the failure needs next: the kernel's nexthop objects.
            let objects = ok("ip", &["-n", &plan.control, "nexthop", "show"]);
            std::fs::write(plan.dir.join("nexthops.txt"), objects).unwrap();
        }
        assert!(
            found.is_empty(),
            "{what} (seed {seed}): {} of {} destinations disagree (the kernel's nexthop objects are in {}):\n{}",
            found.len(),
            addresses.len(),
            plan.dir.join("nexthops.txt").display(),
            report.join("\n")
        );
        addresses.len()
    };
    check(&plan, &mut random, "after the first routes");

    // Deltas, batch by batch.
    for round in 0..4 {
        let mut lines = Vec::new();
        let current = mainly(&plan);
        for _ in 0..150 {
            let route = random.pick(&current);
            let dst = route["dst"].as_str().unwrap();
            let v4 = !route.to_string().contains(':') || dst.contains('.');
            let prefix = route_prefix(dst, v4);
            let metric = route["metric"].as_u64().map_or(String::new(), |metric| format!(" metric {metric}"));
            let table = route["table"].as_str().map_or(String::new(), |table| format!(" table {table}"));
            let tos = route["tos"].as_str().map_or(String::new(), |tos| format!(" tos {tos}"));
            let from = route["from"].as_str().map_or(String::new(), |from| format!(" from {from}"));
            match random.below(3) {
                0 => lines.push(format!("route del {prefix}{tos}{from}{metric}{table}")),
                1 => lines.push(plan.route(&mut random, "replace", Some(&prefix), route["metric"].as_u64())),
                _ => lines.push(plan.route(&mut random, "add", None, None)),
            }
        }
        // IPv6 multipath: one next hop deleted.
        if let Some(route) = current.iter().find(|route| {
            route["dst"].as_str().is_some_and(|dst| dst.contains(':'))
                && route["nexthops"].is_array()
                && route["nhid"].is_null()
        }) {
            let hop = &route["nexthops"][0];
            let metric = route["metric"].as_u64().map_or(String::new(), |metric| format!(" metric {metric}"));
            lines.push(format!(
                "route del {} via {} dev {}{metric}",
                route_prefix(route["dst"].as_str().unwrap(), false),
                hop["gateway"].as_str().unwrap_or("::"),
                hop["dev"].as_str().unwrap()
            ));
        }
        // Neighbours change: one moves to another MAC, one goes.
        let port = random.below(ports.len() as u64);
        lines.push(format!(
            "neigh replace 10.0.{port}.{} lladdr 02:00:00:ee:{round:02x}:01 dev host{port} nud permanent",
            10 + random.below(12)
        ));
        lines.push(format!("neigh del fe80::{:x} dev host{port}", 10 + random.below(12)));
        // A nexthop id reused: deleted, then defined again elsewhere.
        let (id, v4) = *random.pick(&plan.objects.iter().filter(|(id, _)| *id <= 24).copied().collect::<Vec<_>>());
        lines.push(format!("nexthop del id {id}"));
        let other = random.below(ports.len() as u64) as usize;
        lines.push(format!("nexthop add id {id} via {} dev host{other}", plan.gateway(&mut random, other, v4)));
        match round {
            // A port goes down (and comes back in the next round).
            0 => lines.push("link set host3 down".to_string()),
            // Default routes: nothing is unrouted any more.
            1 => lines.extend([
                "link set host3 up".to_string(),
                "route add 0.0.0.0/0 via 10.0.1.10 dev host1".to_string(),
                "route add ::/0 via fe80::1 dev host2".to_string(),
            ]),
            // A port loses its IPv4 address (and has it again in the next round); a policy
            // rule selects the prefix of a main-table route (its edges are destinations), /16 to
            // /23: no AnyIP range of the local table (/24 and longer here) holds it.
            2 => {
                let selected = current
                    .iter()
                    .filter(|route| route["table"].is_null() && route["type"].is_null())
                    .filter_map(|route| route["dst"].as_str())
                    .find(|dst| {
                        dst.contains('.')
                            && dst.split_once('/').is_some_and(|(_, len)| (16..=23).contains(&len.parse().unwrap_or(0)))
                    })
                    .unwrap_or("10.64.0.0/16");
                lines.extend([
                    format!("rule add to {selected} table 100 priority 100"),
                    "addr del 10.0.2.1/24 dev host2".to_string(),
                ]);
            }
            _ => lines.push("addr add 10.0.2.1/24 dev host2".to_string()),
        }
        plan.batch(&lines);
        check(&plan, &mut random, &format!("after delta round {round}"));
    }
    let stats = lab.stop();
    assert_eq!(stats["mbufs"]["pool"], stats["mbufs"]["available_at_exit"]);
}
