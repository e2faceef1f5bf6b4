//! The kernel as the FIB's oracle: `ip route get` for each address in the switch's namespace,
//! raceway's own answers (`raceway show route`), and the comparison that says where and why
//! they differ, with what the kernel's tables held.

use crate::bin::*;
use crate::lab::*;
use crate::routes::{route_prefix, FibPlan};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What the kernel says for one destination: it delivers it itself (`local`, `broadcast`,
/// `anycast`), forwards it by a route (`fibmatch`: the FIB entry that matches), or the error
/// of the lookup.
#[derive(Debug, Clone)]
pub(crate) enum KernelAnswer {
    Delivered(String),
    Route(serde_json::Value),
    Error(String),
}

/// The kernel's answer for each address: `ip -j route get` says whether it delivers or
/// forwards (its local table comes first, which `fibmatch` does not show) or fails; for what
/// it forwards, `ip -j route get fibmatch` gives the route.
pub(crate) fn kernel_answers(control: &str, addresses: &[std::net::IpAddr]) -> Vec<KernelAnswer> {
    let plain = route_gets(control, addresses, "");
    let matched = route_gets(control, addresses, "fibmatch ");
    plain
        .into_iter()
        .zip(matched)
        .map(|(plain, matched)| match plain {
            Err(why) => KernelAnswer::Error(why),
            Ok(route) => {
                let kind = route["type"].as_str().unwrap_or("unicast").to_string();
                let local = route["cache"].as_array().into_iter().flatten().any(|flag| flag == "local");
                match (kind.as_str(), local, matched) {
                    ("blackhole", _, _) => KernelAnswer::Route(route),
                    ("broadcast" | "anycast", _, _) => KernelAnswer::Delivered(kind),
                    (_, true, _) | ("local", _, _) => KernelAnswer::Delivered("local".into()),
                    (_, false, Ok(matched)) => KernelAnswer::Route(matched),
                    (_, false, Err(why)) => KernelAnswer::Error(why),
                }
            }
        })
        .collect()
}

/// `ip -j route get [fibmatch] ADDR` for each address, in one batch: the route, or the error.
pub(crate) fn route_gets(
    control: &str,
    addresses: &[std::net::IpAddr],
    how: &str,
) -> Vec<Result<serde_json::Value, String>> {
    let mut child = Command::new("ip")
        .args(["-n", control, "-j", "-force", "-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let input: String = addresses.iter().map(|address| format!("route get {how}{address}\n")).collect();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        stdin.write_all(input.as_bytes()).unwrap();
    });
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap();
    // Errors name the batch line that failed: "RTNETLINK answers: WHY" then "Command failed -:N".
    let mut failed = std::collections::HashMap::new();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let mut why = String::new();
    for line in stderr.lines() {
        if let Some(number) = line.strip_prefix("Command failed -:") {
            failed.insert(number.trim().parse::<usize>().unwrap(), std::mem::take(&mut why));
        } else {
            why = line.trim_start_matches("RTNETLINK answers: ").to_string();
        }
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let answered = stdout.lines().filter(|line| line.starts_with('[')).count();
    assert_eq!(answered + failed.len(), addresses.len(), "one answer per question:\n{stderr}");
    let mut routes = stdout.lines().filter(|line| line.starts_with('['));
    (1..=addresses.len())
        .map(|line| match failed.remove(&line) {
            Some(why) => Err(why),
            None => {
                let answer: Vec<serde_json::Value> =
                    serde_json::from_str(routes.next().expect("an answer per line")).unwrap();
                Ok(answer.into_iter().next().expect("one route"))
            }
        })
        .collect()
}

/// What the comparison needs of the kernel besides its answers: the usable neighbours (by
/// interface and address, their MAC) and the prefixes of routes the FIB sends to the kernel
/// for want of representing them (with the reason raceway gives).
pub(crate) struct KernelContext {
    pub(crate) neighbors: std::collections::HashMap<(String, String), String>,
    /// The nexthop object of the main-table route in force (the lowest metric) of each prefix,
    /// when it is over one.
    pub(crate) objects: std::collections::HashMap<String, u64>,
    /// Each nexthop object's next hops (a group's expanded), as `ip -j route` shows them.
    pub(crate) nexthops: std::collections::HashMap<u64, Vec<serde_json::Value>>,
    pub(crate) unrepresented: std::collections::HashSet<(String, &'static str)>,
    /// Each nexthop group's members, by id.
    pub(crate) groups: std::collections::HashMap<u64, Vec<u64>>,
}

pub(crate) fn kernel_context(plan: &FibPlan) -> KernelContext {
    let text = ok("ip", &["-n", &plan.control, "-j", "neigh", "show"]);
    let mut neighbors = std::collections::HashMap::new();
    for entry in serde_json::from_str::<Vec<serde_json::Value>>(&text).unwrap() {
        let usable = entry["state"].as_array().into_iter().flatten().any(|state| {
            matches!(state.as_str(), Some("REACHABLE" | "STALE" | "DELAY" | "PROBE" | "PERMANENT" | "NOARP"))
        });
        if let (true, Some(mac)) = (usable, entry["lladdr"].as_str()) {
            neighbors.insert(
                (entry["dev"].as_str().unwrap().to_string(), entry["dst"].as_str().unwrap().to_string()),
                mac.to_string(),
            );
        }
    }
    let mut unrepresented = std::collections::HashSet::new();
    let mut in_force: std::collections::HashMap<String, (u64, Option<u64>)> = std::collections::HashMap::new();
    for route in plan.kernel_routes() {
        let dst = route["dst"].as_str().unwrap_or("");
        let v4 = !dst.contains(':') && dst != "default"
            || (dst == "default" && route["gateway"].as_str().is_none_or(|g| !g.contains(':')));
        let prefix = route_prefix(dst, v4);
        // A route past its time is skipped by the kernel's lookups until it deletes it.
        let expired = route["expires"].as_i64().is_some_and(|left| left <= 0);
        if route["table"].is_null()
            && route["type"].is_null()
            && route["tos"].is_null()
            && route["from"].is_null()
            && !expired
        {
            let metric = route["metric"].as_u64().unwrap_or(0);
            let entry = in_force.entry(prefix.clone()).or_insert((u64::MAX, None));
            if metric < entry.0 {
                *entry = (metric, route["nhid"].as_u64());
            }
        }
        if route["tos"].as_str().is_some_and(|tos| tos != "0" && tos != "default") {
            unrepresented.insert((prefix.clone(), "tos"));
        }
        if route["from"].is_string() {
            unrepresented.insert((prefix.clone(), "source"));
        }
        if route["table"] == "default" {
            unrepresented.insert((prefix.clone(), "default_table"));
        }
        // Past (or nearly at) its time raceway sends an expiring route's traffic to the kernel.
        if route["expires"].is_i64() || route["expires"].is_u64() {
            unrepresented.insert((prefix, "expired"));
        }
    }
    // Policy rules that select by destination (the kernel's defaults select everything).
    let text = ok("ip", &["-n", &plan.control, "-j", "rule", "show"]);
    for rule in serde_json::from_str::<Vec<serde_json::Value>>(&text).unwrap_or_default() {
        if let (Some(dst), Some(len)) = (rule["dst"].as_str(), rule["dstlen"].as_u64()) {
            unrepresented.insert((format!("{dst}/{len}"), "rule"));
        }
    }
    let text = ok("ip", &["-n", &plan.control, "-j", "nexthop", "show"]);
    let listed: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap_or_default();
    let single: std::collections::HashMap<u64, &serde_json::Value> = listed
        .iter()
        .filter(|entry| entry["group"].is_null())
        .map(|entry| (entry["id"].as_u64().unwrap(), entry))
        .collect();
    let mut nexthops = std::collections::HashMap::new();
    let mut groups = std::collections::HashMap::new();
    for entry in &listed {
        let id = entry["id"].as_u64().unwrap();
        let hops = match entry["group"].as_array() {
            Some(members) => members
                .iter()
                .filter_map(|member| {
                    let hop = single.get(&member["id"].as_u64()?)?;
                    Some(serde_json::json!({ "dev": hop["dev"], "gateway": hop["gateway"], "weight": member["weight"].as_u64().unwrap_or(1) }))
                })
                .collect(),
            None => vec![serde_json::json!({ "dev": entry["dev"], "gateway": entry["gateway"] })],
        };
        nexthops.insert(id, hops);
        if let Some(members) = entry["group"].as_array() {
            groups.insert(id, members.iter().filter_map(|member| member["id"].as_u64()).collect());
        }
    }
    let objects = in_force.into_iter().filter_map(|(prefix, (_, id))| Some((prefix, id?))).collect();
    KernelContext { neighbors, objects, nexthops, unrepresented, groups }
}

/// Whether prefix `inner` (`a/len`) lies inside `outer`.
pub(crate) fn prefix_inside(inner: &str, outer: &str) -> bool {
    let parse = |prefix: &str| -> Option<(u128, u32, bool)> {
        let (address, len) = prefix.split_once('/')?;
        let len: u32 = len.parse().ok()?;
        match address.parse::<std::net::IpAddr>().ok()? {
            std::net::IpAddr::V4(v4) => Some((u128::from(u32::from(v4)) << 96, len, true)),
            std::net::IpAddr::V6(v6) => Some((u128::from(v6), len, false)),
        }
    };
    let (Some((inner, inner_len, inner_v4)), Some((outer, outer_len, outer_v4))) = (parse(inner), parse(outer)) else {
        return false;
    };
    let mask = |len: u32| if len == 0 { 0 } else { u128::MAX << (128 - len) };
    inner_v4 == outer_v4 && inner_len >= outer_len && inner & mask(outer_len) == outer & mask(outer_len)
}

/// Why raceway's `answer` for `address` differs from the kernel's, or `None` when they agree.
pub(crate) fn disagreement(
    address: std::net::IpAddr,
    kernel: &KernelAnswer,
    answer: &serde_json::Value,
    context: &KernelContext,
    ports: &[String],
) -> Option<String> {
    let action = answer["action"].as_str().unwrap_or("");
    let reason = answer["reason"].as_str().unwrap_or("");
    let prefix = answer["prefix"].as_str().unwrap_or("");
    let differ = || Some(format!("{address}: kernel {kernel:?}, raceway {answer}"));
    // Routes raceway cannot represent send their prefix to the kernel: right, if slow.
    if action == "kernel" && ["tos", "source", "default_table", "rule", "expired"].contains(&reason) {
        // A source route or a rule covers what is inside its prefix (the kernel's lookup goes
        // into its subtree, or the rule's table first), the others only their own prefix.
        let covering = ["source", "rule"].contains(&reason);
        let known = context
            .unrepresented
            .iter()
            .any(|(at, why)| *why == reason && (at == prefix || (covering && prefix_inside(prefix, at))));
        return (!known).then(|| format!("{address}: raceway says {reason} at {prefix}, the kernel has no such route"));
    }
    // A throw route ends the main table's lookup; the kernel goes on in the default table.
    if action == "kernel" && reason == "throw" {
        let agrees = match kernel {
            KernelAnswer::Error(why) => why == "Network is unreachable",
            KernelAnswer::Route(route) => route["table"] == "default",
            KernelAnswer::Delivered(_) => false,
        };
        return (!agrees).then(differ).flatten();
    }
    let route = match kernel {
        KernelAnswer::Delivered(kind) => return (action != "kernel" || reason != kind).then(differ).flatten(),
        KernelAnswer::Error(why) => {
            let agrees = match why.as_str() {
                "Network is unreachable" => action == "kernel" && reason == "no_route",
                "No route to host" => action == "kernel" && reason == "unreachable",
                "Permission denied" => action == "kernel" && reason == "prohibit",
                "Invalid argument" => action == "drop" && reason == "blackhole",
                _ => false,
            };
            return if agrees { None } else { differ() };
        }
        KernelAnswer::Route(route) => route,
    };
    if route["type"] == "blackhole" {
        return (action != "drop" || reason != "blackhole").then(differ).flatten();
    }
    // IPv6 `fibmatch` may name another route over the same nexthop object than the one that
    // matched (the kernel reports the object's first route): the same next hops, which is
    // what forwarding uses, provided raceway's prefix is over that object in the kernel too.
    // The kernel's dump leaves out IPv6 routes chained between a merged route's members, so
    // the object of raceway's prefix may be missing from the context: a fibmatch route that
    // does not even hold the address names the object the lookup went through.
    let fibmatch_dst = route_prefix(route["dst"].as_str().unwrap_or(""), address.is_ipv4());
    let holds_address = prefix_inside(&format!("{address}/128"), &fibmatch_dst);
    let object = context.objects.get(prefix).copied().or_else(|| route["nhid"].as_u64().filter(|_| !holds_address));
    let same_object = route["nhid"].as_u64().is_some() && address.is_ipv6() && object.is_some();
    if route_prefix(route["dst"].as_str().unwrap_or(""), address.is_ipv4()) != prefix && !same_object {
        return differ();
    }
    match route["type"].as_str().unwrap_or("unicast") {
        "unicast" => {}
        _ => return differ(),
    }
    let listed: Vec<serde_json::Value>;
    let hops: Vec<&serde_json::Value> = match route["nexthops"].as_array() {
        // The object raceway's prefix is over, when fibmatch named another route.
        _ if same_object && route_prefix(route["dst"].as_str().unwrap_or(""), false) != prefix => {
            let id = object.expect("same_object");
            // Named by fibmatch alone, the object may be the member of a group the kernel's
            // hash chose: the group raceway holds, if one holds it and matches.
            let named_alone = !context.objects.contains_key(prefix);
            let ours: std::collections::BTreeSet<(Option<String>, Option<String>)> = answer["next_hops"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|hop| (hop["port"].as_str().map(str::to_string), hop["ip"].as_str().map(str::to_string)))
                .collect();
            let hops_of = |object: u64| -> std::collections::BTreeSet<(Option<String>, Option<String>)> {
                context
                    .nexthops
                    .get(&object)
                    .into_iter()
                    .flatten()
                    .map(|hop| (hop["dev"].as_str().map(str::to_string), hop["gateway"].as_str().map(str::to_string)))
                    .collect()
            };
            let group = context
                .groups
                .iter()
                .filter(|(_, members)| named_alone && members.contains(&id))
                .map(|(group, _)| *group)
                .find(|group| hops_of(*group) == ours);
            listed = context.nexthops.get(&group.unwrap_or(id)).cloned().unwrap_or_default();
            listed.iter().collect()
        }
        Some(hops) => hops.iter().collect(),
        None => vec![route],
    };
    if hops.iter().any(|hop| !ports.iter().any(|port| hop["dev"].as_str() == Some(port))) {
        return (action != "kernel" || reason != "not_a_port").then(differ).flatten();
    }
    let key =
        |port: Option<&str>, ip: Option<&str>, weight: u64| (port.map(str::to_string), ip.map(str::to_string), weight);
    // A lone next hop's weight means nothing (the kernel does not show it).
    let weight = |hop: &serde_json::Value, lone: bool| if lone { 1 } else { hop["weight"].as_u64().unwrap_or(1) };
    let mut expected: Vec<_> = hops
        .iter()
        .map(|hop| key(hop["dev"].as_str(), hop["gateway"].as_str(), weight(hop, hops.len() == 1)))
        .collect();
    let ours = answer["next_hops"].as_array().cloned().unwrap_or_default();
    let mut got: Vec<_> =
        ours.iter().map(|hop| key(hop["port"].as_str(), hop["ip"].as_str(), weight(hop, ours.len() == 1))).collect();
    expected.sort();
    got.sort();
    if expected != got {
        return differ();
    }
    // Each next hop is used exactly when the kernel's is alive and its neighbour usable, with
    // that neighbour's MAC.
    let mut used = false;
    for hop in &hops {
        let dev = hop["dev"].as_str().unwrap().to_string();
        let gateway = hop["gateway"].as_str().map_or_else(|| address.to_string(), str::to_string);
        let dead = hop["flags"].as_array().into_iter().flatten().any(|flag| flag == "dead");
        let mac = if dead { None } else { context.neighbors.get(&(dev.clone(), gateway)) };
        let ours = ours
            .iter()
            .find(|our| our["port"].as_str() == Some(&dev) && our["ip"].as_str() == hop["gateway"].as_str())?;
        if ours["mac"].as_str() != mac.map(String::as_str) {
            return differ();
        }
        used |= mac.is_some();
    }
    let expected_action = if used { "forward" } else { "glean" };
    (action != expected_action).then(differ).flatten()
}

/// raceway's answers for `addresses` (`show route --json`).
pub(crate) fn raceway_answers(config: &std::path::Path, addresses: &[std::net::IpAddr]) -> Vec<serde_json::Value> {
    let mut command = raceway();
    command.args(["show", "--json", "-c"]).arg(config).arg("route");
    command.args(addresses.iter().map(ToString::to_string));
    let output = command.output().unwrap();
    assert!(output.status.success(), "show route: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The disagreements for `addresses`, asked again (both sides) while some remain, for up to
/// 10 s: raceway follows the kernel within milliseconds, but a neighbour the kernel learns
/// between the two questions must not count.
///
/// Also returns how many of raceway's first answers had each action and reason, so that a run
/// that never met some kind of route is seen.
pub(crate) fn disagreements(
    plan: &FibPlan,
    config: &std::path::Path,
    addresses: &[std::net::IpAddr],
    ports: &[String],
) -> (Vec<String>, std::collections::BTreeMap<String, usize>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut asking: Vec<std::net::IpAddr> = addresses.to_vec();
    let mut kinds = std::collections::BTreeMap::new();
    loop {
        let kernel = kernel_answers(&plan.control, &asking);
        let ours = raceway_answers(config, &asking);
        if kinds.is_empty() {
            for answer in &ours {
                let kind =
                    format!("{} {}", answer["action"].as_str().unwrap_or(""), answer["reason"].as_str().unwrap_or(""));
                *kinds.entry(kind).or_default() += 1;
            }
        }
        let context = kernel_context(plan);
        assert_eq!(ours.len(), asking.len());
        let found: Vec<(std::net::IpAddr, String)> = asking
            .iter()
            .zip(&kernel)
            .zip(&ours)
            .filter_map(|((address, kernel), ours)| {
                Some((*address, disagreement(*address, kernel, ours, &context, ports)?))
            })
            .collect();
        if found.is_empty() || Instant::now() > deadline {
            return (found.into_iter().map(|(_, why)| why).collect(), kinds);
        }
        asking = found.into_iter().map(|(address, _)| address).collect();
        std::thread::sleep(Duration::from_millis(200));
    }
}
